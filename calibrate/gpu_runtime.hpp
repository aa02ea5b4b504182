#pragma once
/// Small RAII wrappers and the event timer used by every lynxsim-calibrate benchmark.
#include "calibrate/stats.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <vector>

namespace lynx::calibrate {

/// One cudaMalloc'd allocation on the device current at construction; grows on demand.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) { reserve(bytes); }
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// Makes the buffer at least `bytes` long; returns true when it had to reallocate (the
  /// contents are then undefined and the caller refills them).
  bool reserve(std::size_t bytes);
  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A non-blocking stream on the current device.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&&) = delete;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// A set of CUDA events on the current device, destroyed with the object.
class EventSet {
 public:
  explicit EventSet(std::size_t count);
  ~EventSet();
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  cudaEvent_t operator[](std::size_t i) const { return events_[i]; }
  std::size_t size() const { return events_.size(); }

 private:
  std::vector<cudaEvent_t> events_;
};

/// Milliseconds between two recorded, completed events, in microseconds.
double elapsed_us(cudaEvent_t start, cudaEvent_t end);

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
