#pragma once
/// The event timers of lynxsim-calibrate's benchmarks (repetitions on one stream or several
/// devices, summarised as median/p10/p90) and the run's wall-clock budget.
#include "calibrate/stats.hpp"
#include "gpu/gpu_runtime.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace lynx::calibrate {

// The CUDA runtime wrappers (gpu/) under the names the benchmarks use.
using gpu::CudaStream;
using gpu::DeviceBuffer;
using gpu::EventSet;
using gpu::elapsed_us;

/// How timed repetitions are fed to the GPU.
enum class Feed : std::uint8_t {
  /// A hold kernel keeps the stream busy while the host enqueues every repetition, so the
  /// GPU runs them back to back: event times are device time only, no host launch gaps.
  kHeld,
  /// Repetitions start as the host enqueues them: for short kernels the host's launch and
  /// event-record calls set the pace (what a host-bound stream sees).
  kHostPaced,
};

/// Times `launch` on `stream`: `warmup` untimed calls, then `reps` calls each between its own
/// pair of CUDA events recorded on `stream`; per-call time = event time / `ops_per_call`.
/// Returns median/p10/p90 in microseconds.
TimingSummary time_on_stream(cudaStream_t stream, int warmup, int reps,
                             const std::function<void()>& launch, int ops_per_call = 1,
                             Feed feed = Feed::kHeld);

/// The same over several devices at once (NCCL from one process, always held): `launch_all`
/// enqueues on every stream; a repetition's time is the longest of the devices' event times.
TimingSummary time_on_devices(const std::vector<int>& devices,
                              const std::vector<cudaStream_t>& streams, int warmup, int reps,
                              const std::function<void()>& launch_all);

/// Per-repetition times (us) of time_on_devices, unsummarised (MPI mode reduces them first).
std::vector<double> rep_times_on_devices(const std::vector<int>& devices,
                                         const std::vector<cudaStream_t>& streams, int warmup,
                                         int reps, const std::function<void()>& launch_all);

/// Wall-clock budget of a run: expired() once `seconds` have passed (never when seconds <= 0).
class Deadline {
 public:
  explicit Deadline(double seconds);
  bool expired() const;
  double elapsed_s() const;

 private:
  std::chrono::steady_clock::time_point start_;
  double seconds_;
};

}  // namespace lynx::calibrate
