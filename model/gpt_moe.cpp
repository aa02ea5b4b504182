// model: the mixture-of-experts MLP of a layer (Megatron-Core's MoELayer with the all-to-all
// token dispatcher and grouped GEMMs), its parameters, and which layers are MoE layers.
#include "model/gpt_moe.hpp"

#include "common/bytes.hpp"
#include "model/gpt_op_builders.hpp"

#include <algorithm>
#include <cmath>

namespace lynx::model {

using namespace detail;

namespace {

/// Megatron-Core's --moe-router-topk default (megatron/training/arguments.py: 2).
constexpr int kDefaultTopk = 2;
/// A routing decision per (token, expert): Megatron-Core's routing_map is a bool tensor.
constexpr std::int64_t kRoutingMapBytesPerElement = 1;

}  // namespace

bool is_moe(const ModelSpec& m) { return m.moe.num_experts > 0; }

bool is_moe_layer(const ModelSpec& m, int layer) {
  const int first = std::max(0, m.moe.first_dense_layers);
  if (!is_moe(m) || layer < first) return false;
  return (layer - first) % std::max(1, m.moe.layer_freq) == 0;
}

int moe_layer_count(const ModelSpec& m) {
  int n = 0;
  for (int l = 0; l < m.layers; ++l) n += is_moe_layer(m, l) ? 1 : 0;
  return n;
}

bool mixes_dense_and_moe(const ModelSpec& m) { return is_moe(m) && moe_layer_count(m) < m.layers; }

ModelSpec dense_layer_model(const ModelSpec& m) {
  ModelSpec dense = m;
  dense.moe = MoeSpec{};
  return dense;
}

bool communicates(const Op& op, const ParallelSpec& p, bool backward) {
  if (op.kind != OpKind::kCollective) return false;
  if ((backward ? op.bwd_collective : op.collective) == CollectiveKind::kNone) return false;
  switch (op.comm_group) {
    case CommGroup::kEp: return p.ep > 1;
    case CommGroup::kEtp: return expert_tp(p) > 1;
    case CommGroup::kTp: break;
  }
  return p.tp > 1;
}

namespace detail {

MoeDims moe_dims_of(const ModelSpec& m, const ParallelSpec& p, const Dims& d) {
  MoeDims e{};
  e.experts = m.moe.num_experts;
  e.topk = m.moe.router_topk > 0 ? m.moe.router_topk : kDefaultTopk;
  e.expert_ffn = m.moe.expert_ffn_hidden > 0 ? m.moe.expert_ffn_hidden : m.ffn_hidden;
  e.shared_ffn = m.moe.shared_ffn_hidden;
  e.ep = p.ep;
  e.etp = expert_tp(p);
  e.local_experts = e.experts / e.ep;
  // Uniform routing: each GPU routes its local tokens (s·b/(cp·tp): the SP shard) to topk
  // experts each; the all-to-all over the ep group brings each GPU as many rows as it sent, and
  // the all-gather over the expert-tensor-parallel group (etp > 1) gives every member of that
  // group all of their rows for its shard of each expert: etp · local tokens · topk rows per GPU
  // (with etp = tp, the TP group's s·b·topk). The busiest rank takes expert_imbalance times
  // that, at most capacity_factor times (tokens beyond an expert's capacity are dropped; a
  // capacity below 1 drops tokens even when routing is even).
  const double share = m.moe.capacity_factor > 0 ? std::min(m.moe.expert_imbalance, m.moe.capacity_factor)
                                                 : m.moe.expert_imbalance;
  e.load = share;
  e.expert_rows = static_cast<std::int64_t>(std::ceil(share * dbl(e.etp * d.local_tokens) * dbl(e.topk)));
  return e;
}

void append_moe_mlp(const Dims& d, const MoeDims& e, std::vector<Op>& ops) {
  const bool tp = d.t > 1;
  // The rows the expert-tensor-parallel group gathers: its etp members' received rows.
  const std::int64_t gathered_bytes = kBytesPerElement * e.etp * d.local_tokens * e.topk * d.h;
  const std::int64_t act_bytes = kBytesPerElement * d.local_tokens * d.h;  // one local s·b·h tensor
  const std::int64_t routed = d.local_tokens * e.topk;                      // local rows after permute
  const std::int64_t routed_bytes = kBytesPerElement * routed * d.h;

  // Router: logits[tokens × E] = x · W_r, the weight replicated over TP (Megatron-Core's
  // TopKRouter), on the local tokens. It saves its input, the LN2 output, which the shared
  // experts read too (one tensor).
  Op router = gemm_op("router_gemm", OpGroup::kMlp, d.local_tokens, e.experts, d.h);
  router.saved_bytes = u64(act_bytes);
  unfused_grad_accumulation(d, router);
  ops.push_back(std::move(router));

  // Softmax over the experts and top-k (fused in Megatron-Core's topk_softmax_with_capacity):
  // reads the logits, writes the probabilities and the routing map; saves the 16-bit
  // probabilities (the softmax backward reads them) and the bool routing map (which
  // permute / unpermute need): 3 bytes per (token, expert).
  const std::int64_t scores = d.local_tokens * e.experts;
  Op topk = elementwise_op("router_topk", OpGroup::kMlp,
                           2 * kBytesPerElement * scores + kRoutingMapBytesPerElement * scores,
                           (kBytesPerElement + kRoutingMapBytesPerElement) * scores);
  topk.saves = Saves::kOutput;
  topk.fwd_kernels = 3;  // softmax, top-k, scatter into the routing map
  topk.bwd_dgrad_kernels = 2;
  ops.push_back(std::move(topk));

  // Permute: gathers each token once per chosen expert, grouped by expert (read the local
  // tokens, write topk copies); its backward scatters the gradients back (the routing map is
  // saved on router_topk).
  Op permute = elementwise_op("moe_permute", OpGroup::kMlp, act_bytes + routed_bytes, 0);
  permute.bwd_dgrad_bytes = dbl(act_bytes + routed_bytes);
  ops.push_back(std::move(permute));

  // Dispatch: all-to-all over the expert-parallel group, each rank sending its routed rows to
  // the ranks owning their experts (1/ep of them each under uniform routing); backward sends
  // the gradients back. Then, with etp > 1, the rows received by the expert-tensor-parallel
  // group are all-gathered over it (backward: reduce-scatter), so that each member holds all of
  // them for its shard of each expert. NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553,
  // megatron/core/transformer/moe/token_dispatcher.py (MoEAlltoAllTokenDispatcher): the
  // dispatcher's tp_group is pg_collection.expt_tp, token_dispatch all-to-alls over the expert
  // ep group, dispatch_postprocess all-gathers over expt_tp when its size > 1, and
  // combine_preprocess reduce-scatters over it; the dense tp group plays no part. With tp > 1
  // and etp 1 the ep group spans the dense TP ranks' sequence shards and nothing is gathered.
  Op dispatch = collective_op("ep_dispatch", OpGroup::kMlp, CollectiveKind::kAllToAll,
                              CollectiveKind::kAllToAll, routed_bytes);
  dispatch.comm_group = CommGroup::kEp;
  ops.push_back(std::move(dispatch));
  if (e.etp > 1) {
    Op gather = collective_op("moe_allgather", OpGroup::kMlp, CollectiveKind::kAllGather,
                              CollectiveKind::kReduceScatter, gathered_bytes);
    gather.comm_group = CommGroup::kEtp;
    ops.push_back(std::move(gather));
  }

  // Grouped GEMMs over the local experts (--moe-grouped-gemm): the rows routed to this GPU's
  // E/ep experts as one GEMM of expert_rows rows, with every local expert's weight read once.
  const std::int64_t gates = d.swiglu ? 2 : 1;
  // Each expert's FC1 column-parallel and FC2 row-parallel over etp (experts.py: TEGroupedMLP's
  // linear_fc1 / linear_fc2 take pg_collection.expt_tp).
  const std::int64_t fc1_width = gates * e.expert_ffn / e.etp;
  const std::int64_t ffn_width = e.expert_ffn / e.etp;
  const std::int64_t rows = e.expert_rows;
  auto grouped = [&](std::string name, OpGroup group, std::int64_t n, std::int64_t k) {
    Op op = gemm_op(std::move(name), group, rows, n, k);
    // HBM bytes: the activations once, the weights of all local experts once.
    const double bytes = dbl(kBytesPerElement * (rows * k + e.local_experts * k * n + rows * n));
    op.fwd_bytes = op.bwd_dgrad_bytes = op.bwd_wgrad_bytes = bytes;
    unfused_grad_accumulation(d, op);
    if (!d.grad_accumulation_fusion) op.bwd_wgrad_accumulate_bytes *= dbl(e.local_experts);
    return op;
  };
  Op fc1 = grouped("expert_fc1_gemm", OpGroup::kMlp, fc1_width, d.h);
  fc1.saved_bytes = u64(kBytesPerElement * rows * d.h);
  ops.push_back(std::move(fc1));
  const std::int64_t fc1_act = kBytesPerElement * rows * fc1_width;
  const std::int64_t ffn_act = kBytesPerElement * rows * ffn_width;
  if (d.swiglu)
    ops.push_back(elementwise_op("expert_swiglu", OpGroup::kMlp, fc1_act + ffn_act, fc1_act));
  else
    ops.push_back(elementwise_op("expert_gelu", OpGroup::kMlp, 2 * ffn_act, ffn_act));
  // The FC2 input (the activation output) is group moe_act, what Megatron-Core's
  // `--recompute-modules moe_act` frees: TEGroupedMLP.forward runs the activation under
  // CheckpointWithoutOutput, which saves the activation's inputs (the FC1 output, kept here on
  // expert_swiglu / expert_gelu) and, once FC2 has run, discards the activation output and
  // re-runs the activation alone before FC2's backward (NVIDIA/Megatron-LM
  // d98e8a64ddf34856e74b24714e3bedb2f5a39553: megatron/core/transformer/moe/experts.py,
  // megatron/core/tensor_parallel/random.py, and the recompute_modules list in
  // megatron/core/transformer/transformer_config.py). The recompute is the activation kernel
  // only: no all-to-all, no TP collective, no GEMM.
  Op fc2 = grouped("expert_fc2_gemm", OpGroup::kMoeAct, d.h, ffn_width);
  fc2.saved_bytes = u64(ffn_act);
  ops.push_back(std::move(fc2));

  if (e.etp > 1) {
    Op scatter = collective_op("moe_reducescatter", OpGroup::kMlp, CollectiveKind::kReduceScatter,
                               CollectiveKind::kAllGather, gathered_bytes);
    scatter.comm_group = CommGroup::kEtp;
    ops.push_back(std::move(scatter));
  }
  Op combine = collective_op("ep_combine", OpGroup::kMlp, CollectiveKind::kAllToAll,
                             CollectiveKind::kAllToAll, routed_bytes);
  combine.comm_group = CommGroup::kEp;
  ops.push_back(std::move(combine));

  // Unpermute: scales each expert output by its probability and sums a token's topk rows
  // (read the routed rows and the probabilities, write the local tokens); saves its input, the
  // expert outputs, for the probabilities' gradient.
  Op unpermute = elementwise_op("moe_unpermute", OpGroup::kMlp,
                                routed_bytes + kBytesPerElement * routed + act_bytes, routed_bytes);
  unpermute.bwd_dgrad_bytes = dbl(2 * routed_bytes + act_bytes);
  unpermute.fwd_kernels = unpermute.bwd_dgrad_kernels = 2;
  ops.push_back(std::move(unpermute));

  if (e.shared_ffn > 0) {
    // Shared experts: a dense MLP of inner size shared_ffn every token passes (Megatron-Core's
    // SharedExpertMLP, TP-sharded like the dense MLP, with its own SP all-gather and
    // reduce-scatter). Its input is the router's (saved there once); with SP it is gathered
    // again for the wgrad.
    if (tp) ops.push_back(tp_region_entry(d, "shared", OpGroup::kMlp));
    const std::int64_t shared_fc1_width = gates * e.shared_ffn / d.t;
    const std::int64_t shared_width = e.shared_ffn / d.t;
    Op sfc1 = gemm_op("shared_fc1_gemm", OpGroup::kMlp, d.tokens, shared_fc1_width, d.h);
    mark_sharded_input(d, sfc1);
    unfused_grad_accumulation(d, sfc1);
    ops.push_back(std::move(sfc1));
    const std::int64_t s_fc1_act = kBytesPerElement * d.tokens * shared_fc1_width;
    const std::int64_t s_act = kBytesPerElement * d.tokens * shared_width;
    if (d.swiglu)
      ops.push_back(elementwise_op("shared_swiglu", OpGroup::kMlp, s_fc1_act + s_act, s_fc1_act));
    else
      ops.push_back(elementwise_op("shared_gelu", OpGroup::kMlp, 2 * s_act, s_act));
    Op sfc2 = gemm_op("shared_fc2_gemm", OpGroup::kMlp, d.tokens, d.h, shared_width);
    sfc2.saved_bytes = u64(s_act);
    unfused_grad_accumulation(d, sfc2);
    ops.push_back(std::move(sfc2));
    if (tp) ops.push_back(tp_region_exit(d, "shared", OpGroup::kMlp));
  }
}

}  // namespace detail

std::uint64_t layer_expert_parameter_count_per_gpu(const ModelSpec& spec, const ParallelSpec& p) {
  if (!is_moe(spec)) return 0;
  const Dims d = dims_of(spec, p);
  const MoeDims e = moe_dims_of(spec, p, d);
  const std::int64_t gates = d.swiglu ? 2 : 1, bias = d.bias ? 1 : 0;
  // FC1 column-parallel over etp (its bias sharded), FC2 row-parallel (its bias replicated).
  const std::int64_t per_expert =
      (gates * d.h * e.expert_ffn + bias * gates * e.expert_ffn) / e.etp + e.expert_ffn * d.h / e.etp + bias * d.h;
  return u64(e.local_experts * per_expert);
}

namespace detail {

std::int64_t moe_dense_part_parameters(const Dims& d, const MoeDims& e) {
  const std::int64_t gates = d.swiglu ? 2 : 1, bias = d.bias ? 1 : 0;
  const std::int64_t router = d.h * e.experts;  // replicated over TP, no bias
  const std::int64_t shared = e.shared_ffn == 0 ? 0
                                                : (gates * d.h * e.shared_ffn + bias * gates * e.shared_ffn) / d.t +
                                                      e.shared_ffn * d.h / d.t + bias * d.h;
  return router + shared;
}

}  // namespace detail

}  // namespace lynx::model
