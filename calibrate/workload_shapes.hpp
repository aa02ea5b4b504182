#pragma once
/// The kernel shapes worth calibrating, derived from the workload itself: every distinct GEMM
/// (forward, dgrad, wgrad) and memory-bound kernel that model::layer_ops / embedding_ops /
/// head_ops produce for the requested models, tensor-parallel degrees and micro-batch sizes,
/// plus optional size sweeps that fill in the small end of the efficiency curves.
#include "model/gpt.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lynx::calibrate {

/// One GEMM to benchmark: C[m×n] = op(A)·op(B) with op(A) m×k and op(B) k×n, `batch` of them
/// (strided-batched for attention). Operands are stored row-major; transpose_a means A is
/// stored k×m, transpose_b means B is stored n×k.
struct GemmShape {
  model::OpKind kind = model::OpKind::kGemm;  ///< kGemm or kAttention
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transpose_a = false;
  bool transpose_b = false;
  std::string name;  ///< the first op and pass needing it, e.g. "gpt-1.3b:tp2:mb1:qkv_gemm.fwd"

  /// 2·m·n·k·batch.
  double flops() const;
  /// Bytes of A, B and C at `element_bytes` per element (2 for bf16/fp16).
  std::uint64_t operand_bytes(int element_bytes) const;
  /// "NN", "NT", "TN" or "TT" (A then B; T = transposed).
  std::string layout() const;
};

/// The memory-bound kernels lynxsim-calibrate implements (calibrate/kernels.cu).
enum class MemoryKernel : std::uint8_t {
  kLayerNorm,        ///< y = (x − mean)/sqrt(var + eps)·γ + β per row; stores fp32 mean, rstd
  kBiasGelu,         ///< y = gelu(x + bias), tanh approximation (Megatron's bias_gelu)
  kCausalSoftmax,    ///< scaled upper-triangular-masked softmax per row (rows = b·a/t·s)
  kDropout,          ///< y = x·mask/keep, 1-byte mask written
  kDropoutResidual,  ///< y = residual + dropout(x + bias), 1-byte mask written
  kCrossEntropy,     ///< per row: fp32 softmax of 16-bit logits written, loss at the target
  kEmbeddingGather,  ///< y[row] = table[id[row]] (int64 ids)
  kElementwise,      ///< y = x·scale, a plain stream (sweeps and unrecognised ops)
};

/// Lower-case name as written to the raw CSV ("layernorm", "bias_gelu", ...).
std::string_view to_string(MemoryKernel kernel);

/// One memory-bound kernel to benchmark over a rows × cols tensor.
struct MemoryKernelShape {
  MemoryKernel kernel = MemoryKernel::kElementwise;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t table_rows = 0;  ///< kEmbeddingGather: rows of the table (vocab / tp)
  std::int64_t seq_len = 0;     ///< kCausalSoftmax: the mask repeats every seq_len rows
  std::string name;             ///< the first op needing it, e.g. "gpt-1.3b:tp1:mb1:ln1"
};

/// HBM bytes our implementation of `shape` reads plus writes, with activations of
/// `element_bytes` (2 for bf16/fp16): what the raw CSV records and the memory-bound fit uses.
/// Per kernel (R rows, C cols, e = element_bytes): LayerNorm 2eRC + 2eC + 8R; bias-GeLU
/// 2eRC + eC; softmax 2eRC; dropout 2eRC + RC (mask); dropout-residual 3eRC + eC + RC;
/// cross-entropy eRC + 4RC + 8R (ids) + 4R (loss); embedding gather 2eRC + 8R; elementwise
/// 2eRC.
std::uint64_t memory_kernel_bytes(const MemoryKernelShape& shape, int element_bytes);

/// A preset model (model::preset_names()) with sequence length `seq_len`, resolved; an
/// unknown name throws lynx::Error listing the known ones.
ModelSpec preset_model(const std::string& preset, int seq_len);

/// What to derive shapes for.
struct ShapeDerivationOptions {
  /// Resolved shapes (preset_model, or model::resolve_model for a custom one), each with its
  /// seq_len.
  std::vector<ModelSpec> models;
  std::vector<int> tp{1};
  std::vector<int> micro_batch{1};
  bool sequence_parallel = false;
  /// Add square GEMMs 256..8192 and elementwise streams 4 KiB..1 GiB: the workload alone
  /// rarely reaches the small sizes that pin down half_work and the launch intercept.
  bool include_sweeps = true;
};

/// Distinct shapes, in first-seen order.
struct WorkloadShapes {
  std::vector<GemmShape> gemms;  ///< kGemm and kAttention
  std::vector<MemoryKernelShape> memory_kernels;
  std::vector<std::string> notes;  ///< skipped combinations and why
};

/// Derives the shapes. Per GEMM op with shape (m, n, k) (model/gpt.hpp's convention) it adds
/// forward (m, n, k), the input gradient dA = dC·Bᵀ: (m, k, n), and the second-operand
/// gradient dB = Aᵀ·dC: (k, n, m) — for a linear layer the wgrad, for attention's batched
/// GEMMs the other input's gradient. Layouts: forward linear layers NT (weights stored
/// out × in, as PyTorch does), attention forward NN, dA NN, dB TN. Two entries are the same
/// when kind, m, n, k, batch and layout match. Memory-bound ops are mapped to our kernels by
/// name (ln*/…layernorm → LayerNorm, gelu, softmax, attn_dropout, …dropout_residual and
/// embedding_dropout → dropout-residual, cross_entropy, embedding_lookup); the tensor shape
/// comes from the model dimensions; an unrecognised memory-bound op becomes an elementwise
/// stream with the op's forward bytes. The fused flash_attention op is skipped (it is not a
/// GEMM; noted). A (model, tp) combination that the model rejects (heads % tp ...) is skipped
/// with a note; an unknown preset or invalid model shape throws lynx::Error. Names are
/// prefixed "<preset or custom-hH-aA>:tp<t>:mb<b>:".
WorkloadShapes derive_workload_shapes(const ShapeDerivationOptions& options);

}  // namespace lynx::calibrate
