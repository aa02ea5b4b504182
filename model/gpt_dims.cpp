// model::detail: the model dimensions one GPU sees (dims_of) and the resolved-model check.
#include "model/gpt_dims.hpp"

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

namespace {

/// Megatron's fused scale-mask-softmax kernel runs only for some shapes
/// (FusedScaleMaskSoftmax.is_kernel_available: scaled_masked_softmax_fusion on — model.
/// masked_softmax_fusion, checked by the caller —, 16 < s <= 4096, s divisible by 4, and
/// micro-batch × local heads divisible by 4 — the batches a 128-thread block handles for
/// s > 128); otherwise PyTorch's softmax runs. Inputs are 16-bit here, as the kernel needs.
bool fused_softmax_available(const Dims& d) {
  return d.s > 16 && d.s <= 4096 && d.s % 4 == 0 && (d.b * (d.a / d.t)) % 4 == 0;
}

}  // namespace

namespace detail {

void require_resolved(const ModelSpec& m) {
  LYNX_CHECK(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.ffn_hidden > 0 && m.vocab > 0,
             "model not resolved (layers {}, hidden {}, heads {}, ffn_hidden {}, vocab {}): call "
             "model::resolve_model or model::resolve_scenario first",
             m.layers, m.hidden, m.heads, m.ffn_hidden, m.vocab);
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
  d.head_dim = m.head_dim > 0 ? m.head_dim : d.h / d.a;
  d.q_width = d.a * d.head_dim;
  d.qkv_width = d.q_width + 2 * d.kv * d.head_dim;
  d.sp = p.sequence_parallel && p.tp > 1;
  // kDefault (a spec built in code, not resolved) is GPT's choice.
  d.swiglu = m.mlp == MlpKind::kSwiglu;
  d.rmsnorm = m.norm == NormKind::kRmsNorm;
  d.rotary = m.position_embedding == PositionKind::kRotary;
  d.untied = m.embeddings == EmbeddingTie::kUntied;
  d.bias = m.linear_bias != LinearBias::kOff;
  d.dropout = m.dropout != Dropout::kOff;
  d.cp = p.cp;
  d.seq_local = d.s / d.cp;
  d.tokens = d.seq_local * d.b;
  d.local_tokens = d.sp ? d.tokens / d.t : d.tokens;
  d.grad_accumulation_fusion = m.gradient_accumulation_fusion;
  d.bias_gelu_fusion = m.bias_gelu_fusion;
  d.bias_dropout_fusion = m.bias_dropout_fusion;
  d.fused_softmax = m.masked_softmax_fusion && fused_softmax_available(d);
  d.main_grad_bytes = static_cast<std::int64_t>(grad_bytes_per_param(p));
  return d;
}

}  // namespace detail



}  // namespace lynx::model
