// schedule::detail::Builder: sharded data parallelism. The shard and replica groups, the
// gradient reduction of every sharding level, and full sharding's per-unit parameter
// all-gathers (ZeRO-3 / FSDP; docs/scenario.md, "Sharded data parallelism").
//
// Full sharding follows PyTorch FSDP2's defaults (torch/distributed/fsdp/_fully_shard/
// _fully_shard.py, fully_shard: reshard_after_forward=True; _fsdp_state.py / _fsdp_param_group.py:
// implicit forward prefetch and backward prefetch of one unit; gradients reduce-scattered in
// every backward unless set_requires_gradient_sync(False)): one FSDP unit per transformer layer
// (and the embedding and head of the stages holding them), each unit's 16-bit parameters
// all-gathered on their own stream before its forward and again before its backward, freed
// after each, its gradients reduce-scattered after its backward in every micro-batch. An
// all-gather waits for the release of the unit two before it, so at most two units are
// gathered at once: the one computing and the one prefetched.
#include "schedule/builder.hpp"

namespace lynx::schedule::detail {

void Builder::set_shard_groups() {
  const int per_node = sc_.hardware.gpus_per_node;
  shard_ranks_.clear();
  replica_ranks_.clear();
  for (int d : model::shard_group_of(p_, per_node, dp_rank_)) shard_ranks_.push_back(global_rank(p_, stage_, d, tp_rank_));
  for (int d : model::replica_group_of(p_, per_node, dp_rank_)) replica_ranks_.push_back(global_rank(p_, stage_, d, tp_rank_));
  // The whole dp group shards: its communicator, as the unsharded levels use.
  const bool whole = shard_size_ == grad_replicas(p_);
  const int stage_tp = stage_ * p_.tp + tp_rank_;
  shard_communicator_ = whole ? dp_communicator() : 4'000'000 + stage_tp * shard_replicas_ + dp_rank_ / shard_size_;
  replica_communicator_ = 5'000'000 + stage_tp * shard_size_ + dp_rank_ % shard_size_;
}

sim::TaskId Builder::emit_dp_allreduce(std::uint64_t params, sim::TaskId after, std::int64_t held_bytes) {
  if (grad_replicas(p_) == 1 || params == 0) return after;
  // Gradients as accumulated (model::grad_bytes_per_param: fp32 main gradients by default).
  const std::uint64_t bytes = model::grad_bytes_per_param(p_) * params;
  sim::TaskId last = after;
  if (sharding_ == Sharding::kNone) {
    last = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, dp_ranks(),
                           dp_communicator(), bytes, intern_name("dp_allreduce"), {after});
  } else {
    // Reduce-scatter in the shard group; the parameter all-gather of optimizer / gradients
    // sharding follows the optimizer step. Hybrid sharding then all-reduces the shard across
    // the replicas (Megatron's --num-distributed-optimizer-instances, FSDP2's HSDP).
    if (shard_size_ > 1)
      last = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kReduceScatter, shard_ranks_,
                             shard_communicator_, bytes, intern_name("dp_reducescatter"), {after});
    if (shard_replicas_ > 1)
      last = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, replica_ranks_,
                             replica_communicator_, (bytes + static_cast<std::uint64_t>(shard_size_) - 1) / static_cast<std::uint64_t>(shard_size_),
                             intern_name("dp_replica_allreduce"), {last});
  }
  if (held_bytes > 0) {
    TaskArgs freed;
    freed.stream = kDp;
    freed.kind = sim::TaskKind::kMarker;
    freed.name = intern_name("unsharded_grads_freed");
    last = add_task(freed, {last});
    add_mem(last, -held_bytes, unsharded_grad_tag_, false);
  }
  return last;
}

Builder::FsdpStep Builder::fsdp_units(const StepInfo& step, bool backward) const {
  const int last_vs = p_.pp * p_.virtual_stages - 1;
  FsdpStep units;
  units.backward = backward;
  units.layers = static_cast<int>(step.sp.layers.size());
  const bool first = step.vs == 0, last = step.vs == last_vs;
  // Compute order: forward embedding, layers, head; backward the reverse.
  if (first && !backward) units.params.push_back(work_.embedding_params);
  if (last && backward) units.params.push_back(work_.head_params);
  units.layer_unit0 = static_cast<int>(units.params.size());
  for (int l = 0; l < units.layers; ++l) {
    // Backward: the units in compute order, top layer first.
    const int layer = step.sp.first_layer + (backward ? units.layers - 1 - l : l);
    units.params.push_back(work_.params_of_layers(layer, 1).params);
  }
  if (last && !backward) units.params.push_back(work_.head_params);
  if (first && backward) units.params.push_back(work_.embedding_params);
  return units;
}

void Builder::fsdp_begin_step(const StepInfo& step, bool backward) {
  fsdp_ = fsdp_units(step, backward);
  if (!fsdp_.params.empty()) fsdp_gather(0);
}

void Builder::fsdp_hold_following(sim::TaskId tail) {
  // A step built alone (fast mode): in the whole iteration the following step's first unit is
  // allocated for its all-gather once this step's second-to-last unit is freed, while this
  // step's last unit computes. Its memory is held here as then (freed at the step's end, where
  // the following step, built alone, allocates it again), so that the step's peak is the one
  // it has in the iteration; the all-gather itself runs in the following step.
  const StepInfo next = step_info(part_->sharded_following);
  const FsdpStep units = fsdp_units(next, !next.st.forward);
  if (units.params.empty()) return;
  const auto bytes = static_cast<std::int64_t>(2 * units.params.front());
  TaskArgs held;
  held.stream = dp_gather_stream(p_);
  held.kind = sim::TaskKind::kMarker;
  held.name = intern_name("param_unshard");
  const sim::TaskId alloc = add_task(held, {fsdp_issued_ >= 2 ? fsdp_releases_[fsdp_issued_ - 2] : -1});
  add_mem(alloc, bytes, gathered_tag_, false);
  held.name = intern_name("param_prefetch_held");
  const sim::TaskId freed = add_task(held, {tail, alloc});
  add_mem(freed, -bytes, gathered_tag_, false);
}

sim::TaskId Builder::fsdp_gather(int k) {
  while (static_cast<int>(fsdp_.gathers.size()) <= k) {
    const std::uint64_t params = fsdp_.params[fsdp_.gathers.size()];
    // Memory bound of the prefetch: this all-gather's buffer is allocated once the unit two
    // before it has been released.
    const sim::TaskId freed = fsdp_issued_ >= 2 ? fsdp_releases_[fsdp_issued_ - 2] : -1;
    ++fsdp_issued_;
    TaskArgs start;
    start.stream = dp_gather_stream(p_);
    start.kind = sim::TaskKind::kMarker;
    start.name = intern_name("param_unshard");
    const sim::TaskId alloc = add_task(start, {freed});
    add_mem(alloc, static_cast<std::int64_t>(2 * params), gathered_tag_, false);
    // 16-bit parameters, 2 bytes each, over the shard group (the replicas hold the same shards).
    sim::TaskId gather = alloc;
    if (shard_size_ > 1)
      gather = emit_collective(dp_gather_stream(p_), sim::Category::kDpComm, hw_models::Collective::kAllGather, shard_ranks_,
                               shard_communicator_, 2 * params, intern_name("fsdp_param_allgather"), {alloc});
    fsdp_.gathers.push_back(gather);
  }
  return fsdp_.gathers[static_cast<size_t>(k)];
}

sim::TaskId Builder::fsdp_enter_unit(int k, sim::TaskId after) {
  if (k + 1 < static_cast<int>(fsdp_.params.size())) fsdp_gather(k + 1);  // the prefetch
  TaskArgs join;
  join.kind = sim::TaskKind::kMarker;
  join.name = intern_name("params_gathered");
  return add_task(join, {after, fsdp_gather(k)});
}

void Builder::fsdp_leave_unit(int k, sim::TaskId after, bool backward, GpuSteps& g) {
  const std::uint64_t params = fsdp_.params[static_cast<size_t>(k)];
  TaskArgs release;
  release.kind = sim::TaskKind::kMarker;
  release.name = intern_name("param_reshard");
  const sim::TaskId released = add_task(release, {after});
  add_mem(released, -static_cast<std::int64_t>(2 * params), gathered_tag_, false);
  // In backward the unit's unsharded gradients exist from here until reduce-scattered.
  fsdp_releases_.push_back(released);
  if (!backward || grad_replicas(p_) == 1 || params == 0) return;
  const auto grads = static_cast<std::int64_t>(model::grad_bytes_per_param(p_) * params);
  add_mem(released, grads, unsharded_grad_tag_, false);
  g.dp.tasks.push_back(emit_dp_allreduce(params, released, grads));
}

}  // namespace lynx::schedule::detail
