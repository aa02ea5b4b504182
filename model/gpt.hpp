#pragma once
/// Megatron-style GPT workload: presets, parameter and FLOP formulas, and the per-layer op
/// graph (FLOPs, HBM bytes, activation bytes saved for backward, TP/SP collectives) for one
/// pipeline-stage GPU (tensor-parallel degree t, micro-batch b). All sizes in bytes, 16-bit
/// training (bf16/fp16 activations, 1-byte dropout masks).
#include "scenarios/scenario.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::model {

/// Fills layers/hidden/heads/ffn_hidden from spec.preset (if set) and checks the shape;
/// throws lynx::Error naming the preset or field. Known names: preset_names().
ModelSpec resolve_model(const ModelSpec& spec);
std::vector<std::string> preset_names();

/// 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)) — Narayanan et al. 2021, Eq. 2 (incl. position emb.).
double parameter_count(const ModelSpec& m);
/// Korthikanti et al. 2022 Eq. 7: model FLOPs per iteration, no recomputation.
double model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);
/// Eq. 8: executed FLOPs with selective recomputation.
double selective_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);
/// Narayanan et al. 2021 Eq. 3: executed FLOPs with full recomputation.
double full_recompute_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);

enum class OpKind : std::uint8_t {
  kGemm,         ///< dense GEMM (tensor cores)
  kAttention,    ///< batched QK^T / ·V GEMMs, or the fused flash-attention kernel
  kMemoryBound,  ///< LayerNorm, softmax, dropout, GeLU, residual add, cross-entropy
  kCollective,   ///< TP all-reduce / reduce-scatter / all-gather
};

/// The op groups a recomputation plan decides about (DESIGN.md "Decision").
enum class OpGroup : std::uint8_t {
  kLayerNorm,      ///< LN1/LN2 outputs (and inputs)
  kAttnProjInput,  ///< QKV GEMM input, out-projection input, residual dropout masks
  kAttnCore,       ///< Q, K, V, softmax output, attention dropout mask and output
  kMlp,            ///< FC1 input, GeLU input, FC2 input, dropout mask
  kLayerInput,     ///< the layer input (kept by every strategy)
};

enum class CollectiveKind : std::uint8_t { kNone, kAllReduce, kReduceScatter, kAllGather };

struct Op {
  std::string name;         ///< e.g. "qkv_gemm", "softmax", "tp_allreduce_attn"
  OpKind kind = OpKind::kGemm;
  OpGroup group = OpGroup::kAttnCore;
  double fwd_flops = 0;     ///< per GPU
  double fwd_bytes = 0;     ///< HBM bytes read + written, per GPU
  /// Backward split as Megatron runs it: input-gradient (dgrad) and weight-gradient (wgrad).
  double bwd_dgrad_flops = 0, bwd_dgrad_bytes = 0;
  double bwd_wgrad_flops = 0, bwd_wgrad_bytes = 0;
  /// Activation bytes this op's backward needs that the forward leaves in memory (per GPU).
  std::uint64_t saved_bytes = 0;
  /// GEMM shape per GPU (kGemm: one GEMM; kAttention: `gemm_batch` GEMMs) — C[m×n] = A[m×k]·B[k×n].
  std::int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0, gemm_batch = 1;
  CollectiveKind collective = CollectiveKind::kNone;  ///< forward collective
  CollectiveKind bwd_collective = CollectiveKind::kNone;  ///< its mirror in backward
  std::uint64_t collective_bytes = 0;  ///< full (unsharded) tensor size of the collective
};

/// Forward ops of one transformer layer in execution order (DESIGN.md "Workload").
std::vector<Op> layer_ops(const ModelSpec& m, const ParallelSpec& p);
/// Embedding lookup (+ SP scatter) on the first stage.
std::vector<Op> embedding_ops(const ModelSpec& m, const ParallelSpec& p);
/// Final LayerNorm, LM head GEMM and vocab-parallel cross-entropy on the last stage.
std::vector<Op> head_ops(const ModelSpec& m, const ParallelSpec& p);

/// Bytes of weights of one layer per GPU (fp16/bf16), for static memory.
std::uint64_t layer_parameter_count_per_gpu(const ModelSpec& m, const ParallelSpec& p);
std::uint64_t embedding_parameter_count_per_gpu(const ModelSpec& m, const ParallelSpec& p);

}  // namespace lynx::model
