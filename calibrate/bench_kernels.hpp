#pragma once
/// Single-GPU benchmark sections: launch overhead, cuBLAS GEMMs (plain and strided-batched)
/// and our memory-bound kernels, on the current device.
#include "calibrate/bench_context.hpp"
#include "calibrate/workload_shapes.hpp"

#include <cublas_v2.h>

#include <vector>

namespace lynx::calibrate {

/// Enqueues row-major C[m×n] = op(A)·op(B) (`batch` strided GEMMs for attention shapes) on
/// the handle's stream (gpu::row_major_gemm); A, B, C hold at least the shape's elements.
void run_gemm(cublasHandle_t handle, const GemmShape& s, gpu::Dtype dtype, const void* a,
              const void* b, void* c);

/// settings.launch_rows rows "launch,empty_kernel": an empty kernel timed like every kernel.
void bench_launch(const BenchContext& ctx);
/// Every shape in every dtype: cublasGemmEx (kGemm) or cublasGemmStridedBatchedEx
/// (kAttention), fp32 accumulation, random inputs.
void bench_gemms(const BenchContext& ctx, const std::vector<GemmShape>& shapes);
/// Every memory-bound kernel shape in every dtype, random inputs.
void bench_memory_kernels(const BenchContext& ctx, const std::vector<MemoryKernelShape>& shapes);

}  // namespace lynx::calibrate
