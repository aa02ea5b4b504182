#include "gpu/cublas_gemm.hpp"

#include "gpu/cuda_check.hpp"

namespace lynx::gpu {

CublasHandle::CublasHandle(cudaStream_t stream) {
  LYNX_CUBLAS_CHECK(cublasCreate(&handle_));
  LYNX_CUBLAS_CHECK(cublasSetStream(handle_, stream));
}

CublasHandle::~CublasHandle() { (void)cublasDestroy(handle_); }

// A stored m×k (k×m when transposed) is, read column-major, op(A)ᵀ with ld k (or needs OP_T
// with ld m); likewise B with ld n (or OP_T with ld k).
void row_major_gemm(cublasHandle_t handle, const GemmDims& d, Dtype dtype, const void* a, const void* b, void* c) {
  const cudaDataType_t type = dtype == Dtype::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.0f, beta = 0.0f;
  const auto m = static_cast<int>(d.m), n = static_cast<int>(d.n), k = static_cast<int>(d.k);
  const cublasOperation_t op_b = d.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = d.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_b = d.transpose_b ? k : n;
  const int ld_a = d.transpose_a ? m : k;
  if (d.strided || d.batch > 1) {
    LYNX_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, op_b, op_a, n, m, k, &alpha, b, type, ld_b, d.k * d.n, a,
                                                 type, ld_a, d.m * d.k, &beta, c, type, n, d.m * d.n,
                                                 static_cast<int>(d.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    LYNX_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, n, m, k, &alpha, b, type, ld_b, a, type, ld_a, &beta, c, type,
                                   n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace lynx::gpu
