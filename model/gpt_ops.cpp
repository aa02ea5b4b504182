// model: the per-layer op graph (FLOPs, HBM bytes, saved activations, TP/SP collectives) of
// one GPU: a transformer layer, the embedding and the head.
#include "model/gpt_op_builders.hpp"
#include "model/gpt_moe.hpp"

#include "common/bytes.hpp"
#include "model/workload.hpp"
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

namespace lynx::model {

using namespace detail;

namespace detail {

/// One GEMM C[m×n] = A[m×k]·B[k×n] with a weight B: forward 2mnk; dgrad (dA = dC·Bᵀ) and
/// wgrad (dB = Aᵀ·dC) 2mnk each; each of the three touches the same three matrices once.
Op gemm_op(std::string name, OpGroup group, std::int64_t m, std::int64_t n, std::int64_t k) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kGemm;
  op.group = group;
  op.gemm_m = m;
  op.gemm_n = n;
  op.gemm_k = k;
  op.fwd_flops = 2.0 * dbl(m) * dbl(n) * dbl(k);
  op.fwd_bytes = dbl(kBytesPerElement * (m * k + k * n + m * n));
  op.bwd_dgrad_flops = op.fwd_flops;
  op.bwd_dgrad_bytes = op.fwd_bytes;
  op.bwd_wgrad_flops = op.fwd_flops;
  op.bwd_wgrad_bytes = op.fwd_bytes;
  // One cuBLAS GEMM each (the wgrad accumulating into the main gradient, Megatron's
  // gradient-accumulation fusion; without it see unfused_grad_accumulation); a bias adds
  // kernels (add_linear_bias).
  op.fwd_kernels = op.bwd_dgrad_kernels = op.bwd_wgrad_kernels = 1;
  return op;
}

/// Gradient-accumulation fusion off (Megatron's --no-gradient-accumulation-fusion): the wgrad
/// GEMM writes a fresh 16-bit gradient of the weight (n × k per GPU), and Megatron's DDP hook
/// adds it into the gradient buffer (`param.main_grad.add_(param.grad.data)`, megatron's
/// distributed.py as remembered): one more memory-bound kernel that reads the new gradient and
/// reads and writes the accumulator (fp32 with parallel.fp32_main_grads, else 16-bit). Biases
/// and norm parameters take that add in both modes (the fused GEMM accumulates the weight only;
/// their gradients always come back through autograd): not modelled either way, unchanged here.
void unfused_grad_accumulation(const Dims& d, Op& gemm) {
  if (d.grad_accumulation_fusion) return;
  const std::int64_t weight = gemm.gemm_n * gemm.gemm_k;
  gemm.bwd_wgrad_accumulate_bytes = dbl(weight * (kBytesPerElement + 2 * d.main_grad_bytes));
  ++gemm.bwd_wgrad_kernels;
}

/// A linear layer that adds its own bias (Megatron's column-parallel QKV; the others skip it
/// into the fused bias-GeLU / bias-dropout-add after them): `output + bias` after the GEMM,
/// and `grad_output.sum(0)` for the bias gradient beside the wgrad.
void add_linear_bias(Op& gemm) {
  ++gemm.fwd_kernels;
  ++gemm.bwd_wgrad_kernels;
}

/// `batch` GEMMs of two activations (QK^T, ·V): no weights, so the backward is two input
/// gradients (2·2mnk, both counted as dgrad) over the same matrices twice.
Op batched_attention_op(std::string name, std::int64_t batch, std::int64_t m, std::int64_t n,
                        std::int64_t k) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kAttention;
  op.group = OpGroup::kAttnCore;
  op.gemm_batch = batch;
  op.gemm_m = m;
  op.gemm_n = n;
  op.gemm_k = k;
  op.fwd_flops = 2.0 * dbl(batch) * dbl(m) * dbl(n) * dbl(k);
  op.fwd_bytes = dbl(kBytesPerElement * batch * (m * k + k * n + m * n));
  op.bwd_dgrad_flops = 2.0 * op.fwd_flops;
  op.bwd_dgrad_bytes = 2.0 * op.fwd_bytes;
  op.bwd_dgrad_kernels = 2;  // one batched GEMM per input gradient
  return op;
}

Op elementwise_op(std::string name, OpGroup group, std::int64_t fwd_bytes,
                  std::int64_t saved_bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kMemoryBound;
  op.group = group;
  op.fwd_bytes = dbl(fwd_bytes);
  op.bwd_dgrad_bytes = kElementwiseBackwardBytesRatio * op.fwd_bytes;
  op.saved_bytes = u64(saved_bytes);
  return op;
}

Op collective_op(std::string name, OpGroup group, CollectiveKind fwd, CollectiveKind bwd,
                 std::int64_t bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kCollective;
  op.group = group;
  op.collective = fwd;
  op.bwd_collective = bwd;
  op.collective_bytes = u64(bytes);
  return op;
}

/// Megatron's conjugate operator pair around a TP region, for the op at the region's entry
/// ("f": before QKV / FC1 / LM head) — copy (backward all-reduce) or, with SP, all-gather
/// (backward reduce-scatter). Bytes: the full s·b·h activation.
Op tp_region_entry(const Dims& d, const std::string& suffix, OpGroup group) {
  const std::int64_t bytes = kBytesPerElement * d.tokens * d.h;
  if (d.sp)
    return collective_op("sp_allgather_" + suffix, group, CollectiveKind::kAllGather,
                         CollectiveKind::kReduceScatter, bytes);
  return collective_op("tp_copy_" + suffix, group, CollectiveKind::kNone,
                       CollectiveKind::kAllReduce, bytes);
}

/// The region's exit ("g": after out-proj / FC2 / embedding): all-reduce (backward nothing)
/// or, with SP, reduce-scatter (backward all-gather).
Op tp_region_exit(const Dims& d, const std::string& suffix, OpGroup group) {
  const std::int64_t bytes = kBytesPerElement * d.tokens * d.h;
  if (d.sp)
    return collective_op("sp_reducescatter_" + suffix, group, CollectiveKind::kReduceScatter,
                         CollectiveKind::kAllGather, bytes);
  return collective_op("tp_allreduce_" + suffix, group, CollectiveKind::kAllReduce,
                       CollectiveKind::kNone, bytes);
}

/// A GEMM whose input is an SP-sharded activation keeps it sharded and re-gathers it for wgrad.
void mark_sharded_input(const Dims& d, Op& gemm) {
  if (d.sp) gemm.bwd_input_allgather_bytes = u64(kBytesPerElement * d.tokens * d.h);
}

}  // namespace detail

namespace {

/// LayerNorm or RMSNorm over the local tokens: read x, write y, read its parameters; saves its
/// input (the fp32 per-row statistics, 4–8 bytes per token, are left out as in Korthikanti).
/// `number`: "1", "2" (the layer's two) or "final".
Op norm_op(const Dims& d, const std::string& number, OpGroup group) {
  const std::string kind = d.rmsnorm ? "rmsnorm" : "layernorm";
  std::string name = number == "final" ? "final_" + kind : (d.rmsnorm ? "rmsnorm" : "ln") + number;
  const std::int64_t act = kBytesPerElement * d.local_tokens * d.h;
  Op op = elementwise_op(std::move(name), group, 2 * act + kBytesPerElement * norm_parameters(d), act);
  // Apex's fused norm: one forward kernel; its backward launches three (partial parameter
  // gradients per block, their sum, the input gradient).
  op.bwd_dgrad_kernels = 3;
  return op;
}

/// Fused bias + dropout + residual add over the local tokens: reads x, residual and the bias
/// (if the layers have biases), writes the output and the 1-byte mask (with dropout); saves the
/// mask.
Op dropout_residual_op(const Dims& d, std::string name, OpGroup group) {
  const std::int64_t act = kBytesPerElement * d.local_tokens * d.h;
  const std::int64_t mask = d.dropout ? kMaskBytesPerElement * d.local_tokens * d.h : 0;
  const std::int64_t bias = d.bias ? kBytesPerElement * d.h : 0;
  Op op = elementwise_op(std::move(name), group, 3 * act + mask + bias, mask);
  op.saves = Saves::kOutput;
  // Fused by TorchScript (nvFuser) into one kernel each way; the bias the linear layer before
  // it skipped gets its gradient here, a reduction over the tokens.
  op.bwd_dgrad_kernels = d.bias ? 2 : 1;
  if (!d.bias_dropout_fusion) {
    // Unfused (Megatron's bias_dropout_add, as remembered: residual + F.dropout(x + bias)):
    // the bias add (read x and the bias, write x + bias) and the dropout (read it, write the
    // output and the mask) become kernels of their own before the residual add, which keeps
    // the fused kernel's 3·act. Backward unchanged: dropout's backward (read the gradient and
    // the mask, write the gradient) and the bias gradient's reduction, what the fused backward
    // runs too (the adds' gradients pass through); saved: the dropout mask, as fused. Without
    // a bias and dropout (Llama: F.dropout at p 0 returns its input) only the residual add runs.
    if (d.bias) {
      ++op.fwd_kernels;
      op.fwd_bytes += dbl(2 * act);  // x + bias: its bias read is counted already
    }
    if (d.dropout) {
      ++op.fwd_kernels;
      op.fwd_bytes += dbl(2 * act);  // dropout: its mask write is counted already
    }
  }
  return op;
}

/// Rotary position embedding on Q and K (Su et al. 2021; Megatron-Core apply_rotary_pos_emb):
/// reads Q, K and the fp32 angle table (s × head_dim), writes rotated Q, K. Its backward rotates
/// the gradient back and needs no activation, so it saves nothing of its own; its output — the
/// rotated Q, K, and V passed through — is what the attention core reads, saved here (Q, K, V are
/// then not saved on qkv_gemm).
Op rotary_op(const Dims& d) {
  const std::int64_t qk = kBytesPerElement * d.tokens * (d.q_width + d.kv * d.head_dim) / d.t;
  const std::int64_t qkv = kBytesPerElement * d.tokens * d.qkv_width / d.t;
  Op op = elementwise_op("rotary", OpGroup::kAttnProjInput, 2 * qk + kFp32Bytes * d.seq_local * d.head_dim,
                         qkv);
  op.bwd_dgrad_bytes = op.fwd_bytes;
  op.saves = Saves::kOutput;
  op.fwd_kernels = op.bwd_dgrad_kernels = 2;  // Q and K, each way
  return op;
}

/// ·V: the batched GEMM, then the context's [b·a, s, d] → [s, b, h] layout copy
/// (permute().contiguous()); its backward copies the gradient back before the two GEMMs.
void with_context_copy(Op& av) {
  av.fwd_kernels = 2;
  av.bwd_dgrad_kernels = 3;
}

void append_attention_core(const Dims& d, bool flash, std::vector<Op>& ops) {
  const std::int64_t heads_local = d.a / d.t;
  const std::int64_t head_dim = d.head_dim;
  const std::int64_t batch = d.b * heads_local;
  const std::int64_t q_one = kBytesPerElement * d.tokens * d.q_width / d.t;  // Q or O
  const std::int64_t kv_one = kBytesPerElement * d.tokens * d.kv * head_dim / d.t;  // K or V

  if (flash) {
    // Dao et al. 2022: one fused kernel; S = QK^T and P = softmax(S) live only in SRAM, the
    // dropout mask is regenerated from the RNG state in backward, so nothing of size s² is
    // stored. It saves the fp32 softmax log-sum-exp per (head, row): 4·(a/t)·s·b bytes. Its
    // output O is the out-projection's input and is counted there once (one tensor).
    Op op;
    op.name = "flash_attention";
    op.kind = OpKind::kAttention;
    op.group = OpGroup::kAttnCore;
    // Context parallelism: this rank's seq_local queries against all s keys, the key/value
    // blocks arriving over the ring (append_ring_attention); cp 1: s × s.
    op.gemm_batch = batch;  // shape reported as the QK^T product
    op.gemm_m = d.seq_local;
    op.gemm_n = d.s;
    op.gemm_k = head_dim;
    op.fwd_flops = 2.0 * 2.0 * dbl(batch) * dbl(d.seq_local) * dbl(d.s) * dbl(head_dim);  // QK^T, ·V
    const std::int64_t lse = kFp32Bytes * heads_local * d.seq_local * d.b;
    // Read Q, K, V (K, V at kv_heads: flash kernels take grouped K/V as they are); write O
    // and the statistics.
    op.fwd_bytes = dbl(2 * q_one + 2 * kv_one + lse);
    op.bwd_dgrad_flops = kFlashBackwardFlopsRatio * op.fwd_flops;
    op.bwd_dgrad_bytes = kElementwiseBackwardBytesRatio * op.fwd_bytes;
    op.saved_bytes = u64(lse);
    op.saves = Saves::kOutput;
    // Its backward: the row-wise dot(dO, O) pre-pass, the main kernel, and the conversion of
    // the fp32 dQ accumulator (flash-attention 2's mha_bwd).
    op.bwd_dgrad_kernels = 3;
    with_ring_attention(d, kv_one, op);
    ops.push_back(std::move(op));
    return;
  }

  // Korthikanti et al. 2022 Sec. 4.1: softmax output 2as²b, dropout mask as²b, dropout output
  // 2as²b — per GPU divided by t (heads are split).
  const std::int64_t score_elems = batch * d.s * d.s;
  if (d.kv < d.a) {
    // Grouped-query attention, unfused: Megatron-Core's DotProductAttention.forward
    // repeat_interleave()s K and V to one head per query head before the batched GEMMs, which
    // save the expanded copies. Selective recomputation re-runs it from the grouped K, V. (With
    // nothing recomputed Megatron frees the grouped K, V once expanded; they stay counted on
    // their producer here: 4·s·b·kv_heads·head_dim/t bytes per layer too many.)
    const std::int64_t expanded = 2 * q_one;  // K and V at a heads
    Op expand = elementwise_op("gqa_expand_kv", OpGroup::kAttnCore, 2 * kv_one + expanded, expanded);
    expand.bwd_dgrad_bytes = expand.fwd_bytes;  // sums the gradient back over each group
    expand.saves = Saves::kOutput;
    expand.fwd_kernels = expand.bwd_dgrad_kernels = 2;  // K and V, each way
    ops.push_back(std::move(expand));
  }
  Op qk = batched_attention_op("qk_matmul", batch, d.s, d.s, head_dim);  // Q, K on qkv_gemm
  ops.push_back(std::move(qk));
  Op softmax = elementwise_op("softmax", OpGroup::kAttnCore, 2 * kBytesPerElement * score_elems,
                              kBytesPerElement * score_elems);
  softmax.saves = Saves::kOutput;
  if (!d.fused_softmax) {
    // PyTorch fallback (FusedScaleMaskSoftmax.forward_torch_softmax, as remembered; also what
    // model.masked_softmax_fusion false runs): cast to fp32, scale, mask, softmax, cast back;
    // each a kernel, and each backward too.
    softmax.fwd_kernels = softmax.bwd_dgrad_kernels = 5;
    // HBM bytes per score: forward cast r2 w4, scale r4 w4, masked_fill_ r4 w4, softmax r4 w4,
    // cast back r4 w2 = 36 (the [b, 1, s, s] mask, shared by the heads, left out); backward
    // the casts' r2 w4 and r4 w2, the mask's and the scale's r4 w4 each, softmax's backward
    // r4 + r4 (its fp32 output, the gradient) w4 = 40. Saved: softmax's fp32 output (4 bytes;
    // the cast, the scale and the mask's backward need no tensor of size s²).
    softmax.fwd_bytes = dbl(36 * score_elems);
    softmax.bwd_dgrad_bytes = dbl(40 * score_elems);
    softmax.saved_bytes = u64(kFp32Bytes * score_elems);
  }
  if (!d.dropout) {
    // No attention dropout: ·V reads the softmax output, saved once (on softmax).
    ops.push_back(std::move(softmax));
    Op av = batched_attention_op("attn_v_matmul", batch, d.s, head_dim, d.s);
    with_context_copy(av);
    ops.push_back(std::move(av));
    return;
  }
  ops.push_back(std::move(softmax));
  Op dropout = elementwise_op(
      "attn_dropout", OpGroup::kAttnCore,
      2 * kBytesPerElement * score_elems + kMaskBytesPerElement * score_elems,
      kMaskBytesPerElement * score_elems);
  dropout.saves = Saves::kOutput;  // the mask; its output is saved by ·V as its input
  ops.push_back(std::move(dropout));
  Op av = batched_attention_op("attn_v_matmul", batch, d.s, head_dim, d.s);
  av.saved_bytes = u64(kBytesPerElement * score_elems);  // the dropout output; V on qkv_gemm
  with_context_copy(av);
  ops.push_back(std::move(av));
}

}  // namespace

namespace {
/// The dense MLP after LN2: (SP all-gather) FC1, GeLU or SwiGLU, FC2, TP all-reduce or reduce-scatter.
void append_dense_mlp(const Dims& d, std::vector<Op>& ops);
/// FP8 GEMMs for the layer's linear layers (model.gemm_precision fp8).
void to_fp8(std::vector<Op>& ops);
}  // namespace

std::vector<Op> layer_ops(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  const bool flash = spec.flash_attention;
  const bool tp = d.t > 1;
  std::vector<Op> ops;
  ops.reserve(20);

  // Saved activations (Korthikanti et al. 2022 Sec. 4): LN1 input 2sbh, QKV input 2sbh,
  // Q, K, V 6sbh/t, s² tensors 5as²b/t, out-proj input 2sbh/t, residual mask sbh, LN2 input
  // 2sbh, FC1 input 2sbh, GeLU input 8sbh/t, FC2 input 8sbh/t, residual mask sbh; with SP the
  // terms outside the TP region (local_tokens) are divided by t too. Llama's variants: Q, K, V
  // are 2sb(h + 2·kv·head_dim)/t (on rotary when it runs), and SwiGLU saves its input (gate and
  // up, 2·2sbf/t) and FC2 its input (2sbf/t).
  ops.push_back(norm_op(d, "1", OpGroup::kLayerInput));  // saves the layer input
  if (tp) ops.push_back(tp_region_entry(d, "attn", OpGroup::kAttnProjInput));

  // QKV: Q of width h, K and V of kv·head_dim each (Megatron-Core's linear_qkv, column-parallel).
  Op qkv = gemm_op("qkv_gemm", OpGroup::kAttnProjInput, d.tokens, d.qkv_width / d.t, d.h);
  const std::int64_t qkv_out = kBytesPerElement * d.tokens * d.qkv_width / d.t;  // Q, K, V
  qkv.saved_bytes = u64(kBytesPerElement * d.local_tokens * d.h +  // its input
                        (d.rotary ? 0 : qkv_out));  // Q, K, V (see OpGroup), unless rotated
  qkv.saves = d.rotary ? Saves::kInput : Saves::kInputAndOutput;
  if (d.bias) add_linear_bias(qkv);  // not skipped: nothing fused follows it
  unfused_grad_accumulation(d, qkv);
  mark_sharded_input(d, qkv);
  ops.push_back(std::move(qkv));
  if (d.rotary) ops.push_back(rotary_op(d));

  append_attention_core(d, flash, ops);

  Op out_proj = gemm_op("out_proj_gemm", OpGroup::kAttnProjInput, d.tokens, d.h, d.q_width / d.t);
  out_proj.saved_bytes = u64(kBytesPerElement * d.tokens * d.q_width / d.t);
  unfused_grad_accumulation(d, out_proj);
  ops.push_back(std::move(out_proj));
  if (tp) ops.push_back(tp_region_exit(d, "attn", OpGroup::kAttnProjInput));
  ops.push_back(dropout_residual_op(d, "attn_dropout_residual", OpGroup::kPost));

  ops.push_back(norm_op(d, "2", OpGroup::kPost));
  if (is_moe(spec)) {
    append_moe_mlp(d, moe_dims_of(spec, p, d), ops);
  } else {
    append_dense_mlp(d, ops);
  }
  ops.push_back(dropout_residual_op(d, "mlp_dropout_residual", OpGroup::kPost));
  if (spec.gemm_precision == GemmPrecision::kFp8) to_fp8(ops);
  return ops;
}

namespace {

void append_dense_mlp(const Dims& d, std::vector<Op>& ops) {
  const bool tp = d.t > 1;
  if (tp) ops.push_back(tp_region_entry(d, "mlp", OpGroup::kMlp));

  // SwiGLU (Shazeer 2020): gate and up projections of width f each, run as one column-parallel
  // GEMM of width 2f (Megatron-Core's MLP doubles linear_fc1 with gated_linear_unit).
  const std::int64_t ffn_local = d.f / d.t;
  const std::int64_t fc1_local = (d.swiglu ? 2 : 1) * d.f / d.t;
  Op fc1 = gemm_op("fc1_gemm", OpGroup::kMlp, d.tokens, fc1_local, d.h);
  fc1.saved_bytes = u64(kBytesPerElement * d.local_tokens * d.h);
  mark_sharded_input(d, fc1);
  unfused_grad_accumulation(d, fc1);
  ops.push_back(std::move(fc1));

  const std::int64_t ffn_act = kBytesPerElement * d.tokens * ffn_local;
  const std::int64_t fc1_act = kBytesPerElement * d.tokens * fc1_local;
  const std::int64_t fc1_bias = d.bias ? kBytesPerElement * fc1_local : 0;
  if (d.swiglu) {
    // Fused (bias +) SwiGLU, silu(gate)·up: reads gate and up, writes f/t per token; saves its
    // input, both halves (Megatron-Core's SwiGLUFunction saves the input only).
    ops.push_back(elementwise_op("swiglu", OpGroup::kMlp, fc1_act + ffn_act + fc1_bias, fc1_act));
  } else {
    // Fused bias + GeLU: read input and bias, write output; saves its input.
    ops.push_back(elementwise_op("gelu", OpGroup::kMlp, 2 * ffn_act + fc1_bias, ffn_act));
  }
  // One fused kernel each way (TorchScript); FC1's skipped bias gets its gradient reduced here.
  if (d.bias) ops.back().bwd_dgrad_kernels = 2;
  if (d.bias && !d.swiglu && !d.bias_gelu_fusion) {
    // Unfused (Megatron's ParallelMLP without bias_gelu_fusion, as remembered:
    // activation_func(intermediate + bias), activation_func = F.gelu): the bias add (read the
    // FC1 output and the bias, write the sum) and F.gelu (read the sum, write the output): one
    // more kernel and one more read and write of the f/t tensor forward. Backward unchanged in
    // kernels and bytes: GeluBackward (read the saved sum and the gradient, write the gradient)
    // and the bias gradient's reduction, as the fused bias_gelu_back and its reduction. Saved:
    // F.gelu's input (x + bias), one f/t tensor as the fused path's FC1 output (the add saves
    // nothing), so saved_bytes stay. (SwiGLU has its own switch in Megatron-Core,
    // --no-bias-swiglu-fusion, not modelled: bias_gelu_fusion does nothing for it.)
    Op& gelu = ops.back();
    ++gelu.fwd_kernels;
    gelu.fwd_bytes += dbl(2 * ffn_act);
  }

  Op fc2 = gemm_op("fc2_gemm", OpGroup::kMlp, d.tokens, d.h, ffn_local);
  fc2.saved_bytes = u64(ffn_act);
  unfused_grad_accumulation(d, fc2);
  ops.push_back(std::move(fc2));
  if (tp) ops.push_back(tp_region_exit(d, "mlp", OpGroup::kMlp));
}

void to_fp8(std::vector<Op>& ops) {
  // FP8 (Transformer Engine, which Megatron-Core's layers use for --fp8-format): the linear
  // layers' GEMMs run in FP8; the attention core (TE DotProductAttention, 16-bit unless
  // --fp8-dot-product-attention) and the LM head (Megatron-Core's own ColumnParallelLinear, not
  // a TE module) stay 16-bit.
  // FP8 GEMMs read 1-byte operands and write a 16-bit result (cuBLASLt FP8 GEMMs as TE calls
  // them; dgrad and wgrad counted like the forward, as gemm_op does).
  // The MoE router is a plain PyTorch linear layer in Megatron-Core (TopKRouter), not a TE
  // module: 16-bit. Grouped expert GEMMs read every local expert's weight: the weight elements
  // are what the 16-bit bytes hold beyond the two activations.
  for (Op& op : ops) {
    if (op.kind != OpKind::kGemm || op.name == "router_gemm") continue;
    op.fp8 = true;
    const double weight = op.fwd_bytes / kBytesPerElement - dbl(op.gemm_m * op.gemm_k) - dbl(op.gemm_m * op.gemm_n);
    op.fwd_bytes = dbl(op.gemm_m * op.gemm_k) + weight + dbl(kBytesPerElement * op.gemm_m * op.gemm_n);
    op.bwd_dgrad_bytes = op.fwd_bytes;
    op.bwd_wgrad_bytes = op.fwd_bytes;
  }
}

}  // namespace

Op gemm_row_chunk(const Op& gemm, std::int64_t chunks) {
  LYNX_CHECK(gemm.kind == OpKind::kGemm && chunks >= 1 && gemm.gemm_m % chunks == 0,
             "'{}': {} rows do not split into {} chunks", gemm.name, gemm.gemm_m, chunks);
  Op chunk = gemm_op(gemm.name, gemm.group, gemm.gemm_m / chunks, gemm.gemm_n, gemm.gemm_k);
  if (gemm.bwd_wgrad_flops == 0) chunk.bwd_wgrad_flops = chunk.bwd_wgrad_bytes = 0;
  return chunk;
}

std::vector<Op> embedding_ops(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  std::vector<Op> ops;
  // Vocab-parallel lookup (Megatron VocabParallelEmbedding): read the int64 ids and this
  // rank's share of rows (on average 1/t of the tokens hit its shard), write a full s·b·h
  // partial sum. It saves only the ids (8 bytes/token) for the weight gradient — nothing of
  // size s·b·h, since an embedding's backward needs no activation.
  Op lookup = elementwise_op(
      "embedding_lookup", OpGroup::kLayerInput,
      kTokenIdBytes * d.tokens + kBytesPerElement * d.tokens * d.h / d.t +
          kBytesPerElement * d.tokens * d.h,
      kTokenIdBytes * d.tokens);
  // Its backward is a weight-gradient scatter-add (no input gradient).
  lookup.bwd_wgrad_bytes = lookup.bwd_dgrad_bytes;
  lookup.bwd_dgrad_bytes = 0;
  // Forward: F.embedding, and at tp > 1 the vocabulary-range mask around it (compare, clone,
  // shift, masked fill of the ids and of the output: about 11 more). Backward: PyTorch's
  // embedding_dense_backward (sort of the ids, segment offsets, partial sums, scatter: about
  // 9) and the zero-filled V·h/t gradient.
  lookup.fwd_kernels = d.t > 1 ? 12 : 1;
  lookup.bwd_dgrad_kernels = 0;
  lookup.bwd_wgrad_kernels = 10;
  ops.push_back(std::move(lookup));
  // Partial sums are combined across the TP group: all-reduce, or with SP the reduce-scatter
  // that also splits the sequence (Megatron-core's reduce_scatter_embeddings).
  if (d.t > 1) ops.push_back(tp_region_exit(d, "embedding", OpGroup::kLayerInput));
  // Position embedding add + embedding dropout on the local tokens: read word and position
  // embeddings (no position table with rotary embeddings), write the output and the mask;
  // saves the 1-byte mask (Korthikanti Sec. 4.3).
  const std::int64_t act = kBytesPerElement * d.local_tokens * d.h;
  const std::int64_t mask = d.dropout ? kMaskBytesPerElement * d.local_tokens * d.h : 0;
  const std::int64_t reads = d.rotary ? 1 : 2;
  Op dropout = elementwise_op("embedding_dropout", OpGroup::kLayerInput, (reads + 1) * act + mask, mask);
  // [b, s, h] → [s, b, h] copy and dropout each way; with a position table also its lookup
  // and the add (forward) and its embedding backward (10, as the word embedding's).
  dropout.fwd_kernels = d.rotary ? 2 : 4;
  dropout.bwd_dgrad_kernels = d.rotary ? 2 : 12;
  ops.push_back(std::move(dropout));
  return ops;
}

std::vector<Op> head_ops(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  std::vector<Op> ops;
  ops.push_back(norm_op(d, "final", OpGroup::kLayerInput));
  if (d.t > 1) ops.push_back(tp_region_entry(d, "head", OpGroup::kLayerInput));

  // LM head: logits[s·b × V/t] = x[s·b × h] · Eᵀ[h × V/t], vocab-parallel, tied to the word
  // embedding or (untied) a matrix of its own, the same GEMM. Saves its input (sharded under SP).
  const std::int64_t vocab_local = d.v / d.t;
  Op head = gemm_op("lm_head_gemm", OpGroup::kLayerInput, d.tokens, vocab_local, d.h);
  head.saved_bytes = u64(kBytesPerElement * d.local_tokens * d.h);
  mark_sharded_input(d, head);
  // Megatron's parallel_lm_logits runs linear_with_grad_accumulation_and_async_allreduce with
  // the same switch (as remembered): tied to the embedding or not, one add more without it.
  unfused_grad_accumulation(d, head);
  ops.push_back(std::move(head));

  // Vocab-parallel cross-entropy as Megatron-LM runs it by default (fp16_lm_cross_entropy
  // off): the bf16 logits are cast to fp32 (read 2, write 4 bytes/element), max subtracted
  // (r4 w4), exponentiated in place (r4 w4), summed (r4) and normalised (r4 w4): 34 bytes per
  // logit. For backward it saves the fp32 softmax, 4·s·b·V/t bytes (not the 16-bit logits:
  // the cast's copy is what _VocabParallelCrossEntropy keeps), plus the int64 masked target
  // and the bool target mask per token (9·s·b bytes). Its backward (softmax − one-hot, scaled;
  // then the cast back) reads 4 + 4, writes 4 + 2 bytes per logit.
  const std::int64_t logits = d.tokens * vocab_local;
  Op xent = elementwise_op("cross_entropy", OpGroup::kLayerInput, 34 * logits,
                           kFp32Bytes * logits + (kTokenIdBytes + 1) * d.tokens);
  xent.bwd_dgrad_bytes = dbl(14 * logits);
  // Kernels (_VocabParallelCrossEntropy and the loss average around it): forward the fp32
  // cast, max, subtract, the target-range mask and gather of the target logits (about 9),
  // exp, sum, log, subtract, divide, and the masked mean of the losses (3): about 20;
  // backward the one-hot subtraction (arange, cast, index update: about 5), scale, cast back
  // and the mean's gradient: about 10.
  xent.fwd_kernels = 20;
  xent.bwd_dgrad_kernels = 10;
  ops.push_back(std::move(xent));
  // Its three small fp32 all-reduces over the TP group (max logit, target logit, sum of
  // exponentials; 4 bytes per token each), lumped into one after the kernel.
  if (d.t > 1)
    ops.push_back(collective_op("tp_allreduce_loss", OpGroup::kLayerInput,
                                CollectiveKind::kAllReduce, CollectiveKind::kNone,
                                3 * kFp32Bytes * d.tokens));
  return ops;
}

}  // namespace lynx::model
