#pragma once
/// The op constructors the layer builders share (model/gpt_ops.cpp: the dense layer, embedding
/// and head; model/gpt_moe.cpp: the mixture-of-experts MLP). Internal to model/.
#include "model/gpt_dims.hpp"

#include <cstdint>
#include <string>

namespace lynx::model::detail {

/// fp32 statistics and loss-side tensors.
inline constexpr std::int64_t kFp32Bytes = 4;
/// Token ids / targets are int64 tensors in Megatron-LM.
inline constexpr std::int64_t kTokenIdBytes = 8;
/// Dao et al. 2022 (FlashAttention, Sec. 3.1 / App. B.2): the backward pass runs 5 matmuls
/// (recomputed S = QK^T, dV, dP, dQ, dK) against the forward's 2, i.e. 2.5x the forward FLOPs.
inline constexpr double kFlashBackwardFlopsRatio = 2.5;
/// Elementwise kernels: the backward reads the saved tensor and the incoming gradient and
/// writes the outgoing gradient — about twice the forward's traffic.
inline constexpr double kElementwiseBackwardBytesRatio = 2.0;

/// One GEMM C[m×n] = A[m×k]·B[k×n] with a weight B (forward, dgrad and wgrad 2mnk each).
Op gemm_op(std::string name, OpGroup group, std::int64_t m, std::int64_t n, std::int64_t k);
/// Gradient-accumulation fusion off: the wgrad's extra accumulate kernel (no-op when on).
void unfused_grad_accumulation(const Dims& d, Op& gemm);
/// A linear layer that adds its own bias: one kernel more forward and in the wgrad.
void add_linear_bias(Op& gemm);
/// A memory-bound op reading and writing `fwd_bytes` that saves `saved_bytes` for backward.
Op elementwise_op(std::string name, OpGroup group, std::int64_t fwd_bytes, std::int64_t saved_bytes);
/// A collective op over the TP group (`fwd` in forward, `bwd` in backward) of `bytes`.
Op collective_op(std::string name, OpGroup group, CollectiveKind fwd, CollectiveKind bwd, std::int64_t bytes);
/// The TP region's entry ("f": copy, or with SP all-gather) and exit ("g": all-reduce, or with
/// SP reduce-scatter) over the full s·b·h activation.
Op tp_region_entry(const Dims& d, const std::string& suffix, OpGroup group);
Op tp_region_exit(const Dims& d, const std::string& suffix, OpGroup group);
/// With SP, a GEMM whose input is the sharded activation re-gathers it for its wgrad.
void mark_sharded_input(const Dims& d, Op& gemm);

}  // namespace lynx::model::detail
