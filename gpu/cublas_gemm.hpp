#pragma once
/// cuBLAS for lynxsim-calibrate and live mode: a handle bound to a stream, and row-major
/// 16-bit GEMMs with fp32 accumulation (plain or strided-batched).
#include "gpu/gpu_kernels.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace lynx::gpu {

/// A cuBLAS handle whose work goes to `stream`, destroyed with the object.
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

/// A row-major GEMM C[m×n] = op(A)·op(B), `batch` of them strided when batch > 1 (or when
/// `strided` is set): A is m×k (k×m when transpose_a), B k×n (n×k when transpose_b).
struct GemmDims {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transpose_a = false, transpose_b = false;
  bool strided = false;  ///< cublasGemmStridedBatchedEx even for batch 1
};

/// Enqueues the GEMM on the handle's stream through column-major cuBLAS (computes
/// Cᵀ = op(B)ᵀ·op(A)ᵀ); A, B, C hold at least its elements. Checked (lynx::Error on failure).
void row_major_gemm(cublasHandle_t handle, const GemmDims& d, Dtype dtype, const void* a, const void* b, void* c);

}  // namespace lynx::gpu
