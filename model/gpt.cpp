#include "model/gpt.hpp"

#include "model/workload.hpp"

#include "common/bytes.hpp"
#include "common/checked.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

namespace lynx::model {

namespace {

/// GPT's vocabulary as Megatron-LM pads GPT-2 BPE (50257 -> 51200), the default of every
/// model that names no other.
constexpr int kGptVocab = 51200;
/// fp32 statistics and loss-side tensors.
constexpr std::int64_t kFp32Bytes = 4;
/// Token ids / targets are int64 tensors in Megatron-LM.
constexpr std::int64_t kTokenIdBytes = 8;
/// Dao et al. 2022 (FlashAttention, Sec. 3.1 / App. B.2): the backward pass runs 5 matmuls
/// (recomputed S = QK^T, dV, dP, dQ, dK) against the forward's 2, i.e. 2.5x the forward FLOPs.
constexpr double kFlashBackwardFlopsRatio = 2.5;
/// Elementwise kernels: the backward reads the saved tensor and the incoming gradient and
/// writes the outgoing gradient — about twice the forward's traffic.
constexpr double kElementwiseBackwardBytesRatio = 2.0;

/// A model preset: the shape, and for the Llama family its architecture.
struct Preset {
  std::string_view name;
  int layers;
  int hidden;
  int heads;
  int kv_heads = 0;      ///< 0: heads (multi-head attention)
  int ffn = 0;           ///< 0: 4 x hidden (GPT)
  int vocab = 51200;
  bool llama = false;    ///< SwiGLU, RMSNorm, rotary, untied embeddings, no linear biases
};

/// Llama-family architecture (Touvron et al. 2023, Llama 2 paper Sec. 2.2 and "Llama 1" Sec.
/// 2.2: pre-normalisation with RMSNorm, SwiGLU, rotary embeddings; no biases, an untied output
/// layer and no dropout, as in the HF configs: attention_bias false, mlp_bias false,
/// tie_word_embeddings false, attention_dropout 0.0).
constexpr bool kLlama = true;

// Shapes as published: 1.3B-175B from Narayanan et al. 2021 Table 1 / Brown et al. 2020 and
// Megatron-LM's examples; 22B from Korthikanti et al. 2022 Table 3 (48 layers, h 6144, 64
// heads); 530B (105, 20480, 128) and 1T (128, 25600, 160) from Narayanan et al. 2021 Table 1 /
// Korthikanti et al. 2022 Table 3.
//
// gpt-23b is our own definition (the Lynx paper names a 23B GPT without its shape here): the
// gpt-13b width (h 5120, 40 heads of 128) at 72 layers. By Eq. 2 that is
//   12·72·5120² + 13·72·5120 + (51200 + 2048)·5120 = 22,649,241,600 + 4,792,320 + 272,629,760
//   = 22.93e9 parameters (0.3% under 23B).
// Chosen over the gpt-22b width at 50 layers (22.98e9) because 72 layers split evenly over
// pp = 2, 3, 4, 6, 8, 9, 12, while 50 layers allow only pp = 2, 5, 10; heads 40 divide tp = 8.
//
// Llama 2 (Touvron et al. 2023, "Llama 2", Table 1: context 4096, GQA for 70B; shapes from the
// HF configs meta-llama/Llama-2-{7b,13b,70b}-hf config.json: hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size 32000, rope_theta
// 10000): 7B 32 x 4096, 32 heads, ffn 11008; 13B 40 x 5120, 40 heads, ffn 13824; 70B 80 x 8192,
// 64 heads, 8 kv heads, ffn 28672.
// Llama 3 (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3: layers, model dimension,
// FFN dimension, attention heads, key/value heads 8, RoPE base 500,000; vocab 128256 from the HF
// configs meta-llama/Meta-Llama-3-8B, -70B and Llama-3.1-405B config.json; context 8192): 8B
// 32 x 4096, 32 heads, ffn 14336; 70B 80 x 8192, 64 heads, ffn 28672; 405B 126 x 16384, 128
// heads, ffn 53248. The rotary base and context do not change the cost model: seq_len stays
// the scenario's (set 4096 / 8192 for the pretraining context).
constexpr std::array<Preset, 16> kPresets{{
    {"gpt-1.3b", 24, 2048, 16},
    {"gpt-2.7b", 32, 2560, 32},
    {"gpt-6.7b", 32, 4096, 32},
    {"gpt-13b", 40, 5120, 40},
    {"gpt-22b", 48, 6144, 64},
    {"gpt-23b", 72, 5120, 40},
    {"gpt-39b", 48, 8192, 64},
    {"gpt-175b", 96, 12288, 96},
    {"gpt-530b", 105, 20480, 128},
    {"gpt-1t", 128, 25600, 160},
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, kLlama},
    {"llama2-13b", 40, 5120, 40, 40, 13824, 32000, kLlama},
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, kLlama},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, kLlama},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, kLlama},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, kLlama},
}};

const Preset* find_preset(std::string_view name) {
  for (const Preset& preset : kPresets)
    if (preset.name == name) return &preset;
  return nullptr;
}

std::string joined_preset_names() {
  std::string out;
  for (const Preset& preset : kPresets) {
    if (!out.empty()) out += ", ";
    out += preset.name;
  }
  return out;
}

/// The model dimensions as 64-bit integers, resolved and checked, for one GPU of a TP group.
struct Dims {
  std::int64_t s, b, h, a, f, v, t;
  std::int64_t kv;            ///< key/value heads
  std::int64_t head_dim;      ///< h / a
  std::int64_t qkv_width;     ///< QKV GEMM output: h + 2·kv·head_dim (3h without GQA)
  bool sp;
  bool swiglu, rmsnorm, rotary, untied, bias, dropout;
  /// Megatron's fusion switches (ModelSpec); fused_softmax: the switch and the kernel's shape
  /// conditions (fused_softmax_available).
  bool grad_accumulation_fusion, bias_gelu_fusion, bias_dropout_fusion, fused_softmax;
  std::int64_t main_grad_bytes;  ///< bytes per element of the gradient buffer (fp32_main_grads: 4)
  std::int64_t tokens;        ///< s·b: rows of every GEMM (sequence gathered)
  std::int64_t local_tokens;  ///< rows outside the TP region: s·b/t with SP, s·b without
};

/// Throws LayoutError for `keys` (in the order the message names them).
template <typename... Args>
[[noreturn]] void fail_layout(ErrorCode code, std::vector<std::string> keys, fmt::format_string<Args...> format,
                              Args&&... args) {
  throw LayoutError(code, std::move(keys), fmt::format(format, std::forward<Args>(args)...));
}

/// Every function taking a ModelSpec needs it resolved (resolve_model / resolve_scenario).
void require_resolved(const ModelSpec& m) {
  LYNX_CHECK(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.ffn_hidden > 0 && m.vocab > 0,
             "model not resolved (layers {}, hidden {}, heads {}, ffn_hidden {}, vocab {}): call "
             "model::resolve_model or model::resolve_scenario first",
             m.layers, m.hidden, m.heads, m.ffn_hidden, m.vocab);
}

/// Key/value heads; an unresolved 0 means multi-head attention.
std::int64_t kv_heads_of(const ModelSpec& m) { return m.kv_heads > 0 ? m.kv_heads : m.heads; }

/// Headroom factor over the largest per-element byte and FLOP multipliers the op graph applies
/// (34 bytes per logit, 5 bytes per attention score, 3 matrices per GEMM): with every size below
/// checked at 64x, each product this file forms stays inside 64 bits.
constexpr std::int64_t kSizeHeadroom = 64;

/// Refuses a shape whose tensors or parameter counts do not fit 64-bit integers, naming the keys
/// (the fields' ranges admit such products: s² · a · b reaches 2^68).
void check_sizes_fit(const ModelSpec& m, const ParallelSpec& p) {
  const std::int64_t s = m.seq_len, b = p.micro_batch, h = m.hidden, a = m.heads;  // a > 0
  const std::int64_t widest = std::max<std::int64_t>({h, m.ffn_hidden, m.vocab});
  auto require = [](std::optional<std::int64_t> product, std::vector<std::string> keys,
                    std::string_view what, std::string_view formula) {
    if (!product)
      fail_layout(ErrorCode::kValueOverflow, std::move(keys), "{} ({}) does not fit in 64-bit integers; make it smaller", what,
                  formula);
  };
  require(try_product({kSizeHeadroom, s, b, widest}),
          {"model.seq_len", "parallel.micro_batch", "model.vocab", "model.ffn_hidden", "model.hidden"},
          "an activation's size", fmt::format("seq_len {} x micro_batch {} x {}", s, b, widest));
  if (!m.flash_attention)
    require(try_product({kSizeHeadroom, s, s, b, a}),
            {"model.seq_len", "parallel.micro_batch", "model.heads", "model.flash_attention"},
            "the attention scores' size",
            fmt::format("seq_len² {}² x micro_batch {} x heads {}", s, b, a));
  require(try_product({kSizeHeadroom, h, widest}), {"model.hidden", "model.ffn_hidden", "model.vocab"},
          "a weight matrix's size", fmt::format("hidden {} x {}", h, widest));
  // What one GPU holds at once: every layer's tensors for each micro-batch in flight (all of
  // them with GPipe, up to pp · virtual_stages with 1F1B), so memory sums stay in 64 bits too.
  const std::int64_t per_token = m.flash_attention ? widest : std::max(widest, s * a);
  const std::int64_t micro_batches =
      p.global_batch / std::max<std::int64_t>(1, std::int64_t{p.micro_batch} * p.dp);
  const std::int64_t in_flight = p.schedule == ScheduleKind::kGpipe
                                     ? micro_batches
                                     : std::int64_t{p.pp} * p.virtual_stages;
  require(try_product({kSizeHeadroom, s, b, per_token, m.layers, std::max<std::int64_t>(1, in_flight)}),
          {"model.layers", "parallel.global_batch", "parallel.schedule", "model.seq_len",
           "parallel.micro_batch"},
          "the activations one GPU holds",
          fmt::format("seq_len {} x micro_batch {} x {} per token x {} layers x {} micro-batches in "
                      "flight", s, b, per_token, m.layers, in_flight));
}

void check_tensor_layout(const ModelSpec& m, const ParallelSpec& p) {
  require_resolved(m);
  if (p.tp < 1) fail_layout(ErrorCode::kOutOfRange, {"parallel.tp"}, "parallel.tp must be >= 1, got {}", p.tp);
  if (p.micro_batch < 1)
    fail_layout(ErrorCode::kOutOfRange, {"parallel.micro_batch"}, "parallel.micro_batch must be >= 1, got {}",
                p.micro_batch);
  if (m.heads % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.heads", "parallel.tp"},
                "model.heads ({}) is not divisible by parallel.tp ({}): pick a tp that divides "
                "the number of attention heads",
                m.heads, p.tp);
  // Megatron-Core splits the key/value groups over the TP ranks like the heads:
  // Attention.__init__ (megatron/core/transformer/attention.py) sets num_query_groups_per_partition
  // = divide(num_query_groups, tp world size), and divide() asserts divisibility. (It does not
  // replicate K/V heads when tp > kv_heads, as some inference engines do.)
  if (kv_heads_of(m) % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.kv_heads", "parallel.tp"},
                "model.kv_heads ({}) is not divisible by parallel.tp ({}): Megatron-Core splits "
                "the key/value heads over the TP ranks (num_query_groups_per_partition = "
                "num_query_groups / tp); pick a tp that divides kv_heads",
                kv_heads_of(m), p.tp);
  if (m.ffn_hidden % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.ffn_hidden", "parallel.tp"},
                "model.ffn_hidden ({}) is not divisible by parallel.tp ({}): pick a tp that "
                "divides ffn_hidden, or change ffn_hidden",
                m.ffn_hidden, p.tp);
  if (m.vocab % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.vocab", "parallel.tp"},
                "model.vocab ({}) is not divisible by parallel.tp ({}): pad the vocabulary to a "
                "multiple of tp (Megatron-LM pads it to a multiple of 128·tp)",
                m.vocab, p.tp);
  check_sizes_fit(m, p);
  if (p.sequence_parallel && m.seq_len % p.tp != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.seq_len", "parallel.tp", "parallel.sequence_parallel"},
                "model.seq_len ({}) is not divisible by parallel.tp ({}), which sequence "
                "parallelism needs: change seq_len or tp, or turn off "
                "parallel.sequence_parallel",
                m.seq_len, p.tp);
}

/// Megatron's fused scale-mask-softmax kernel runs only for some shapes
/// (FusedScaleMaskSoftmax.is_kernel_available: scaled_masked_softmax_fusion on — model.
/// masked_softmax_fusion, checked by the caller —, 16 < s <= 4096, s divisible by 4, and
/// micro-batch × local heads divisible by 4 — the batches a 128-thread block handles for
/// s > 128); otherwise PyTorch's softmax runs. Inputs are 16-bit here, as the kernel needs.
bool fused_softmax_available(const Dims& d) {
  return d.s > 16 && d.s <= 4096 && d.s % 4 == 0 && (d.b * (d.a / d.t)) % 4 == 0;
}

Dims dims_of(const ModelSpec& m, const ParallelSpec& p) {
  check_tensor_layout(m, p);
  Dims d{};
  d.s = m.seq_len;
  d.b = p.micro_batch;
  d.h = m.hidden;
  d.a = m.heads;
  d.f = m.ffn_hidden;
  d.v = m.vocab;
  d.t = p.tp;
  d.kv = kv_heads_of(m);
  d.head_dim = d.h / d.a;
  d.qkv_width = d.h + 2 * d.kv * d.head_dim;
  d.sp = p.sequence_parallel && p.tp > 1;
  // kDefault (a spec built in code, not resolved) is GPT's choice.
  d.swiglu = m.mlp == MlpKind::kSwiglu;
  d.rmsnorm = m.norm == NormKind::kRmsNorm;
  d.rotary = m.position_embedding == PositionKind::kRotary;
  d.untied = m.embeddings == EmbeddingTie::kUntied;
  d.bias = m.linear_bias != LinearBias::kOff;
  d.dropout = m.dropout != Dropout::kOff;
  d.tokens = d.s * d.b;
  d.local_tokens = d.sp ? d.tokens / d.t : d.tokens;
  d.grad_accumulation_fusion = m.gradient_accumulation_fusion;
  d.bias_gelu_fusion = m.bias_gelu_fusion;
  d.bias_dropout_fusion = m.bias_dropout_fusion;
  d.fused_softmax = m.masked_softmax_fusion && fused_softmax_available(d);
  d.main_grad_bytes = static_cast<std::int64_t>(grad_bytes_per_param(p));
  return d;
}

std::uint64_t u64(std::int64_t v) {
  LYNX_CHECK(v >= 0, "negative size {}", v);
  return static_cast<std::uint64_t>(v);
}
double dbl(std::int64_t v) { return static_cast<double>(v); }

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

/// Parameters of one norm: LayerNorm γ and β (2h), RMSNorm γ only (h).
std::int64_t norm_parameters(const Dims& d) { return d.rmsnorm ? d.h : 2 * d.h; }

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
  const std::int64_t qk = kBytesPerElement * d.tokens * (d.h + d.kv * d.head_dim) / d.t;
  const std::int64_t qkv = kBytesPerElement * d.tokens * d.qkv_width / d.t;
  Op op = elementwise_op("rotary", OpGroup::kAttnProjInput, 2 * qk + kFp32Bytes * d.s * d.head_dim,
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
  const std::int64_t q_one = kBytesPerElement * d.tokens * d.h / d.t;  // Q or O
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
    op.gemm_batch = batch;  // shape reported as the QK^T product
    op.gemm_m = d.s;
    op.gemm_n = d.s;
    op.gemm_k = head_dim;
    op.fwd_flops = 2.0 * 2.0 * dbl(batch) * dbl(d.s) * dbl(d.s) * dbl(head_dim);  // QK^T, ·V
    const std::int64_t lse = kFp32Bytes * heads_local * d.s * d.b;
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

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

ModelSpec resolve_model(const ModelSpec& spec) {
  ModelSpec m = spec;
  const Preset* found = nullptr;
  if (!spec.preset.empty()) {
    found = find_preset(spec.preset);
    if (found == nullptr)
      fail_layout(ErrorCode::kUnknownChoice, {"model.preset"}, "unknown model preset '{}' (known: {})", spec.preset,
                  joined_preset_names());
    // Explicit non-zero (non-default) fields override the preset's shape and architecture.
    if (m.layers == 0) m.layers = found->layers;
    if (m.hidden == 0) m.hidden = found->hidden;
    if (m.heads == 0) m.heads = found->heads;
    if (m.kv_heads == 0) m.kv_heads = found->kv_heads;
    if (m.ffn_hidden == 0) m.ffn_hidden = found->ffn;
    if (m.vocab == 0) m.vocab = found->vocab;
  } else if (m.layers == 0 || m.hidden == 0 || m.heads == 0) {
    fail_layout(ErrorCode::kMissingKey, {"model"},
                "a custom model (no model.preset) needs model.layers, model.hidden and "
                "model.heads (got layers {}, hidden {}, heads {}); or name a preset: {}",
                m.layers, m.hidden, m.heads, joined_preset_names());
  }
  const bool llama = found != nullptr && found->llama;
  if (m.mlp == MlpKind::kDefault) m.mlp = llama ? MlpKind::kSwiglu : MlpKind::kGelu;
  if (m.norm == NormKind::kDefault) m.norm = llama ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  if (m.position_embedding == PositionKind::kDefault)
    m.position_embedding = llama ? PositionKind::kRotary : PositionKind::kLearned;
  if (m.embeddings == EmbeddingTie::kDefault)
    m.embeddings = llama ? EmbeddingTie::kUntied : EmbeddingTie::kTied;
  if (m.linear_bias == LinearBias::kDefault) m.linear_bias = llama ? LinearBias::kOff : LinearBias::kOn;
  if (m.dropout == Dropout::kDefault) m.dropout = llama ? Dropout::kOff : Dropout::kOn;
  if (m.kv_heads == 0) m.kv_heads = m.heads;  // multi-head attention
  if (m.vocab == 0) m.vocab = kGptVocab;
  if (m.ffn_hidden == 0) {  // GPT convention: f = 4h
    const std::int64_t four_h = checked_product("model.ffn_hidden = 4 x model.hidden", {4, m.hidden});
    if (four_h > std::numeric_limits<int>::max())
      fail_layout(ErrorCode::kOutOfRange, {"model.hidden"}, "model.hidden ({}) is too large: 4 x hidden = {} (ffn_hidden)",
                  m.hidden, four_h);
    m.ffn_hidden = static_cast<int>(four_h);
  }
  const std::array<std::pair<const char*, int>, 6> positive{{{"layers", m.layers},
                                                              {"hidden", m.hidden},
                                                              {"heads", m.heads},
                                                              {"ffn_hidden", m.ffn_hidden},
                                                              {"seq_len", m.seq_len},
                                                              {"vocab", m.vocab}}};
  for (const auto& [field, value] : positive)
    if (value <= 0)
      fail_layout(ErrorCode::kOutOfRange, {fmt::format("model.{}", field)}, "model.{} must be positive, got {}", field,
                  value);
  if (m.hidden % m.heads != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.hidden", "model.heads"},
                "model.hidden ({}) is not divisible by model.heads ({}): the head size must be "
                "whole",
                m.hidden, m.heads);
  // Megatron-LM's validate_args: num_attention_heads % num_query_groups == 0.
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    fail_layout(ErrorCode::kIndivisibleLayout, {"model.kv_heads", "model.heads"},
                "model.kv_heads ({}) does not divide model.heads ({}): every key/value head "
                "serves the same number of query heads",
                m.kv_heads, m.heads);
  return m;
}

std::vector<std::string> preset_keys(const std::string& preset) {
  const Preset* found = find_preset(preset);
  if (found == nullptr) return {};
  std::vector<std::string> keys = {"model.layers", "model.hidden", "model.heads", "model.vocab"};
  if (found->kv_heads != 0) keys.emplace_back("model.kv_heads");
  if (found->ffn != 0) keys.emplace_back("model.ffn_hidden");
  if (found->llama)
    for (const char* key : {"model.mlp", "model.norm", "model.position_embedding",
                            "model.embeddings", "model.linear_bias", "model.dropout"})
      keys.emplace_back(key);
  return keys;
}

void check_layout(const ModelSpec& m, const ParallelSpec& p) {
  check_tensor_layout(m, p);
  if (p.pp < 1) fail_layout(ErrorCode::kOutOfRange, {"parallel.pp"}, "parallel.pp must be >= 1, got {}", p.pp);
  if (p.virtual_stages < 1)
    fail_layout(ErrorCode::kOutOfRange, {"parallel.virtual_stages"}, "parallel.virtual_stages must be >= 1, got {}",
                p.virtual_stages);
  pipeline_stage_layers(m.layers, p);
}

std::vector<int> pipeline_stage_layers(int layers, const ParallelSpec& p) {
  const int first = p.first_stage_layers, last = p.last_stage_layers;
  if (first == 0 && last == 0) {
    const std::int64_t chunks =
        checked_product("parallel.pp x parallel.virtual_stages", {p.pp, p.virtual_stages});
    if (layers % chunks != 0)
      fail_layout(ErrorCode::kIndivisibleLayout, {"model.layers", "parallel.pp", "parallel.virtual_stages"},
                  "model.layers ({}) is not divisible by parallel.pp × parallel.virtual_stages "
                  "({} × {} = {}): every model chunk needs the same number of layers",
                  layers, p.pp, p.virtual_stages, chunks);
    return std::vector<int>(static_cast<size_t>(p.pp), layers / p.pp);
  }
  std::vector<std::string> keys;  // the uneven-split keys given, first the ones the message names
  if (first != 0) keys.emplace_back("parallel.first_stage_layers");
  if (last != 0) keys.emplace_back("parallel.last_stage_layers");
  if (p.pp < 2) {
    keys.emplace_back("parallel.pp");
    fail_layout(ErrorCode::kIncompatibleSettings, std::move(keys),
                "parallel.first_stage_layers / last_stage_layers ({} / {}) need parallel.pp >= 2 "
                "(with pp {} the one stage holds every layer)",
                first, last, p.pp);
  }
  // Megatron-Core (get_transformer_layer_offset): a stage whose count is not set is a "middle"
  // stage; the middle stages split the remaining layers evenly.
  const int middle = p.pp - (first != 0 ? 1 : 0) - (last != 0 ? 1 : 0);
  const std::int64_t rest = std::int64_t{layers} - first - last;
  const bool splits = middle == 0 ? rest == 0 : rest >= middle && rest % middle == 0;
  if (!splits) {
    for (const char* k : {"model.layers", "parallel.pp"}) keys.emplace_back(k);
    fail_layout(ErrorCode::kIndivisibleLayout, std::move(keys),
                "parallel.first_stage_layers {} and parallel.last_stage_layers {} leave {} of "
                "model.layers {} for the {} other stage(s) of parallel.pp {}: {}",
                first, last, rest, layers, middle, p.pp,
                middle == 0 ? "with no other stage they must add up to model.layers"
                            : "every other stage needs the same number of layers, at least one");
  }
  std::vector<int> per_gpu(static_cast<size_t>(p.pp), middle > 0 ? static_cast<int>(rest / middle) : 0);
  if (first != 0) per_gpu.front() = first;
  if (last != 0) per_gpu.back() = last;
  // Interleaving: every chunk of a GPU holds the same share of its layers (Megatron-Core asserts
  // the first / last stage counts divisible by the virtual pipeline size).
  for (int k = 0; k < p.pp; ++k)
    if (per_gpu[static_cast<size_t>(k)] % p.virtual_stages != 0) {
      keys.emplace_back("parallel.virtual_stages");
      fail_layout(ErrorCode::kIndivisibleLayout, std::move(keys),
                  "pipeline stage {} holds {} layers, not divisible by parallel.virtual_stages {}: "
                  "every model chunk of a GPU needs the same number of layers",
                  k, per_gpu[static_cast<size_t>(k)], p.virtual_stages);
    }
  return per_gpu;
}

double parameter_count(const ModelSpec& m) {
  require_resolved(m);
  const ParallelSpec one;  // tp 1, pp 1: one GPU holds the whole model
  const Dims d = dims_of(m, one);
  // Per layer (layer_parameter_count_per_gpu at tp 1): GPT's 4h² + 2hf + 9h + f, which is
  // 12h² + 13h for f = 4h (Narayanan et al. 2021, Eq. 2). Word embedding V·h, once more for an
  // untied output layer; a learned position table s·h. The final norm is left out, as in Eq. 2.
  const double per_layer = dbl(static_cast<std::int64_t>(layer_parameter_count_per_gpu(m, one)));
  const double position = d.rotary ? 0.0 : dbl(d.s) * dbl(d.h);
  const double word = dbl(d.v) * dbl(d.h) * (d.untied ? 2.0 : 1.0);
  return dbl(m.layers) * per_layer + word + position;
}

double model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch) {
  require_resolved(m);
  // One sequence on one GPU (tp 1, micro-batch 1): the ops' FLOPs are then the model's, and
  // sharding or batching only divides them. Flash attention off: its backward's recomputed
  // S = QK^T is hardware, not model, work; the unfused QK^T and ·V count each product once.
  ModelSpec math = m;
  math.flash_attention = false;
  const ParallelSpec one;  // tp 1, micro-batch 1, no sequence parallelism
  auto fwd_bwd = [](const std::vector<Op>& ops) {
    double sum = 0;
    for (const Op& op : ops) sum += op.fwd_flops + op.bwd_dgrad_flops + op.bwd_wgrad_flops;
    return sum;
  };
  const double per_sequence = dbl(m.layers) * fwd_bwd(layer_ops(math, one)) +
                              fwd_bwd(embedding_ops(math, one)) + fwd_bwd(head_ops(math, one));
  return dbl(global_batch) * per_sequence;
}

double eq7_model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch) {
  require_resolved(m);
  const double big_b = dbl(global_batch), l = m.layers, h = m.hidden, s = m.seq_len, v = m.vocab;
  return 72.0 * big_b * l * s * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
}

double selective_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch) {
  require_resolved(m);
  const double big_b = dbl(global_batch), l = m.layers, h = m.hidden, s = m.seq_len, v = m.vocab;
  return 72.0 * big_b * l * s * h * h * (1.0 + s / (3.0 * h) + v / (12.0 * l * h));
}

double full_recompute_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch) {
  require_resolved(m);
  const double big_b = dbl(global_batch), l = m.layers, h = m.hidden, s = m.seq_len, v = m.vocab;
  return 96.0 * big_b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

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

  Op out_proj = gemm_op("out_proj_gemm", OpGroup::kAttnProjInput, d.tokens, d.h, d.h / d.t);
  out_proj.saved_bytes = u64(kBytesPerElement * d.tokens * d.h / d.t);
  unfused_grad_accumulation(d, out_proj);
  ops.push_back(std::move(out_proj));
  if (tp) ops.push_back(tp_region_exit(d, "attn", OpGroup::kAttnProjInput));
  ops.push_back(dropout_residual_op(d, "attn_dropout_residual", OpGroup::kPost));

  ops.push_back(norm_op(d, "2", OpGroup::kPost));
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
  ops.push_back(dropout_residual_op(d, "mlp_dropout_residual", OpGroup::kPost));
  // FP8 (Transformer Engine, which Megatron-Core's layers use for --fp8-format): the linear
  // layers' GEMMs run in FP8; the attention core (TE DotProductAttention, 16-bit unless
  // --fp8-dot-product-attention) and the LM head (Megatron-Core's own ColumnParallelLinear, not
  // a TE module) stay 16-bit.
  // FP8 GEMMs read 1-byte operands and write a 16-bit result (cuBLASLt FP8 GEMMs as TE calls
  // them; dgrad and wgrad counted like the forward, as gemm_op does).
  if (spec.gemm_precision == GemmPrecision::kFp8)
    for (Op& op : ops) {
      if (op.kind != OpKind::kGemm) continue;
      op.fp8 = true;
      op.fwd_bytes = dbl(op.gemm_m * op.gemm_k + op.gemm_k * op.gemm_n + kBytesPerElement * op.gemm_m * op.gemm_n);
      op.bwd_dgrad_bytes = op.fwd_bytes;
      op.bwd_wgrad_bytes = op.fwd_bytes;
    }
  return ops;
}

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

std::uint64_t layer_parameter_count_per_gpu(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  const std::int64_t h = d.h, f = d.f, t = d.t;
  const std::int64_t bias = d.bias ? 1 : 0;
  const std::int64_t gates = d.swiglu ? 2 : 1;  // SwiGLU: gate and up in FC1
  const std::int64_t qkv = (h * d.qkv_width + bias * d.qkv_width) / t;
  const std::int64_t out_proj = h * h / t + bias * h;  // row-parallel: bias replicated
  const std::int64_t fc1 = (gates * h * f + bias * gates * f) / t;
  const std::int64_t fc2 = f * h / t + bias * h;       // row-parallel: bias replicated
  const std::int64_t norms = 2 * norm_parameters(d);
  return u64(qkv + out_proj + fc1 + fc2 + norms);
}

std::uint64_t embedding_parameter_count_per_gpu(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  return u64(d.v * d.h / d.t + (d.rotary ? 0 : d.s * d.h));
}

std::uint64_t head_parameter_count_per_gpu(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  // Untied: the output layer's own V·h/t. Tied, pp > 1: the copy of the word embedding Megatron
  // keeps on the last stage; tied, pp == 1: the first stage's embedding itself (same GPU).
  const std::int64_t output_layer = d.untied || p.pp > 1 ? d.v * d.h / d.t : 0;
  return u64(norm_parameters(d) + output_layer);
}

std::uint64_t tied_embedding_parameter_count_per_gpu(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  return d.untied || p.pp == 1 ? 0 : u64(d.v * d.h / d.t);
}

}  // namespace lynx::model

namespace lynx::model {

std::int64_t layer_parameter_tensors(const ModelSpec& spec) {
  const ParallelSpec one;
  const Dims d = dims_of(spec, one);
  // QKV, out-projection, FC1 (gate and up in one with SwiGLU), FC2; their biases; two norms.
  return 4 + (d.bias ? 4 : 0) + 2 * (d.rmsnorm ? 1 : 2);
}

std::int64_t embedding_parameter_tensors(const ModelSpec& spec) {
  const ParallelSpec one;
  return dims_of(spec, one).rotary ? 1 : 2;  // word (+ position) embedding
}

std::int64_t head_parameter_tensors(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  return (d.rmsnorm ? 1 : 2) + (d.untied || p.pp > 1 ? 1 : 0);  // final norm (+ output layer)
}

int multi_tensor_launches(double elements, std::int64_t tensors, int depth) {
  LYNX_CHECK(depth >= 1 && depth <= 5, "multi_tensor_apply depth {}", depth);
  if (tensors <= 0 || elements <= 0) return 0;
  static constexpr std::array<std::int64_t, 5> kMaxTensors = {110, 64, 48, 36, 30};
  constexpr double kChunkElements = 2048.0 * 32.0;
  constexpr double kMaxBlocks = 320.0;
  // Every tensor's last chunk is partial: at most one chunk more per tensor.
  const double chunks = std::ceil(elements / kChunkElements) + static_cast<double>(tensors);
  const auto by_tensors = (tensors + kMaxTensors[static_cast<size_t>(depth - 1)] - 1) / kMaxTensors[static_cast<size_t>(depth - 1)];
  const auto by_blocks = static_cast<std::int64_t>(std::ceil(chunks / kMaxBlocks));
  return static_cast<int>(std::max(by_tensors, by_blocks));
}

}  // namespace lynx::model
