#include "calibrate/bench_timing.hpp"

#include "gpu/cuda_check.hpp"
#include "gpu/gpu_kernels.hpp"

#include <algorithm>
#include <memory>
#include <utility>

namespace lynx::calibrate {

namespace {

/// Runs `warmup` calls of `launch` and returns the fastest call's host time in microseconds
/// (later calls skip one-time setup such as cuBLAS's heuristics); 20 us without warm-up.
double warm_up(int warmup, const std::function<void()>& launch) {
  double fastest_us = 20.0;
  for (int i = 0; i < warmup; ++i) {
    const auto start = std::chrono::steady_clock::now();
    launch();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    fastest_us = i == 0 ? us : std::min(fastest_us, us);
  }
  return fastest_us;
}

/// Long enough for the host to enqueue `reps` calls of `host_us_per_call` plus their event
/// records (a few us each) with a 2x margin; within [50 us, 20 ms].
std::uint64_t hold_ns(int reps, double host_us_per_call) {
  constexpr double kEventRecordsUs = 8.0;
  const double us = 100.0 + 2.0 * reps * (host_us_per_call + kEventRecordsUs);
  return static_cast<std::uint64_t>(std::clamp(us, 50.0, 20'000.0) * 1000.0);
}

}  // namespace

TimingSummary time_on_stream(cudaStream_t stream, int warmup, int reps,
                             const std::function<void()>& launch, int ops_per_call, Feed feed) {
  LYNX_CHECK(reps >= 1 && ops_per_call >= 1, "reps {} ops {}", reps, ops_per_call);
  const double host_us = warm_up(warmup, launch);
  LYNX_CUDA_CHECK(cudaStreamSynchronize(stream));
  const EventSet events(2 * static_cast<std::size_t>(reps));
  if (feed == Feed::kHeld) LYNX_CUDA_CHECK(gpu::hold_stream(stream, hold_ns(reps, host_us)));
  for (int i = 0; i < reps; ++i) {
    LYNX_CUDA_CHECK(cudaEventRecord(events[2 * static_cast<std::size_t>(i)], stream));
    launch();
    LYNX_CUDA_CHECK(cudaEventRecord(events[2 * static_cast<std::size_t>(i) + 1], stream));
  }
  LYNX_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (std::size_t i = 0; i < static_cast<std::size_t>(reps); ++i)
    times.push_back(elapsed_us(events[2 * i], events[2 * i + 1]) / ops_per_call);
  return summarize(times);
}

std::vector<double> rep_times_on_devices(const std::vector<int>& devices,
                                         const std::vector<cudaStream_t>& streams, int warmup,
                                         int reps, const std::function<void()>& launch_all) {
  LYNX_CHECK(devices.size() == streams.size() && !devices.empty() && reps >= 1,
             "{} devices, {} streams, {} reps", devices.size(), streams.size(), reps);
  const double host_us = warm_up(warmup, launch_all);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    LYNX_CUDA_CHECK(cudaSetDevice(devices[d]));
    LYNX_CUDA_CHECK(cudaStreamSynchronize(streams[d]));
  }
  std::vector<std::unique_ptr<EventSet>> events;
  for (std::size_t d = 0; d < devices.size(); ++d) {
    LYNX_CUDA_CHECK(cudaSetDevice(devices[d]));
    events.push_back(std::make_unique<EventSet>(2 * static_cast<std::size_t>(reps)));
  }
  // Every stream is held while the host enqueues; the event records of all devices count.
  const double per_call_us = host_us + 8.0 * static_cast<double>(devices.size());
  for (std::size_t d = 0; d < devices.size(); ++d) {
    LYNX_CUDA_CHECK(cudaSetDevice(devices[d]));
    LYNX_CUDA_CHECK(gpu::hold_stream(streams[d], hold_ns(reps, per_call_us)));
  }
  const auto record = [&](std::size_t index) {
    for (std::size_t d = 0; d < devices.size(); ++d) {
      LYNX_CUDA_CHECK(cudaSetDevice(devices[d]));
      LYNX_CUDA_CHECK(cudaEventRecord((*events[d])[index], streams[d]));
    }
  };
  for (std::size_t i = 0; i < static_cast<std::size_t>(reps); ++i) {
    record(2 * i);
    launch_all();
    record(2 * i + 1);
  }
  std::vector<double> times(static_cast<std::size_t>(reps), 0.0);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    LYNX_CUDA_CHECK(cudaSetDevice(devices[d]));
    LYNX_CUDA_CHECK(cudaStreamSynchronize(streams[d]));
    for (std::size_t i = 0; i < times.size(); ++i)
      times[i] = std::max(times[i], elapsed_us((*events[d])[2 * i], (*events[d])[2 * i + 1]));
  }
  return times;
}

TimingSummary time_on_devices(const std::vector<int>& devices,
                              const std::vector<cudaStream_t>& streams, int warmup, int reps,
                              const std::function<void()>& launch_all) {
  return summarize(rep_times_on_devices(devices, streams, warmup, reps, launch_all));
}

Deadline::Deadline(double seconds) : start_(std::chrono::steady_clock::now()), seconds_(seconds) {}

bool Deadline::expired() const { return seconds_ > 0.0 && elapsed_s() > seconds_; }

double Deadline::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace lynx::calibrate
