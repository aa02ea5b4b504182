// model: closed-form counts: parameters, model FLOPs per iteration (Narayanan et al. 2021,
// Korthikanti et al. 2022), parameters and tensors per GPU, multi-tensor launches.
#include "model/gpt_dims.hpp"
#include "model/gpt_moe.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

namespace lynx::model {

using namespace detail;

double parameter_count(const ModelSpec& m) {
  require_resolved(m);
  const ParallelSpec one;  // tp 1, pp 1: one GPU holds the whole model
  const Dims d = dims_of(m, one);
  // Per layer (layer_parameter_count_per_gpu at tp 1): GPT's 4h² + 2hf + 9h + f, which is
  // 12h² + 13h for f = 4h (Narayanan et al. 2021, Eq. 2). Word embedding V·h, once more for an
  // untied output layer; a learned position table s·h. The final norm is left out, as in Eq. 2.
  // A MoE model's layers: its dense ones, and its MoE ones with every routed expert.
  const double moe_layers = moe_layer_count(m);
  const double dense_layers = dbl(m.layers) - moe_layers;
  const double dense_layer = dbl(static_cast<std::int64_t>(layer_parameter_count_per_gpu(dense_layer_model(m), one)));
  const double moe_layer = moe_layers > 0 ? dbl(static_cast<std::int64_t>(layer_parameter_count_per_gpu(m, one) +
                                                                          layer_expert_parameter_count_per_gpu(m, one)))
                                          : 0.0;
  const double position = d.rotary ? 0.0 : dbl(d.s) * dbl(d.h);
  const double word = dbl(d.v) * dbl(d.h) * (d.untied ? 2.0 : 1.0);
  return dense_layers * dense_layer + moe_layers * moe_layer + word + position;
}

double active_parameter_count(const ModelSpec& m) {
  const double total = parameter_count(m);
  if (!is_moe(m)) return total;
  // Of each MoE layer's routed experts a token passes topk.
  const ParallelSpec one;
  const Dims d = dims_of(m, one);
  const MoeDims e = moe_dims_of(m, one, d);
  const double experts = dbl(static_cast<std::int64_t>(layer_expert_parameter_count_per_gpu(m, one)));
  return total - moe_layer_count(m) * experts * dbl(e.experts - e.topk) / dbl(e.experts);
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
  // MoE layers at their active FLOPs: uniform routing, no token dropped (model work, not the
  // busiest rank's); dense layers of a MoE model with their own MLP.
  math.moe.expert_imbalance = 1.0;
  math.moe.capacity_factor = 0.0;
  const double moe_layers = moe_layer_count(m);
  const double dense_layers = dbl(m.layers) - moe_layers;
  const double per_sequence = dense_layers * fwd_bwd(layer_ops(dense_layer_model(math), one)) +
                              (moe_layers > 0 ? moe_layers * fwd_bwd(layer_ops(math, one)) : 0.0) +
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

std::uint64_t layer_parameter_count_per_gpu(const ModelSpec& spec, const ParallelSpec& p) {
  const Dims d = dims_of(spec, p);
  const std::int64_t h = d.h, f = d.f, t = d.t;
  const std::int64_t bias = d.bias ? 1 : 0;
  const std::int64_t gates = d.swiglu ? 2 : 1;  // SwiGLU: gate and up in FC1
  const std::int64_t qkv = (h * d.qkv_width + bias * d.qkv_width) / t;
  const std::int64_t out_proj = d.q_width * h / t + bias * h;  // row-parallel: bias replicated
  const std::int64_t norms = 2 * norm_parameters(d);
  // An MoE layer: its router and shared experts here, its routed experts in
  // layer_expert_parameter_count_per_gpu.
  if (is_moe(spec)) return u64(qkv + out_proj + moe_dense_part_parameters(d, moe_dims_of(spec, p, d)) + norms);
  const std::int64_t fc1 = (gates * h * f + bias * gates * f) / t;
  const std::int64_t fc2 = f * h / t + bias * h;       // row-parallel: bias replicated
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

std::int64_t layer_parameter_tensors(const ModelSpec& spec) {
  const ParallelSpec one;
  const Dims d = dims_of(spec, one);
  // QKV, out-projection, FC1 (gate and up in one with SwiGLU), FC2; their biases; two norms.
  // An MoE layer: the router, the local experts' FC1 and FC2 as one tensor each (Megatron-Core's
  // GroupedMLP weight1 / weight2), the shared experts' FC1 and FC2 (with their biases).
  if (is_moe(spec)) {
    const bool shared = spec.moe.shared_ffn_hidden > 0;
    return 2 + (d.bias ? 2 : 0) + 1 + (d.bias ? 2 : 0) + 2 + (shared ? (d.bias ? 4 : 2) : 0) + 2 * (d.rmsnorm ? 1 : 2);
  }
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
