// schedule::detail::Builder: the pipeline steps of one GPU (forward, backward, weight), the
// micro-batch load, pipeline sends, gradient buckets and parameter all-gathers.
#include "schedule/builder.hpp"

namespace lynx::schedule::detail {

sim::TaskId Builder::emit_expert_grad_reduction(std::uint64_t params, sim::TaskId after) {
  if (edp_ranks_.size() <= 1 || params == 0) return after;
  // Megatron-Core's DDP keeps the experts' gradients in buffers of their own, reduced over the
  // expert-data-parallel group (MoE models shard at most the optimizer: model::check_moe_simulation).
  const std::uint64_t bytes = model::grad_bytes_per_param(p_) * params;
  if (sharding_ == Sharding::kOptimizer)
    return emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kReduceScatter, edp_ranks_,
                           edp_communicator(), bytes, intern_name("edp_reducescatter"), {after});
  return emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, edp_ranks_,
                         edp_communicator(), bytes, intern_name("edp_allreduce"), {after});
}

void Builder::emit_send(int from_vs, int to_vs, int micro_batch, bool forward, sim::TaskId after) {
  if (blocking_exchange_) {  // sent by the next exchange (emit_exchange), after `after` anyway
    exchange_sends_.push_back({from_vs, to_vs, micro_batch, forward, instance_});
    return;
  }
  add_send({from_vs, to_vs, micro_batch, forward, instance_}, kPp, after, false);
}

void Builder::add_send(const QueuedSend& q, sim::StreamId stream, sim::TaskId after, bool rendezvous) {
  TaskArgs send;
  send.stream = stream;
  send.kind = sim::TaskKind::kComm;
  send.category = sim::Category::kPpComm;
  send.name = q.forward ? intern_once(step_names_.send_activation, "send_activation")
                        : intern_once(step_names_.send_gradient, "send_gradient");
  send.kernels = 1;  // NCCL's send kernel
  send.host_call = true;
  const sim::TaskId t = add_task(send, {after});
  const std::int64_t key = transfer_key(q.from_vs, q.micro_batch, q.forward);
  if (rendezvous) add_pending_dep(t, key, /*posted=*/true);
  add_flow(t, rank_, stage_rank(q.to_vs % p_.pp), work_.boundary_bytes);
  transfers_[key] = t;
}

void Builder::emit_exchange(const std::vector<PipeStep>& steps, std::size_t next, sim::TaskId after) {
  // Megatron's p2p_communication._communicate (Megatron-LM megatron/p2p_communication.py at
  // cfd2e21607, 2022; Megatron-Core megatron/core/pipeline_parallel/p2p_communication.py at
  // d98e8a64dd with batch_p2p_comm and batch_p2p_sync, its default without interleaving):
  // every send and receive of the call go into one torch.distributed.batch_isend_irecv, the
  // host waits for each request and then calls torch.cuda.synchronize(). NCCL's send completes
  // only once the receiver has posted the matching receive, so a send waits for the receiver's
  // exchange as well as its own; the synchronize waits for every stream of the GPU, and only
  // then does the host issue the next step.
  const int last_vs = p_.pp * p_.virtual_stages - 1;
  std::vector<std::int64_t> received;
  for (std::size_t k = next; k < exchange_inputs_end(steps, next); ++k) {
    const StepInfo step = step_info(steps[k]);
    if (step.st.forward && step.vs > 0) received.push_back(transfer_key(step.vs - 1, step.st.micro_batch, true));
    if (step.st.backward() && step.vs < last_vs) received.push_back(transfer_key(step.vs + 1, step.st.micro_batch, false));
  }
  if (received.empty() && exchange_sends_.empty() && !calls_empty_exchange(p_.schedule, next)) return;
  set_instance("");
  TaskArgs marker;
  marker.kind = sim::TaskKind::kMarker;
  marker.name = intern_once(step_names_.exchange_posted, "exchange_posted");
  const sim::TaskId posted = add_task(marker, {after, exchange_done_});
  for (const std::int64_t key : received) exchanges_posted_[key] = posted;
  std::vector<sim::TaskId> done_deps = {posted};
  for (const QueuedSend& q : exchange_sends_) {
    instance_ = q.instance;
    add_send(q, q.forward ? kPp : pp_grad_stream_, posted, true);
  }
  exchange_sends_.clear();
  set_instance("");
  // torch.cuda.synchronize(): everything issued so far, on every stream.
  for (const sim::TaskId t : stream_tail_)
    if (t >= 0) done_deps.push_back(t);
  marker.name = intern_once(step_names_.exchange_done, "exchange_done");
  const sim::TaskId done = add_task(marker, done_deps.begin(), done_deps.end());
  for (const std::int64_t key : received) add_pending_dep(done, key);
  host_waits_for(done);
  exchange_done_ = done;
}

sim::TaskId Builder::gather_received(sim::TaskId received) {
  if (work_.boundary_gather_bytes == 0) return received;
  return emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllGather, tp_ranks(), tp_communicator(),
                         work_.boundary_gather_bytes, intern_name("pp_recv_allgather"), {received});
}

void Builder::emit_param_gathers(const std::vector<int>& chunks) {
  set_instance("");
  const std::uint32_t name = intern_name("dp_param_allgather");
  for (int vs : chunks) {
    ParamGates& gates = param_gates_[vs];
    const StagePlan& sp = plan_.stages[static_cast<size_t>(vs)];
    gates.layer.assign(sp.layers.size(), -1);
    // Units in forward order: embedding, layers, head; each waits for the bucket it closed in.
    std::vector<sim::TaskId*> open;
    std::uint64_t params = 0;
    auto flush = [&] {
      if (params == 0) return;
      // bf16 parameters (2 bytes each), as the all-gather after the optimizer step moves them.
      const sim::TaskId gather = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllGather,
                                                 shard_ranks_, shard_communicator_, 2 * params, name, {});
      for (sim::TaskId* unit : open) *unit = gather;
      open.clear();
      params = 0;
    };
    auto add = [&](sim::TaskId* unit, std::uint64_t unit_params) {
      open.push_back(unit);
      params += unit_params;
      if (params >= std::max<std::uint64_t>(1, p_.dp_bucket_bytes / 2)) flush();
    };
    if (vs == 0) add(&gates.embedding, work_.embedding_params);
    for (size_t l = 0; l < gates.layer.size(); ++l)
      add(&gates.layer[l], work_.params_of_layers(sp.first_layer + static_cast<int>(l), 1).params);
    if (vs == p_.pp * p_.virtual_stages - 1) add(&gates.head, work_.head_params);
    flush();
  }
}

sim::TaskId Builder::wait_for_params(sim::TaskId after, sim::TaskId gather, sim::TaskId& waited) {
  if (gather < 0 || gather == waited) return after;
  waited = gather;
  TaskArgs join;
  join.kind = sim::TaskKind::kMarker;
  join.name = intern_name("params_gathered");
  return add_task(join, {after, gather});
}

void Builder::flush_dp_bucket(DpBuckets& dp, sim::TaskId after) {
  if (dp.bucket_params > 0) dp.tasks.push_back(emit_dp_allreduce(dp.bucket_params, after, dp.held_bytes));
  dp.total_params += dp.bucket_params;
  dp.bucket_params = 0;
  dp.held_bytes = 0;
}

void Builder::hold_unsharded_grads(DpBuckets& dp, std::uint64_t params, sim::TaskId after) {
  // Gradients sharding: a micro-batch's gradients are unsharded from its backward until their
  // bucket is reduce-scattered (the sharded fp32 accumulation is static memory).
  if (sharding_ != Sharding::kGradients || p_.dp == 1 || params == 0) return;
  TaskArgs held;
  held.kind = sim::TaskKind::kMarker;
  held.name = intern_name("unsharded_grads");
  const sim::TaskId t = add_task(held, {after});
  const auto bytes = static_cast<std::int64_t>(model::grad_bytes_per_param(p_) * params);
  add_mem(t, bytes, unsharded_grad_tag_, false);
  dp.held_bytes += bytes;
}

void Builder::flush_expert_bucket(DpBuckets& dp, sim::TaskId after) {
  if (dp.expert_bucket_params > 0) dp.tasks.push_back(emit_expert_grad_reduction(dp.expert_bucket_params, after));
  dp.expert_total_params += dp.expert_bucket_params;
  dp.expert_bucket_params = 0;
}

Builder::StepInfo Builder::step_info(const PipeStep& st) const {
  const int vs = st.chunk * p_.pp + stage_;
  return {st, vs, plan_.stages[static_cast<size_t>(vs)]};
}

std::string Builder::step_label(const StepInfo& step) const {
  return p_.virtual_stages > 1 ? fmt::format("mb{}.c{}.", step.st.micro_batch, step.st.chunk)
                               : fmt::format("mb{}.", step.st.micro_batch);
}

void Builder::set_step_instance(const StepInfo& step, int l) {
  // Each (micro-batch, chunk, layer) has its own label: its id is looked up by the numbers,
  // and the label written only the first time (the ids stay set_instance's, in first-use
  // order).
  const int layer = l < 0 ? -1 : step.sp.first_layer + l;
  const bool in_table = step.st.micro_batch >= 0 && step.st.chunk >= 0 && step.st.chunk < p_.virtual_stages &&
                        layer < sc_.model.layers;
  const std::size_t slot = !in_table ? 0
                                     : (static_cast<std::size_t>(step.st.micro_batch) * static_cast<std::size_t>(p_.virtual_stages) +
                                        static_cast<std::size_t>(step.st.chunk)) * (static_cast<std::size_t>(sc_.model.layers) + 1) +
                                           static_cast<std::size_t>(layer + 1);
  if (in_table && slot >= step_instance_ids_.size()) step_instance_ids_.resize(slot + 1 + slot / 2, 0);
  if (in_table && step_instance_ids_[slot] > 0) {
    instance_ = step_instance_ids_[slot] - 1;
    return;
  }
  label_ = step_label(step);
  if (layer >= 0) fmt::format_to(std::back_inserter(label_), "L{}.", layer);
  set_instance(label_);
  if (in_table) step_instance_ids_[slot] = instance_ + 1;
}

void Builder::emit_forward_step(const StepInfo& step, const PipeStep* next, GpuSteps& g) {
  const PipeStep& st = step.st;
  const int vs = step.vs;
  const StagePlan& sp = step.sp;
  const int last_vs = p_.pp * p_.virtual_stages - 1;
  TaskArgs marker;
  marker.kind = sim::TaskKind::kMarker;
  marker.name = intern_once(step_names_.forward, "forward");
  const sim::TaskId recv = add_task(marker, {exchange_done_});  // -1 (none) unless blocking
  if (vs > 0 && !blocking_exchange_) add_pending_dep(recv, transfer_key(vs - 1, st.micro_batch, true));
  sim::TaskId after = vs > 0 ? gather_received(recv) : recv;
  if (vs == 0 || vs == last_vs) after = emit_micro_batch_load(after);
  const bool fsdp = shards_params();
  if (fsdp) fsdp_begin_step(step, false);
  // overlap_param_gather: the first forward of a chunk waits for each bucket's gather.
  ParamGates* gates = nullptr;
  if (auto it = param_gates_.find(vs); it != param_gates_.end() && !it->second.waited && (!part_ || !next || next == &part_->following)) {
    gates = &it->second;
    gates->waited = true;
  }
  sim::TaskId waited = -1;
  if (gates) after = wait_for_params(after, vs == 0 ? gates->embedding : -1, waited);
  if (vs == 0) {
    if (fsdp) after = fsdp_enter_unit(0, after);
    after = emit_forward_ops(embedding_, nullptr, after);
    if (fsdp) fsdp_leave_unit(0, after, false, g);
  }
  // Lynx forward windows: the backward step that follows on this GPU (1F1B steady state)
  // may recompute its layers in this forward's exposed TP collectives.
  const bool next_is_backward = next && next->backward() && next->chunk == st.chunk;
  for (size_t l = 0; l < sp.layers.size(); ++l) {
    WindowHook hook;
    if (next_is_backward && sp.layers[l].overlapped() && sp.layers[l].window == Window::kFwdTpComm) {
      const StepInfo next_step = step_info(*next);
      hook = [this, &sp, vs, l, next_step](sim::TaskId anchor) {
        const std::uint32_t outer = instance_;
        set_layer_instance(next_step, static_cast<int>(l));
        fwd_ready_[{vs, next_step.st.micro_batch, static_cast<int>(l)}] =
            emit_recompute(sp, static_cast<int>(l), kRecomputeStream, anchor);
        instance_ = outer;
      };
    }
    set_layer_instance(step, static_cast<int>(l));
    if (gates) after = wait_for_params(after, gates->layer[l], waited);
    if (fsdp) after = fsdp_enter_unit(fsdp_layer_unit(static_cast<int>(l)), after);
    const sim::TaskId first = static_cast<sim::TaskId>(prog_.tasks.size());
    after = emit_forward_ops(layer_ops(sp, static_cast<int>(l)), &sp.layers[l], after, hook);
    if (fsdp) fsdp_leave_unit(fsdp_layer_unit(static_cast<int>(l)), after, false, g);
    layer_fwd_spans_.push_back({gpu_, vs, st.micro_batch, sp.first_layer + static_cast<int>(l), first,
                                static_cast<sim::TaskId>(prog_.tasks.size()), recv});
  }
  set_step_instance(step);
  if (gates && vs == last_vs) after = wait_for_params(after, gates->head, waited);
  if (vs == last_vs) {
    const int unit = static_cast<int>(fsdp_.params.size()) - 1;
    if (fsdp) after = fsdp_enter_unit(unit, after);
    after = emit_forward_ops(head_, nullptr, after);
    if (fsdp) fsdp_leave_unit(unit, after, false, g);
  }
  g.compute_tail = after;
  if (vs < last_vs) emit_send(vs, vs + 1, st.micro_batch, true, after);
  add_step_span(st, recv, after, vs < last_vs);
}

sim::TaskId Builder::emit_micro_batch_load(sim::TaskId recv) {
  // Megatron's get_batch (pretrain_gpt.py; Megatron-DeepSpeed's get_batch_pipe for DeepSpeed's
  // PipelineEngine, whose LoadMicroBatch runs on the first and the last stage, after the
  // activation's receive) calls tensor_parallel.broadcast_data. Its
  // _build_key_size_numel_dictionaries makes the sizes a CUDA tensor (torch.cuda.LongTensor:
  // a blocking copy, so the host waits for the current stream, the receive included),
  // broadcasts them over the TP group and copies them back with `sizes_cuda.cpu()` (the host
  // waits for the broadcast: a rendezvous of the group's host threads); then the data is
  // broadcast. torch.distributed's NCCL calls are stream-ordered with the current stream
  // (ProcessGroupNCCL waits for it and makes it wait for them): here on the tp stream between
  // the marker and a compute-stream marker the first forward op follows.
  // The broadcasts are emitted always at tp > 1 (Megatron calls broadcast_data whatever the
  // host does); the host's waits for the GPU (host_waits_for) and the TP group's host
  // rendezvous they make are the host model's only, as every host wait is. On some 1F1B
  // pipelines the broadcasts make the state repeat every two periods (the last stage's data
  // broadcast shares its uplink with the gradient send: a 1 ps alternation), which the
  // executor's fast-forward proves as a two-period cycle (sim/executor.cpp).
  host_waits_for(recv);
  if (p_.tp == 1) return recv;  // tp 1: no TP group, no NCCL work
  const MicroBatchLoadBytes bytes = micro_batch_load_bytes(sc_);
  const sim::TaskId sizes =
      emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kBroadcast, tp_ranks(), tp_communicator(),
                      bytes.sizes, intern_name("batch_sizes_broadcast"), {recv});
  host_waits_for(sizes);
  const sim::TaskId data =
      emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kBroadcast, tp_ranks(), tp_communicator(),
                      bytes.data, intern_name("batch_broadcast"), {sizes});
  // On the compute stream, so that the wait for the broadcasts is a gap before this marker,
  // not inside the first layer's forward (whose TP idle the Lynx windows measure).
  TaskArgs loaded;
  loaded.kind = sim::TaskKind::kMarker;
  loaded.name = intern_name("batch_loaded");
  return add_task(loaded, {data});
}

void Builder::emit_backward_step(const StepInfo& step, bool grads_final, GpuSteps& g) {
  const PipeStep& st = step.st;
  const int vs = step.vs;
  const StagePlan& sp = step.sp;
  const int last_vs = p_.pp * p_.virtual_stages - 1;
  const int layers_here = static_cast<int>(sp.layers.size());
  // Overlapped recomputes already issued (recompute-stream task each layer waits for).
  std::vector<sim::TaskId> overlap_ready(sp.layers.size(), -1);
  for (size_t l = 0; l < sp.layers.size(); ++l) {  // issued in the preceding forward
    const auto it = fwd_ready_.find({vs, st.micro_batch, static_cast<int>(l)});
    if (it == fwd_ready_.end()) continue;
    overlap_ready[l] = it->second;
    fwd_ready_.erase(it);
  }
  const bool fsdp = shards_params();
  if (fsdp) fsdp_begin_step(step, true);
  auto issue_overlap = [&](int l, sim::TaskId anchor) {
    if (l < 0 || overlap_ready[static_cast<size_t>(l)] >= 0) return;
    const std::uint32_t outer = instance_;
    set_layer_instance(step, l);
    if (fsdp) {  // the recompute needs the layer's gathered parameters
      TaskArgs join;
      join.stream = kRecomputeStream;
      join.kind = sim::TaskKind::kMarker;
      join.name = intern_name("params_gathered");
      anchor = add_task(join, {anchor, fsdp_gather(fsdp_layer_unit(l))});
    }
    overlap_ready[static_cast<size_t>(l)] =
        emit_recompute(sp, l, kRecomputeStream, anchor);
    instance_ = outer;
  };
  auto window_for = [&](int l) -> WindowHook {
    if (l < 0) return {};
    const LayerDecision& below = sp.layers[static_cast<size_t>(l)];
    if (!below.overlapped() || below.window != Window::kBwdTpComm) return {};
    return [&issue_overlap, l](sim::TaskId anchor) { issue_overlap(l, anchor); };
  };
  // The top layer may hide its recompute in the wait for this micro-batch's gradient.
  const int top = layers_here - 1;
  if (top >= 0 && sp.layers[static_cast<size_t>(top)].overlapped() &&
      sp.layers[static_cast<size_t>(top)].window == Window::kPpRecvWait)
    // Blocking exchanges: the host issues it after the synchronize, when the wait is over.
    issue_overlap(top, blocking_exchange_ ? exchange_done_ : g.compute_tail);
  TaskArgs marker;
  marker.kind = sim::TaskKind::kMarker;
  marker.name = intern_once(step_names_.backward, "backward");
  sim::TaskId after = add_task(marker, {exchange_done_});  // -1 (none) unless blocking
  const sim::TaskId step_marker = after;
  if (vs < last_vs && !blocking_exchange_) add_pending_dep(after, transfer_key(vs + 1, st.micro_batch, false));
  if (vs < last_vs) after = gather_received(after);
  if (vs == last_vs) {
    if (fsdp) after = fsdp_enter_unit(0, after);
    after = emit_backward_ops(head_, after, window_for(top));
    if (fsdp) fsdp_leave_unit(0, after, true, g);
  }
  for (int l = top; l >= 0; --l) {
    const LayerDecision& d = sp.layers[static_cast<size_t>(l)];
    set_layer_instance(step, l);
    if (fsdp) after = fsdp_enter_unit(fsdp_layer_unit(l), after);
    if (d.overlapped()) {
      issue_overlap(l, after);  // no window was found above: start now
      TaskArgs join;
      join.kind = sim::TaskKind::kMarker;
      join.name = intern_once(step_names_.recompute_ready, "recompute_ready");
      after = add_task(join, {after, overlap_ready[static_cast<size_t>(l)]});
    } else if (!d.keeps_everything() && !recomputed_with_layer_above(sp, l)) {
      // A recompute chunk (layers below dropping their input): its whole forward, bottom-up.
      int bottom = l;
      while (bottom > 0 && sp.layers[static_cast<size_t>(bottom)].action(OpGroup::kLayerInput) != Action::kKeep)
        --bottom;
      for (int j = bottom; j <= l; ++j) {
        set_layer_instance(step, j);
        after = emit_recompute(sp, j, kCompute, after);
      }
      set_layer_instance(step, l);
    }
    const sim::TaskId first_backward = static_cast<sim::TaskId>(prog_.tasks.size());
    after = emit_backward_ops(layer_ops(sp, l), after, window_for(l - 1), zero_bubble());
    layer_spans_.push_back({gpu_, vs, st.micro_batch, sp.first_layer + l, first_backward,
                            static_cast<sim::TaskId>(prog_.tasks.size()), step_marker});
    if (fsdp) fsdp_leave_unit(fsdp_layer_unit(l), after, true, g);
    if (grads_final && !fsdp) layer_gradients_final(g, sp.first_layer + l, after);
  }
  set_step_instance(step);
  if (vs == 0) {
    const int unit = static_cast<int>(fsdp_.params.size()) - 1;
    if (fsdp) after = fsdp_enter_unit(unit, after);
    after = emit_backward_ops(embedding_, after);
    if (fsdp) fsdp_leave_unit(unit, after, true, g);
  }
  g.compute_tail = after;
  if (grads_final && !fsdp) chunk_gradients_final(vs, g, after);
  if (vs > 0) emit_send(vs, vs - 1, st.micro_batch, false, after);
  add_step_span(st, step_marker, after, vs > 0);
}

void Builder::layer_gradients_final(GpuSteps& g, int layer, sim::TaskId after) {
  if (p_.dp_overlap != DpOverlap::kBucketed) return;
  const model::LayerParams params = work_.params_of_layers(layer, 1);
  hold_unsharded_grads(g.dp, params.params, after);
  g.dp.bucket_params += params.params;
  g.dp.expert_bucket_params += params.expert_params;
  const std::uint64_t full = std::max<std::uint64_t>(1, p_.dp_bucket_bytes / 2);
  if (g.dp.bucket_params >= full) flush_dp_bucket(g.dp, after);
  if (g.dp.expert_bucket_params >= full) flush_expert_bucket(g.dp, after);
}

void Builder::chunk_gradients_final(int vs, GpuSteps& g, sim::TaskId after) {
  const std::uint64_t layer_grads = chunk_layer_params(vs).params;
  const std::uint64_t chunk_extra = chunk_params(vs) - layer_grads;  // embedding / head
  if (p_.dp_overlap == DpOverlap::kBucketed) {
    hold_unsharded_grads(g.dp, chunk_extra, after);
    g.dp.bucket_params += chunk_extra;
    flush_dp_bucket(g.dp, after);
    flush_expert_bucket(g.dp, after);
  } else {
    g.dp.total_params += chunk_extra + layer_grads;
    g.dp.expert_total_params += chunk_expert_params(vs);
  }
}

void Builder::emit_weight_step(const StepInfo& step, bool grads_final, GpuSteps& g) {
  TaskArgs marker;
  marker.kind = sim::TaskKind::kMarker;
  marker.name = intern_name("weight");
  sim::TaskId after = add_task(marker, {});
  const sim::TaskId step_marker = after;
  for (int l = static_cast<int>(step.sp.layers.size()) - 1; l >= 0; --l) {
    set_layer_instance(step, l);
    after = emit_weight_ops(layer_ops(step.sp, l), after);
    if (grads_final) layer_gradients_final(g, step.sp.first_layer + l, after);
  }
  set_step_instance(step);
  g.compute_tail = after;
  if (grads_final) chunk_gradients_final(step.vs, g, after);
  add_step_span(step.st, step_marker, after, false);
}

void Builder::build_gpu(int stage, int dp_rank, int tp_rank) {
  stage_ = stage;
  dp_rank_ = dp_rank;
  tp_rank_ = tp_rank;
  host_clock_ps_ = part_ && part_->host_start_ps > 0 ? part_->host_start_ps : 0;
  host_wait_until_ = -1;
  rank_ = global_rank(p_, stage, dp_rank, tp_rank);
  tp_ranks_.clear();
  for (int t = 0; t < p_.tp; ++t) tp_ranks_.push_back(global_rank(p_, stage_, dp_rank_, t));
  dp_ranks_.clear();
  for (int d = 0; d < grad_replicas(p_); ++d) dp_ranks_.push_back(global_rank(p_, stage_, d, tp_rank_));
  cp_ranks_.clear();
  for (int c = 0; c < p_.cp; ++c) cp_ranks_.push_back(global_rank(p_, stage_, dp_rank_ / p_.cp * p_.cp + c, tp_rank_));
  set_shard_groups();
  if (blocking_exchange_) stream_tail_.assign(static_cast<std::size_t>(pp_grad_stream_) + 1, -1);  // pp_grad: the last stream
  fsdp_releases_.clear();
  fsdp_issued_ = 0;
  // The expert groups re-divide this stage's GPUs (Megatron-Core's expert rank order
  // etp-ep-edp: model/expert_grid.hpp); with etp = tp, ep consecutive data-parallel ranks.
  expert_ = model::expert_groups(p_, rank_ - stage_ * stage_gpus());
  const auto to_global = [&](const std::vector<int>& stage_ranks, std::vector<hw_models::Rank>& out) {
    out.clear();
    for (int r : stage_ranks) out.push_back(stage_ * stage_gpus() + r);
  };
  to_global(expert_.ep, ep_ranks_);
  to_global(expert_.edp, edp_ranks_);
  to_global(expert_.etp, etp_ranks_);
  // Every stage's order at once; computed for the first GPU only (a part brings its own steps).
  if (!part_ && order_.empty()) order_ = pipeline_order(p_.schedule, p_.pp, micro_batches_, p_.virtual_stages);
  const auto& steps = part_ ? part_->steps : order_[static_cast<size_t>(stage)];

  // Last backward step of each chunk: gradients of that chunk are final after it (ZB-H1: its
  // last weight step, which comes after every input-gradient step).
  std::vector<int> last_bwd_step(static_cast<size_t>(p_.virtual_stages), -1);
  for (size_t i = 0; i < steps.size(); ++i)
    if (!steps[i].forward) last_bwd_step[static_cast<size_t>(steps[i].chunk)] = static_cast<int>(i);
  // Sharded gradients are reduced after every micro-batch's backward (ZB-H1: weight step).
  const bool every_micro_batch = model::reduces_every_micro_batch(p_);

  param_gates_.clear();
  if (overlaps_param_gather() && (!part_ || part_->param_gathers)) {
    // Steady state of one iteration: this iteration's gathers (issued by the previous
    // iteration's optimizer step in Megatron) run from its start, beside the forward passes.
    std::vector<int> chunks;
    for (int c = 0; c < p_.virtual_stages; ++c)
      if (!part_ || c == steps.back().chunk) chunks.push_back(c * p_.pp + stage);
    emit_param_gathers(chunks);
  }
  GpuSteps g;
  exchange_done_ = -1;
  if (blocking_exchange_) emit_exchange(steps, 0, -1);  // the first step's input
  std::vector<sim::TaskId> pair_starts;  // first task of each (forward, backward) pair
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].forward && si + 1 < steps.size() && !steps[si + 1].forward)
      pair_starts.push_back(static_cast<sim::TaskId>(prog_.tasks.size()));
    const StepInfo step = step_info(steps[si]);
    set_step_instance(step);
    step_first_ = static_cast<sim::TaskId>(prog_.tasks.size());
    const PipeStep* next = si + 1 < steps.size()             ? &steps[si + 1]
                           : part_ && part_->has_following ? &part_->following
                                                           : nullptr;
    const bool grads_final =
        part_ ? part_->grads_final[si]
              : static_cast<int>(si) == last_bwd_step[static_cast<size_t>(step.st.chunk)] ||
                    (every_micro_batch && !step.st.forward && (step.st.weight || !zero_bubble()));
    if (step.st.forward) {
      emit_forward_step(step, next, g);
    } else if (step.st.weight) {
      emit_weight_step(step, grads_final, g);
    } else {
      emit_backward_step(step, grads_final, g);
    }
    if (blocking_exchange_ && exchanges_after(steps, si)) emit_exchange(steps, si + 1, g.compute_tail);
  }
  if (!part_) note_period(pair_starts);  // a part (fast mode) is too short to repeat
  if (part_ && part_->has_sharded_following && shards_params()) fsdp_hold_following(g.compute_tail);
  if (part_ && !part_->with_tail) return;
  std::uint64_t stage_params = 0;  // a part's steps may not have seen every chunk's gradients
  for (int c = 0; c < p_.virtual_stages; ++c) stage_params += chunk_params(c * p_.pp + stage);
  if (part_ && p_.dp_overlap == DpOverlap::kEnd) {
    g.dp.total_params = stage_params;
    g.dp.expert_total_params = gpu_expert_params();
  }
  if (p_.dp_overlap == DpOverlap::kEnd) {
    g.dp.tasks.push_back(emit_dp_allreduce(g.dp.total_params, g.compute_tail));
    if (const sim::TaskId experts = emit_expert_grad_reduction(g.dp.expert_total_params, g.compute_tail);
        experts != g.compute_tail)
      g.dp.tasks.push_back(experts);
  }
  if (part_) g.dp.total_params = stage_params;  // the optimizer updates every parameter

  set_instance("");
  g.dp.tasks.push_back(g.compute_tail);
  if (exchange_done_ >= 0) g.dp.tasks.push_back(exchange_done_);  // the last step's send
  TaskArgs join;
  join.kind = sim::TaskKind::kMarker;
  join.name = intern_name("grads_reduced");
  const sim::TaskId reduced = add_task(join, g.dp.tasks.begin(), g.dp.tasks.end());
  // Reduced every micro-batch: the optimizer updates each parameter once.
  emit_optimizer_step(every_micro_batch ? stage_params : g.dp.total_params, stage_params,
                      emit_tied_embedding_allreduce(reduced));
}

}  // namespace lynx::schedule::detail
