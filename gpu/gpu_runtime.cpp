#include "gpu/gpu_runtime.hpp"

#include "gpu/cuda_check.hpp"

#include <algorithm>
#include <utility>

namespace lynx::gpu {

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

bool DeviceBuffer::reserve(std::size_t bytes) {
  if (bytes <= bytes_ && data_ != nullptr) return false;
  release();
  LYNX_CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(bytes, 256)));
  bytes_ = bytes;
  return true;
}

void DeviceBuffer::release() noexcept {
  if (data_ != nullptr) (void)cudaFree(data_);  // destructor path: nothing sensible to throw
  data_ = nullptr;
  bytes_ = 0;
}

CudaStream::CudaStream() {
  LYNX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
CudaStream::~CudaStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}
CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

EventSet::EventSet(std::size_t count) : events_(count, nullptr) {
  for (cudaEvent_t& event : events_) LYNX_CUDA_CHECK(cudaEventCreate(&event));
}
EventSet::~EventSet() {
  for (cudaEvent_t event : events_)
    if (event != nullptr) (void)cudaEventDestroy(event);
}

double elapsed_us(cudaEvent_t start, cudaEvent_t end) {
  float ms = 0.0f;
  LYNX_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
  return static_cast<double>(ms) * 1000.0;
}

}  // namespace lynx::gpu
