#include "schedule/program_builder.hpp"
#include "schedule/builder.hpp"

#include "hw_models/collectives.hpp"
#include "common/error.hpp"
#include "hw_models/compute_model.hpp"
#include "model/gpt.hpp"
#include "schedule/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>

namespace lynx::schedule {

using model::Workload;
using strategies::RecomputePlan;

hw_models::Rank global_rank(const ParallelSpec& p, int stage, int replica, int tp_rank) {
  return stage * (p.tp * grad_replicas(p)) + replica * p.tp + tp_rank;
}

namespace detail {

sim::TaskId Builder::emit_tied_embedding_allreduce(sim::TaskId reduced) {
  // Megatron-LM's finalize_model_grads: after the data-parallel reduction, the first and last
  // stage all-reduce the word embedding's main gradient (_allreduce_word_embedding_grads, the
  // embedding group of each (dp, tp) rank), and the optimizer step of both waits for it. A
  // stage built alone (fast mode) leaves it out: fast/compose.cpp couples the two stages.
  const bool member = stage_ == 0 || stage_ == p_.pp - 1;
  if (part_ || !member || work_.tied_embedding_params == 0) return reduced;
  const std::uint32_t name = intern_name("embedding_grad_allreduce");
  const auto ranks = embedding_group_ranks(p_, dp_rank_, tp_rank_);
  const std::uint64_t bytes = tied_embedding_grad_bytes(p_, work_);
  // Every GPU simulated: a rendezvous group, as every other collective has (live mode runs it
  // as one NCCL call of the two ranks).
  if (!symmetric_)
    return emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, ranks,
                           embedding_communicator(), bytes, name, {reduced});
  // The reduced simulation has no groups: both members start it when both are ready and go
  // on when both have finished, by dependencies on the other member's tasks.
  const auto key = [this](int member_stage, int what) -> std::int64_t {
    const int side = member_stage == 0 ? 0 : 1;
    return -1 - ((side * 2 + what) * static_cast<std::int64_t>(p_.tp * grad_replicas(p_)) + dp_rank_ * p_.tp + tp_rank_);
  };
  const int other = stage_ == 0 ? p_.pp - 1 : 0;
  transfers_[key(stage_, 0)] = reduced;
  TaskArgs join;
  join.kind = sim::TaskKind::kMarker;
  join.name = intern_name("embedding_group_ready");
  const sim::TaskId ready = add_task(join, {reduced});
  add_pending_dep(ready, key(other, 0));
  const sim::TaskId allreduce =
      emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, ranks, -1, bytes, name, {ready});
  transfers_[key(stage_, 1)] = allreduce;
  join.name = intern_name("embedding_grads_reduced");
  const sim::TaskId done = add_task(join, {allreduce});
  add_pending_dep(done, key(other, 1));
  return done;
}

void Builder::emit_optimizer_step(std::uint64_t params, std::uint64_t stage_params, sim::TaskId after) {
  // Megatron's optimizer step, as memory-bound multi-tensor kernels over the local shard
  // (params / dp with the distributed optimizer); bf16 has no loss scaler (no unscale / inf
  // check). Bytes per local parameter: with 16-bit gradients the copy to fp32 main gradients
  // reads 2, writes 4 (with fp32 main gradients they are the optimizer's: no copy); gradient
  // L2 norm reads 4; clipping (applied when the norm exceeds clip_grad, as early in training)
  // reads and writes 4; fused Adam reads weight, gradient, momentum, variance (16) and writes
  // weight, momentum, variance (12); the bf16 copy of the weights reads 4, writes 2. Zeroing
  // the gradient buffer for the next iteration writes its bytes for every parameter of the
  // stage (the buffer is not sharded).
  // The routed experts' shard is over the expert-data-parallel group (edp_ranks_); MoE
  // models shard at most the optimizer (model::check_moe_simulation).
  const std::uint64_t experts = gpu_expert_params();
  const bool sharded = sharding_ != Sharding::kNone;
  const double local = static_cast<double>(params) / (sharded ? static_cast<double>(shard_size_) : 1.0) +
                       static_cast<double>(experts) / (sharded ? static_cast<double>(edp_ranks_.size()) : 1.0);
  // Kernels launched (host cost): the fp32 gradient copy one per parameter tensor
  // (Megatron's _copy_model_grads_to_main_grads), the norm, clip, Adam and bf16 copy apex
  // multi-tensor kernels of depth 1, 2, 4, 2 (model::multi_tensor_launches; the norm adds its
  // power), zeroing one per gradient buffer. Tensors of the local shard: the stage's, split
  // over dp by the distributed optimizer.
  std::int64_t tensors = 0;
  for (int c = 0; c < p_.virtual_stages; ++c) {
    const int vs = c * p_.pp + stage_;
    tensors += chunk_layer_params(vs).tensors;
    if (vs == 0) tensors += work_.embedding_param_tensors;
    if (vs == p_.pp * p_.virtual_stages - 1) tensors += work_.head_param_tensors;
  }
  if (sharding_ != Sharding::kNone) tensors = (tensors + shard_size_ - 1) / shard_size_;
  const auto launches = [&](int depth) { return model::multi_tensor_launches(local, tensors, depth); };
  const auto kernel = [&](const char* name, double bytes_per_param, double count, sim::TaskId dep,
                          int kernels) {
    TaskArgs k;
    k.category = sim::Category::kOptimizer;
    k.name = intern_name(name);
    k.kernels = kernels;
    k.work_ps = hw_models::kernel_time_ps(sc_.hardware, OpKind::kMemoryBound, 0, bytes_per_param * count);
    const sim::TaskId id = add_task(k, {dep});
    optimizer_bytes_.emplace(id, bytes_per_param * count);
    return id;
  };
  if (!p_.fp32_main_grads) after = kernel("grad_cast_fp32", 6.0, local, after, static_cast<int>(tensors));
  sim::TaskId last = kernel("grad_norm", 4.0, local, after, launches(1) + 1);
  // The squared norm is summed over the model-parallel group (and the data-parallel one with
  // the distributed optimizer); only the tensor-parallel part is modelled (the cross-stage
  // sum would couple stages in fast mode; one 4-byte all-reduce of latency only).
  if (p_.tp > 1)
    last = emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllReduce, tp_ranks(),
                           tp_communicator(), 4, intern_name("grad_norm_allreduce"), {last});
  // Host model: the clip factor is computed on the host. Megatron's clip_grad_norm_fp32
  // (megatron/optimizer/clip_grads.py) all-reduces the squared norm over the model-parallel
  // group and then takes `total_norm.item() ** (1.0 / norm_type)` (DeepSpeed's get_grad_norm
  // likewise `.item()`s it): the host blocks until the norm is on the GPU, and only then issues
  // the clipping, Adam and the copies.
  host_waits_for(last);
  last = kernel("grad_clip", 8.0, local, last, launches(2));
  last = kernel("adam", 28.0, local, last, launches(4));
  last = kernel("param_copy_bf16", 6.0, local, last, launches(2));
  // Full sharding keeps its parameters sharded: each unit gathers them before its forward.
  if ((sharding_ == Sharding::kOptimizer || sharding_ == Sharding::kGradients) && shard_size_ > 1 &&
      !overlaps_param_gather())
    last = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllGather, shard_ranks_,
                           shard_communicator_, 2 * params, intern_name("dp_param_allgather"), {last});
  if (sharding_ == Sharding::kOptimizer && edp_ranks_.size() > 1 && experts > 0)
    last = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllGather, edp_ranks_,
                           edp_communicator(), 2 * experts, intern_name("edp_param_allgather"), {last});
  // Sharded gradients (gradients, full): only the local shard of the buffer is zeroed.
  const double zeroed = sharding_ >= Sharding::kGradients ? static_cast<double>(stage_params) / shard_size_
                                                          : static_cast<double>(stage_params);
  kernel("zero_grads", static_cast<double>(model::grad_bytes_per_param(p_)), zeroed + static_cast<double>(experts), last, 1);
}

BuiltProgram Builder::build() {
  micro_batches_ = p_.global_batch / (p_.micro_batch * p_.dp);
  sharding_ = model::sharding_level(p_);
  shard_size_ = model::shard_group_size(p_, sc_.hardware.gpus_per_node);
  shard_replicas_ = grad_replicas(p_) / shard_size_;
  symmetric_ = simulates_one_gpu_per_stage(sc_, topo_);
  host_model_ = (!part_ || part_->host_start_ps >= 0) &&
                sc_.hardware.host_model_on();
  blocking_exchange_ = blocking_exchange(p_) && !part_;
  // Steady-state compression: 1F1B without interleaving. Every GPU has the same number of
  // steady pairs beyond its warm-up, and omitting some from all of them is the program for
  // fewer micro-batches (collective groups included: a group's members are in the same pair).
  // Not with the host model: its waits for the GPU (sim::Program::host_waits) turn the
  // executor's fast-forward off, which a compressed program needs.
  if (built_pairs_ > kCutPair && !part_ && !host_model_ && p_.schedule == ScheduleKind::kOneFOneB && p_.virtual_stages == 1) {
    const int first_gpu_pairs = micro_batches_ - p_.pp + 1;
    if (first_gpu_pairs > built_pairs_) {
      prog_.omitted_periods = first_gpu_pairs - built_pairs_;
      micro_batches_ -= first_gpu_pairs - built_pairs_;
    }
  }
  layer_ = with_times(work_.layer, NamedOp::List::kLayer);
  // A mixed model's dense layers. Names both kinds have (attention, norms) are the same ops, so
  // their NamedOp may point into either list.
  dense_layer_ = with_times(work_.dense_layer, NamedOp::List::kDenseLayer);
  tp_chunks_ = tp_overlap_chunks(p_);
  if (tp_chunks_ > 1) {
    layer_chunk_ = layer_;
    for (OpWithTimes& o : layer_chunk_) {
      if (o.op.kind != OpKind::kGemm) continue;
      o.op = model::gemm_row_chunk(o.op, tp_chunks_);
      o.t = op_times(sc_.hardware, o.op);
    }
  }
  embedding_ = with_times(work_.embedding, NamedOp::List::kEmbedding);
  head_ = with_times(work_.head, NamedOp::List::kHead);
  set_instance("");
  name_recompute_ = intern_name("recompute");
  // One memory tag per op group (tag_of), in OpGroup order.
  static constexpr std::array<const char*, model::kOpGroupNames.size()> kGroupTags = {
      "act/post", "act/attn_proj_input", "act/attn_core", "act/mlp", "act/moe_act", "act/layer_input"};
  prog_.tags.assign(kGroupTags.begin(), kGroupTags.end());
  if (zero_bubble()) prog_.tags.push_back("grad/held_for_weight_pass");  // kOutputGradTag
  if (sharding_ >= Sharding::kGradients) {
    gathered_tag_ = static_cast<sim::TagId>(prog_.tags.size());
    prog_.tags.push_back("param/gathered");
    unsharded_grad_tag_ = static_cast<sim::TagId>(prog_.tags.size());
    prog_.tags.push_back("grad/unsharded");
  }

  if (sc_.sim.comm_standin_bw_bytes_per_s > 0) {
    if (p_.pp != 1 || p_.dp != 1)
      fail(ErrorCode::kIncompatibleSettings, "sim.comm_standin.bw: the one-GPU stand-in for communication needs pp = 1 and dp = 1, got pp {} and dp {}",
           p_.pp, p_.dp);
    if (p_.cp != 1)
      fail(ErrorCode::kIncompatibleSettings, "sim.comm_standin.bw: the one-GPU stand-in for communication has no context-parallel ring: it needs cp = 1, got cp {}",
           p_.cp);
    standin_link_ = static_cast<sim::LinkId>(topo_.links().size());
  }
  BuiltProgram out;
  out.symmetric = symmetric_;
  out.replication = symmetric_ ? p_.tp * grad_replicas(p_) : 1;

  struct Sim {
    int stage, dp, tp;
  };
  std::vector<Sim> gpus;
  for (int s = 0; s < p_.pp; ++s) {
    if (part_ && s != part_->stage) continue;
    for (int d = 0; d < (symmetric_ ? 1 : grad_replicas(p_)); ++d)
      for (int t = 0; t < (symmetric_ ? 1 : p_.tp); ++t) gpus.push_back({s, d, t});
  }
  if (symmetric_) {
    rank_to_rep_.resize(static_cast<size_t>(topo_.num_gpus()), -1);
    for (int s = 0; s < p_.pp; ++s)
      for (int d = 0; d < grad_replicas(p_); ++d)
        for (int t = 0; t < p_.tp; ++t)
          rank_to_rep_[static_cast<size_t>(global_rank(p_, s, d, t))] = global_rank(p_, s, 0, 0);
  }

  for (size_t g = 0; g < gpus.size(); ++g) {
    gpu_ = static_cast<sim::GpuId>(g);
    sim::GpuDesc desc;
    desc.name = p_.cp > 1 ? fmt::format("stage{}.dp{}.cp{}.tp{}", gpus[g].stage, gpus[g].dp / p_.cp,
                                        gpus[g].dp % p_.cp, gpus[g].tp)
                          : fmt::format("stage{}.dp{}.tp{}", gpus[g].stage, gpus[g].dp, gpus[g].tp);
    desc.stream_names = kStreamNames;
    if (p_.cp > 1) desc.stream_names.push_back(kCpStreamName);
    if (shards_params()) desc.stream_names.push_back(kDpGatherStreamName);
    if (blocking_exchange_) {
      pp_grad_stream_ = static_cast<sim::StreamId>(desc.stream_names.size());
      desc.stream_names.push_back(kPpGradStreamName);
    }
    desc.memory_capacity_bytes = sc_.hardware.memory_bytes;
    desc.contention_factor = sc_.hardware.contention_factor;
    desc.comm_contention = sc_.hardware.comm_contention;
    out.machine.gpus.push_back(desc);
    out.gpu_stage.push_back(gpus[g].stage);
    out.gpu_rank.push_back(global_rank(p_, gpus[g].stage, gpus[g].dp, gpus[g].tp));

    std::uint64_t params = 0, expert_params = 0;
    for (int c = 0; c < p_.virtual_stages; ++c) {
      params += chunk_params(c * p_.pp + gpus[g].stage);
      expert_params += chunk_expert_params(c * p_.pp + gpus[g].stage);
    }
    prog_.static_bytes_per_gpu.push_back(model::static_bytes(sc_, params, expert_params));
    build_gpu(gpus[g].stage, gpus[g].dp, gpus[g].tp);
    if (g == 0 && gpus.size() > 1) reserve_like_first_gpu(gpus.size());
  }
  for (const Pending& pd : pending_) {
    const auto& registry = pd.posted ? exchanges_posted_ : transfers_;
    auto it = registry.find(pd.key);
    LYNX_CHECK(it != registry.end(), "pipeline transfer {} never {}", pd.key, pd.posted ? "received" : "sent");
    prog_.deps[pd.dep_index] = it->second;
  }
  const auto link_desc = [&](sim::LinkId l) -> sim::LinkDesc {
    if (l < static_cast<sim::LinkId>(topo_.links().size())) return topo_.links()[static_cast<size_t>(l)];
    return {l == standin_link_ ? "standin.device->host" : "standin.host->device",
            sc_.sim.comm_standin_bw_bytes_per_s, sc_.sim.comm_standin_latency_ps};
  };
  if (part_ && part_->compact_links) {
    // Dense ids in the order of the original ones, so every pass over links keeps its order.
    std::vector<sim::LinkId> used(prog_.path_links.begin(), prog_.path_links.end());
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    for (sim::LinkId& l : prog_.path_links)
      l = static_cast<sim::LinkId>(std::lower_bound(used.begin(), used.end(), l) - used.begin());
    out.machine.links.reserve(used.size());
    for (sim::LinkId l : used) out.machine.links.push_back(link_desc(l));
  } else {
    out.machine.links = topo_.links();
    if (standin_link_ >= 0)
      for (sim::LinkId l : {standin_link_, standin_link_ + 1}) out.machine.links.push_back(link_desc(l));
  }
  out.program = std::move(prog_);
  out.task_flops = std::move(flops_);
  out.layer_backward = std::move(layer_spans_);
  out.layer_forward = std::move(layer_fwd_spans_);
  out.steps = std::move(step_spans_);
  name_ops_.resize(out.program.names.size());
  out.name_ops = std::move(name_ops_);
  out.optimizer_bytes = std::move(optimizer_bytes_);
  out.compressed = out.program.omitted_periods > 0;
  if (out.compressed && (!compressible_ || out.program.period_flows_per_gpu.size() != gpus.size()))
    out.compressed = false;  // build_program builds it again in full
  return out;
}

}  // namespace detail

using detail::Builder;

std::vector<hw_models::Rank> embedding_group_ranks(const ParallelSpec& p, int dp_rank, int tp_rank) {
  return {global_rank(p, 0, dp_rank, tp_rank), global_rank(p, p.pp - 1, dp_rank, tp_rank)};
}

std::uint64_t tied_embedding_grad_bytes(const ParallelSpec& p, const Workload& workload) {
  return model::grad_bytes_per_param(p) * workload.tied_embedding_params;
}

MicroBatchLoadBytes micro_batch_load_bytes(const Scenario& sc) {
  constexpr std::uint64_t kMaxDataDim = 5, kKeys = 1, kInt64Bytes = 8;
  MicroBatchLoadBytes b;
  b.sizes = kMaxDataDim * kKeys * kInt64Bytes;
  b.data = static_cast<std::uint64_t>(sc.parallel.micro_batch) * (static_cast<std::uint64_t>(sc.model.seq_len) + 1) *
           kInt64Bytes;
  return b;
}

int tp_overlap_chunks(const ParallelSpec& p) {
  if (!p.tp_comm_overlap || !p.sequence_parallel || p.tp == 1) return 1;
  return p.tp_comm_overlap_chunks > 0 ? p.tp_comm_overlap_chunks : p.tp;
}

bool simulates_one_gpu_per_stage(const Scenario& sc, const hw_models::Topology& topo) {
  const int ranks_per_stage = sc.parallel.tp * grad_replicas(sc.parallel);
  if (sc.sim.comm_standin_bw_bytes_per_s > 0) return ranks_per_stage > 1;
  return sc.sim.exploit_symmetry && ranks_per_stage > 1 &&
         topo.links_private_per_gpu();
}

BuiltProgram build_program(const Scenario& sc, const RecomputePlan& plan, const hw_models::Topology& topo,
                           const Workload& workload, int steady_pairs) {
  const int virtual_stages = sc.parallel.pp * sc.parallel.virtual_stages;
  if (static_cast<int>(plan.stages.size()) != virtual_stages)
    fail(ErrorCode::kPlanMismatch, "plan has {} stages, the layout needs {}", plan.stages.size(), virtual_stages);
  if (steady_pairs > 0) {
    BuiltProgram built = Builder(sc, plan, topo, workload, nullptr, steady_pairs).build();
    if (built.compressed || built.program.omitted_periods == 0) return built;
  }
  return Builder(sc, plan, topo, workload).build();
}

BuiltProgram build_stage_steps(const Scenario& sc, const RecomputePlan& plan,
                               const hw_models::Topology& topo, const Workload& workload,
                               const StageSteps& part) {
  LYNX_CHECK(part.grads_final.size() == part.steps.size(), "grads_final needs one flag per step");
  return Builder(sc, plan, topo, workload, &part).build();
}

}  // namespace lynx::schedule
