#pragma once
/// Host launchers of the CUDA kernels lynxsim-calibrate times and live mode runs (implemented
/// in gpu_kernels.cu). Plain C++ header: the code that calls them is compiled by the host
/// compiler.
/// Every launcher enqueues on `stream` and returns cudaGetLastError() of the launch (callers
/// check it with LYNX_CUDA_CHECK). 16-bit data are bf16 or fp16 as `dtype` says; math is fp32.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lynx::gpu {

enum class Dtype : std::uint8_t { kBf16, kFp16 };

/// count values uniform in [−scale, scale) from a counter-based hash of (seed, index): random,
/// reproducible, never all zeros (tensor cores and HBM run faster on zeros).
cudaError_t fill_random(void* data, std::size_t count, Dtype dtype, std::uint64_t seed,
                        float scale, cudaStream_t stream);
/// count int64 ids uniform in [0, max_id).
cudaError_t fill_random_ids(std::int64_t* ids, std::size_t count, std::int64_t max_id,
                            std::uint64_t seed, cudaStream_t stream);

/// An empty kernel (one block of one warp, no memory traffic): the fixed cost of a launch.
cudaError_t launch_empty(cudaStream_t stream);
/// One thread that spins for `nanoseconds` (GPU global timer): holds the stream while the host
/// enqueues the timed repetitions behind it, so they run back to back with no host gaps.
cudaError_t hold_stream(cudaStream_t stream, std::uint64_t nanoseconds);

/// LayerNorm per row: y = (x − mean)·rstd·γ + β, mean/rstd stored in fp32 (as Apex/Megatron
/// keep them for backward). eps 1e-5.
cudaError_t layernorm(const void* x, const void* gamma, const void* beta, void* y, float* mean,
                      float* rstd, std::int64_t rows, std::int64_t cols, Dtype dtype,
                      cudaStream_t stream);
/// y = gelu(x + bias[col]), tanh approximation (Megatron's fused bias_gelu).
cudaError_t bias_gelu(const void* x, const void* bias, void* y, std::int64_t rows,
                      std::int64_t cols, Dtype dtype, cudaStream_t stream);
/// Scaled causal softmax per row (Megatron's scaled_upper_triang_masked_softmax): row r is
/// query position r % seq_len; columns after it get probability 0.
cudaError_t causal_softmax(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                           std::int64_t seq_len, float scale, Dtype dtype, cudaStream_t stream);
/// y = x·mask/keep_prob with mask = (hash(seed, i) < keep_prob), 1-byte mask stored.
cudaError_t dropout(const void* x, void* y, std::uint8_t* mask, std::size_t count,
                    float keep_prob, std::uint64_t seed, Dtype dtype, cudaStream_t stream);
/// y = residual + dropout(x + bias[col]) (Megatron's fused bias_dropout_add), mask stored.
cudaError_t dropout_residual(const void* x, const void* bias, const void* residual, void* y,
                             std::uint8_t* mask, std::int64_t rows, std::int64_t cols,
                             float keep_prob, std::uint64_t seed, Dtype dtype,
                             cudaStream_t stream);
/// Per row of 16-bit logits: fp32 softmax written to `probs`, loss[row] = logsumexp − logit at
/// targets[row].
cudaError_t cross_entropy(const void* logits, const std::int64_t* targets, float* probs,
                          float* loss, std::int64_t rows, std::int64_t cols, Dtype dtype,
                          cudaStream_t stream);
/// y[row] = table[ids[row]] (rows of `cols` 16-bit values).
cudaError_t embedding_gather(const std::int64_t* ids, const void* table, void* y,
                             std::int64_t rows, std::int64_t cols, Dtype dtype,
                             cudaStream_t stream);
/// y = x·scale over count 16-bit values: a plain HBM stream.
cudaError_t scale_copy(const void* x, void* y, std::size_t count, float scale, Dtype dtype,
                       cudaStream_t stream);
/// Copies `bytes` (a multiple of 16) with exactly `blocks` blocks of 512 threads: the
/// one-GPU stand-in for an NCCL kernel, which also runs on a few dozen SMs (its channels).
cudaError_t limited_copy(const void* src, void* dst, std::size_t bytes, int blocks,
                         cudaStream_t stream);

}  // namespace lynx::gpu
