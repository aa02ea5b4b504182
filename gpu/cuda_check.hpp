#pragma once
/// Checks for every CUDA runtime, cuBLAS and NCCL call of lynxsim-calibrate and live mode: a failure throws
/// lynx::Error naming the file:line, the call and the library's error string.
#include "common/error.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

namespace lynx::gpu {

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess)
    fail(ErrorCode::kSystemFailure, "{}:{}: {} failed: {} ({})", file, line, call, cudaGetErrorName(status),
         cudaGetErrorString(status));
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCode::kSystemFailure, "{}:{}: {} failed: {} ({})", file, line, call, cublasGetStatusName(status),
         cublasGetStatusString(status));
}
inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status != ncclSuccess)
    fail(ErrorCode::kSystemFailure, "{}:{}: {} failed: {} ({})", file, line, call, ncclGetErrorString(status),
         ncclGetLastError(nullptr));
}

}  // namespace lynx::gpu

#define LYNX_CUDA_CHECK(call) ::lynx::gpu::check_cuda((call), #call, __FILE__, __LINE__)
#define LYNX_CUBLAS_CHECK(call) ::lynx::gpu::check_cublas((call), #call, __FILE__, __LINE__)
#define LYNX_NCCL_CHECK(call) ::lynx::gpu::check_nccl((call), #call, __FILE__, __LINE__)
