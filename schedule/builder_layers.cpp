// schedule::detail::Builder: one layer's ops in each pass: forward chains, recompute,
// backward (dgrad, wgrad) and ZB-H1's deferred weight pass.
#include "schedule/builder.hpp"

namespace lynx::schedule::detail {

/// A chain of forward ops: kernels on `stream` in order, collectives on the tp stream with the
/// next kernel waiting for them. `wait`: a task the first op must wait for (cross-stream).
/// Returns the chain's last task (a trailing collective, if any, so the caller waits on it).
sim::TaskId Builder::emit_forward_chain(const ForwardChain& chain, sim::TaskId wait) {
  sim::TaskId last = wait;
  sim::TaskId last_kernel = -1;
  bool window_opened = false;
  auto open_window = [&](sim::TaskId waited) {
    if (!window_opened && chain.on_window && *chain.on_window && waited >= 0 && last_kernel >= 0 &&
        prog_.tasks[static_cast<size_t>(waited)].kind == sim::TaskKind::kComm) {
      window_opened = true;  // the compute stream idles from here until the collective ends
      (*chain.on_window)(last_kernel);
    }
  };
  // TP-comm overlap: the layer's GEMMs run in row chunks beside chunked collectives (its
  // forward on the compute stream, first pass or on-demand recompute alike).
  const bool chunked = tp_chunks_ > 1 && chain.ops == &layer_ && chain.stream == kCompute;
  auto op_at = [&](size_t j) -> const OpWithTimes* {
    return j < chain.indices.size() ? &(*chain.ops)[static_cast<size_t>(chain.indices[j])] : nullptr;
  };
  auto is_gemm = [](const OpWithTimes* o) { return o && o->op.kind == OpKind::kGemm; };
  const sim::Category comm_category = chain.recompute ? sim::Category::kRecompute : sim::Category::kTpComm;
  std::vector<sim::TaskId> gathered;  // all-gather chunks the next GEMM's chunks wait for
  for (size_t j = 0; j < chain.indices.size(); ++j) {
    const int index = chain.indices[j];
    const OpWithTimes& o = (*chain.ops)[static_cast<size_t>(index)];
    const std::uint32_t name = chain.recompute ? o.names.re : o.names.fwd;
    if (o.op.kind == OpKind::kCollective) {
      if (!model::communicates(o.op, p_)) continue;
      LYNX_CHECK(chain.stream == kCompute, "overlapped recompute of '{}' needs communication", o.op.name);
      if (chunked && o.op.collective == model::CollectiveKind::kAllGather && is_gemm(op_at(j + 1))) {
        // Chunk k of the gathered rows arrives while the GEMM works on chunk k - 1.
        gathered.clear();
        for (int k = 0; k < tp_chunks_; ++k)
          gathered.push_back(emit_collective(kTp, comm_category, hw_models::Collective::kAllGather, tp_ranks(),
                                             tp_communicator(), o.op.collective_bytes / tp_chunks_, name,
                                             {k == 0 ? last : -1}));
        last = gathered.back();
        wait = last;
        continue;
      }
      last = emit_collective(kTp, comm_category, hw_models::to_collective(o.op.collective), group_ranks(o.op),
                             group_communicator(o.op), o.op.collective_bytes, name, {last});
      wait = last;
      continue;
    }
    TaskArgs a;
    a.stream = chain.stream;
    a.category = !chain.recompute             ? sim::Category::kCompute
                 : chain.stream == kCompute ? sim::Category::kRecompute
                                              : sim::Category::kRecomputeOverlapped;
    a.name = name;
    a.gemm_call = is_gemm_call(o.op);
    // First forward: saved activations are allocated while the op writes them, unless the plan
    // drops them (the recompute pass allocates those when it starts).
    const bool kept = !chain.decision || chain.decision->action(o.op.group) == Action::kKeep;
    const auto saved = !chain.recompute && kept ? static_cast<std::int64_t>(o.op.saved_bytes) : 0;
    const OpWithTimes* after_op = op_at(j + 1);
    const bool scatter_after = chunked && o.op.kind == OpKind::kGemm && after_op &&
                               after_op->op.kind == OpKind::kCollective &&
                               after_op->op.collective == model::CollectiveKind::kReduceScatter;
    if (chunked && o.op.kind == OpKind::kGemm && (!gathered.empty() || scatter_after)) {
      // Row chunks of the GEMM: each after its all-gather chunk, or followed by the
      // reduce-scatter of its output rows.
      const OpWithTimes& chunk = layer_chunk_[static_cast<size_t>(index)];
      a.work_ps = chunk.t.fwd_ps;
      a.flops = chunk.op.fwd_flops;
      a.kernels = chunk.op.fwd_kernels;
      open_window(gathered.empty() ? wait : gathered.front());
      sim::TaskId scattered = -1;
      for (int k = 0; k < tp_chunks_; ++k) {
        last = add_task(a, {gathered.empty() ? (k == 0 ? wait : -1) : gathered[static_cast<size_t>(k)]});
        if (k == 0) add_mem(last, saved, tag_of(o.op.group), false);
        last_kernel = last;
        if (scatter_after) {
          const std::uint32_t scatter_name = chain.recompute ? after_op->names.re : after_op->names.fwd;
          scattered = emit_collective(kTp, comm_category, hw_models::Collective::kReduceScatter, tp_ranks(),
                                      tp_communicator(), after_op->op.collective_bytes / tp_chunks_,
                                      scatter_name, {last});
        }
      }
      gathered.clear();
      wait = -1;
      if (scatter_after) {
        ++j;  // the reduce-scatter is emitted
        last = scattered;
        wait = scattered;
      }
      continue;
    }
    if (o.op.cp_steps > 1) {  // ring attention: blocks waiting on the cp stream's transfers
      open_window(wait);
      last = emit_ring_forward(o, a, wait >= 0 ? wait : last, saved, [&](sim::TaskId waited, sim::TaskId kernel) {
        last_kernel = kernel;
        open_window(waited);
      });
      last_kernel = last;
      wait = -1;
      continue;
    }
    open_window(wait);
    a.work_ps = o.t.fwd_ps;
    a.flops = o.op.fwd_flops;
    a.kernels = o.op.fwd_kernels;
    last = add_task(a, {wait});
    last_kernel = last;
    wait = -1;
    add_mem(last, saved, tag_of(o.op.group), false);
  }
  return wait >= 0 ? wait : last;
}

sim::TaskId Builder::emit_forward_ops(const std::vector<OpWithTimes>& ops,
                                      const LayerDecision* decision, sim::TaskId after,
                                      const WindowHook& on_window) {
  // Every op, in order: a prefix of 0, 1, 2, ...
  while (iota_.size() < ops.size()) iota_.push_back(static_cast<int>(iota_.size()));
  return emit_forward_chain({&ops, std::span<const int>(iota_).first(ops.size()), decision, kCompute,
                             false, &on_window},
                            after);
}

sim::TaskId Builder::emit_recompute(const StagePlan& sp, int l, sim::StreamId stream,
                                    sim::TaskId after) {
  const LayerDecision& d = sp.layers[static_cast<size_t>(l)];
  const bool dense = work_.is_dense_layer(sp.first_layer + l);
  const std::vector<OpWithTimes>& ops = layer_ops(sp, l);
  // The dropped tensors come back during this pass: allocate them when it starts (they are
  // freed one by one by the backward ops that consume them).
  TaskArgs start;
  start.stream = stream;
  start.kind = sim::TaskKind::kMarker;
  start.name = name_recompute_;
  const sim::TaskId marker = add_task(start, {after});
  for (const OpWithTimes& o : ops)
    if (d.action(o.op.group) != Action::kKeep)
      add_mem(marker, static_cast<std::int64_t>(o.op.saved_bytes), tag_of(o.op.group), false);
  // The plan's decisions outlive the builder: their op lists are computed once each.
  auto [it, inserted] = recompute_indices_[dense ? 1 : 0].try_emplace(&d);
  if (inserted) it->second = recompute_ops(dense ? work_.dense_layer : work_.layer, d);
  return emit_forward_chain({&ops, it->second, &d, stream, true}, marker);
}

sim::TaskId Builder::emit_backward_ops(const std::vector<OpWithTimes>& ops, sim::TaskId after,
                                       const WindowHook& on_window, bool defer_wgrad) {
  sim::TaskId wait = after;
  sim::TaskId last = after;
  sim::TaskId last_kernel = -1;
  bool window_opened = false;
  // The compute stream is about to wait on a collective: an overlap window opens when the
  // last kernel before the wait ends.
  auto waiting_on_comm = [&](sim::TaskId w) {
    if (window_opened || w < 0 || last_kernel < 0 || !on_window) return;
    if (prog_.tasks[static_cast<size_t>(w)].kind != sim::TaskKind::kComm) return;
    window_opened = true;
    on_window(last_kernel);
  };
  // TP-comm overlap: the all-gather of the output gradient before a layer GEMM's dgrad runs in
  // chunks, the dgrad's row chunks each after its own (the mirror of the forward's
  // reduce-scatter pipeline).
  const bool chunked = tp_chunks_ > 1 && &ops == &layer_;
  std::vector<sim::TaskId> gathered;
  // Whether op c's backward all-gather feeds the dgrad of the GEMM below it: it is chunked.
  auto chunks_gather = [&](size_t c) {
    return chunked && ops[c].op.bwd_collective == model::CollectiveKind::kAllGather && c > 0 &&
           ops[c - 1].op.kind == OpKind::kGemm;
  };
  auto gather_chunks = [&](size_t c, sim::TaskId first_after) {
    gathered.clear();
    for (int k = 0; k < tp_chunks_; ++k)
      gathered.push_back(emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllGather, tp_ranks(),
                                         tp_communicator(), ops[c].op.collective_bytes / tp_chunks_,
                                         ops[c].names.bwd, {k == 0 ? first_after : -1}));
  };
  for (size_t i = ops.size(); i-- > 0;) {
    const Op& op = ops[i].op;
    if (op.kind == OpKind::kCollective) {
      // Collectives whose backward is issued after the dgrad of the op they feed are emitted
      // there (overlapping its wgrad, as Megatron does); the rest run here, compute waiting.
      if (!model::communicates(op, p_, true)) continue;
      if (i + 1 < ops.size() && ops[i + 1].op.kind != OpKind::kCollective) continue;
      if (chunks_gather(i)) {
        gather_chunks(i, last);
        last = gathered.back();
        wait = gathered.front();  // what the first dgrad chunk waits for
        continue;
      }
      last = emit_collective(kTp, sim::Category::kTpComm, hw_models::to_collective(op.bwd_collective), group_ranks(op),
                             group_communicator(op), op.collective_bytes, ops[i].names.bwd, {last});
      wait = last;
      continue;
    }
    // Sequence parallelism: the GEMM's input was saved sharded; its all-gather is issued
    // before the dgrad (overlapping it) and the wgrad waits for it (Megatron's SP backward).
    const bool has_wgrad = ops[i].t.wgrad_ps > 0;
    const bool wgrad_here = has_wgrad && !defer_wgrad;
    sim::TaskId input_gather = -1;
    if (op.bwd_input_allgather_bytes > 0 && p_.tp > 1 && wgrad_here)
      input_gather = emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllGather,
                                     tp_ranks(), tp_communicator(), op.bwd_input_allgather_bytes,
                                     ops[i].names.input_ag, {last});
    waiting_on_comm(wait);
    TaskArgs a;
    a.name = ops[i].names.dgrad;
    a.work_ps = ops[i].t.dgrad_ps;
    a.flops = op.bwd_dgrad_flops;
    a.kernels = op.bwd_dgrad_kernels;
    a.gemm_call = is_gemm_call(op);
    sim::TaskId dgrad = -1;
    if (!gathered.empty() && op.kind == OpKind::kGemm) {
      const OpWithTimes& chunk = layer_chunk_[i];
      a.work_ps = chunk.t.dgrad_ps;
      a.flops = chunk.op.bwd_dgrad_flops;
      a.kernels = chunk.op.bwd_dgrad_kernels;
      for (sim::TaskId g : gathered) dgrad = add_task(a, {g});
      gathered.clear();
    } else if (op.cp_steps > 1) {  // ring attention: blocks waiting on the cp stream's transfers
      dgrad = emit_ring_backward(ops[i], a, wait >= 0 ? wait : last, [&](sim::TaskId waited, sim::TaskId kernel) {
        last_kernel = kernel;
        waiting_on_comm(waited);
      });
    } else {
      dgrad = add_task(a, {wait});
    }
    wait = -1;
    last = dgrad;
    last_kernel = dgrad;
    // The op's saved activations are consumed by its dgrad and wgrad (freed after the last);
    // a deferred wgrad keeps its input and the output gradient until the weight pass.
    const auto saved = static_cast<std::int64_t>(op.saved_bytes);
    if (!has_wgrad) add_mem(dgrad, -saved, tag_of(op.group), true);
    if (has_wgrad && defer_wgrad) {
      const WeightPassBytes held = weight_pass_bytes(op);
      add_mem(dgrad, held.output_grad, kOutputGradTag, false);
      add_mem(dgrad, held.input - saved, tag_of(op.group), true);
    }
    // The collective feeding this op in forward (Megatron's `f`: identity forward, all-reduce
    // backward; with SP the all-gather whose backward is a reduce-scatter) starts right after
    // the dgrad and overlaps the wgrad.
    sim::TaskId input_grad_comm = -1;
    if (i > 0 && model::communicates(ops[i - 1].op, p_, true)) {
      const Op& c = ops[i - 1].op;
      if (chunks_gather(i - 1)) {
        gather_chunks(i - 1, dgrad);
        input_grad_comm = gathered.front();  // what the first dgrad chunk waits for
      } else {
        input_grad_comm =
            emit_collective(kTp, sim::Category::kTpComm, hw_models::to_collective(c.bwd_collective), group_ranks(c),
                            group_communicator(c), c.collective_bytes, ops[i - 1].names.bwd, {dgrad});
      }
    }
    if (wgrad_here) {
      TaskArgs w;
      w.name = ops[i].names.wgrad;
      w.work_ps = ops[i].t.wgrad_ps;
      w.flops = op.bwd_wgrad_flops;
      w.kernels = op.bwd_wgrad_kernels;
      w.gemm_call = is_gemm_call(op);
      last = add_task(w, {input_gather});
      last_kernel = last;
      add_mem(last, -saved, tag_of(op.group), true);
    }
    if (input_grad_comm >= 0) wait = input_grad_comm;
  }
  return wait >= 0 ? wait : last;
}

sim::TaskId Builder::emit_weight_ops(const std::vector<OpWithTimes>& ops, sim::TaskId after) {
  sim::TaskId last = after;
  for (size_t i = ops.size(); i-- > 0;) {
    const Op& op = ops[i].op;
    if (op.kind == OpKind::kCollective || ops[i].t.wgrad_ps <= 0) continue;
    // SP: the input was kept sharded; gather it again for the wgrad (the tp stream runs the
    // gathers of a weight step back to back, ahead of the GEMMs that wait for them).
    sim::TaskId input_gather = -1;
    if (op.bwd_input_allgather_bytes > 0 && p_.tp > 1)
      input_gather = emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllGather,
                                     tp_ranks(), tp_communicator(), op.bwd_input_allgather_bytes,
                                     ops[i].names.input_ag, {after});
    TaskArgs w;
    w.name = ops[i].names.wgrad;
    w.work_ps = ops[i].t.wgrad_ps;
    w.flops = op.bwd_wgrad_flops;
    w.kernels = op.bwd_wgrad_kernels;
    w.gemm_call = is_gemm_call(op);
    last = add_task(w, {last, input_gather});
    const WeightPassBytes held = weight_pass_bytes(op);
    add_mem(last, -held.input, tag_of(op.group), true);
    add_mem(last, -held.output_grad, kOutputGradTag, true);
  }
  return last;
}

}  // namespace lynx::schedule::detail
