#pragma once
/// Small RAII wrappers of the CUDA runtime shared by lynxsim-calibrate and live mode: a device
/// allocation, a stream, a set of events, and the time between two events.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstddef>
#include <vector>

namespace lynx::gpu {

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

}  // namespace lynx::gpu
