// schedule::detail::Builder: the program's building blocks: per-op tables, tasks with their
// host issue cost, flows, collectives (and their one-GPU stand-in) and the fast-forward hint.
#include "schedule/builder.hpp"

namespace lynx::schedule::detail {

std::vector<OpWithTimes> Builder::with_times(const std::vector<Op>& ops, NamedOp::List list) {
  std::vector<OpWithTimes> out;
  for (const Op& op : ops) {
    const OpNames names{intern_name(op.name),          intern_name(op.name + "_dgrad"),
                        intern_name(op.name + "_wgrad"), intern_name("re." + op.name),
                        intern_name(op.name + "_bwd"),   intern_name(op.name + "_input_ag")};
    using P = NamedOp::Pass;
    const int index = static_cast<int>(out.size());
    for (auto [name, pass] : {std::pair{names.fwd, P::kForward}, {names.dgrad, P::kDgrad},
                              {names.wgrad, P::kWgrad}, {names.re, P::kRecompute},
                              {names.bwd, P::kBackwardCollective}, {names.input_ag, P::kInputAllGather}}) {
      if (name_ops_.size() <= name) name_ops_.resize(name + 1);
      name_ops_[name] = {list, index, pass};
    }
    out.push_back({op, op_times(sc_.hardware, op), names,
                   op.cp_steps > 1 ? op_times(sc_.hardware, model::ring_attention_block(op)) : OpTimes{}});
  }
  return out;
}

void Builder::reserve_like_first_gpu(std::size_t num_gpus) {
  auto grow = [num_gpus](auto& v) { v.reserve(v.size() * num_gpus + v.size() * num_gpus / 20); };
  grow(prog_.tasks);
  grow(prog_.deps);
  grow(prog_.flows);
  grow(prog_.path_links);
  grow(prog_.mem);
  grow(flops_);
  grow(prog_.issue_ps);
  sim::advise_huge_pages(prog_.tasks);
  sim::advise_huge_pages(prog_.deps);
  sim::advise_huge_pages(prog_.mem);
  sim::advise_huge_pages(prog_.flows);
  sim::advise_huge_pages(prog_.path_links);
  sim::advise_huge_pages(flops_);
}

TimePs Builder::host_cost_ps(const TaskArgs& a) const {
  const int kernels = a.kind == sim::TaskKind::kKernel && a.work_ps == 0 ? 0
                      : a.kernels >= 0                                   ? a.kernels
                      : a.kind == sim::TaskKind::kKernel                 ? 1
                                                                         : 0;
  TimePs kernels_ps = 0;
  if (__builtin_mul_overflow(static_cast<TimePs>(kernels), sc_.hardware.host_kernel_ps, &kernels_ps))
    fail(ErrorCode::kTimeOverflow, "simulated time overflow (2^63 ps) in a task's host time: {} kernels × hardware.gpu.host_kernel {} ps",
         kernels, sc_.hardware.host_kernel_ps);
  const char* what = "a task's host time (hardware.gpu.host_kernel, gpu.host_collective, gpu.host_gemm)";
  const TimePs calls_ps = checked_add(a.host_call ? sc_.hardware.host_collective_ps : 0,
                                      a.gemm_call && kernels > 0 ? sc_.hardware.host_gemm_ps : 0, what);
  return checked_add(kernels_ps, calls_ps, what);
}

void Builder::add_flow(sim::TaskId task, hw_models::Rank src, hw_models::Rank dst, std::uint64_t bytes,
              std::uint64_t payload_bytes, double efficiency) {
  LYNX_CHECK(task == static_cast<sim::TaskId>(prog_.tasks.size() - 1), "flow order");
  sim::Flow f;
  f.bytes = bytes;
  f.payload_bytes = payload_bytes;
  f.efficiency = efficiency;
  f.first_link = static_cast<std::uint32_t>(prog_.path_links.size());
  for (sim::LinkId l : topo_.path(src, dst)) prog_.path_links.push_back(map_link(l));
  f.num_links = static_cast<std::uint32_t>(prog_.path_links.size()) - f.first_link;
  prog_.flows.push_back(f);
  prog_.tasks.back().num_flows++;
}

sim::TaskId Builder::emit_collective(sim::StreamId stream, sim::Category cat, hw_models::Collective kind,
                            const std::vector<hw_models::Rank>& ranks, int communicator,
                            std::uint64_t bytes, std::uint32_t name,
                            std::initializer_list<sim::TaskId> deps) {
  // By reference: a copy would allocate every phase's flow list again per collective.
  const std::vector<hw_models::Phase>& phases = phase_cache(kind, ranks, bytes);
  if (standin_link_ >= 0) return emit_standin(stream, cat, phases, name, deps);
  sim::TaskId last = -1;
  bool first = true;
  for (const hw_models::Phase& ph : phases) {
    TaskArgs a;
    a.stream = stream;
    a.kind = sim::TaskKind::kComm;
    a.category = cat;
    a.work_ps = ph.latency_ps;
    a.name = name;
    a.group = group_id(communicator);
    // One call (one NCCL kernel) issues every phase.
    a.kernels = first ? 1 : 0;
    a.host_call = first;
    last = first ? add_task(a, deps) : add_task(a, {});
    first = false;
    for (const hw_models::FlowSpec& f : ph.flows)
      if (f.src == rank_)
        add_flow(last, f.src, f.dst, f.bytes, f.payload_bytes, sc_.hardware.collective_efficiency);
  }
  return last;
}

sim::TaskId Builder::emit_standin(sim::StreamId stream, sim::Category cat, const std::vector<hw_models::Phase>& phases,
                         std::uint32_t name, std::initializer_list<sim::TaskId> deps) {
  std::uint64_t bytes = 0;
  for (const hw_models::Phase& ph : phases)
    for (const hw_models::FlowSpec& f : ph.flows)
      if (f.src == rank_) bytes += f.payload_bytes > 0 ? f.payload_bytes : f.bytes;
  sim::TaskId last = -1;
  for (int leg = 0; leg < 2; ++leg) {
    TaskArgs a;
    a.stream = stream;
    a.kind = sim::TaskKind::kComm;
    a.category = cat;
    a.name = name;
    last = leg == 0 ? add_task(a, deps) : add_task(a, {});
    sim::Flow f;
    f.bytes = bytes;
    f.first_link = static_cast<std::uint32_t>(prog_.path_links.size());
    f.num_links = 1;
    prog_.path_links.push_back(standin_link_ + leg);
    prog_.flows.push_back(f);
    prog_.tasks.back().num_flows++;
  }
  return last;
}

const std::vector<hw_models::Phase>& Builder::phase_cache(hw_models::Collective kind, const std::vector<hw_models::Rank>& ranks,
                                          std::uint64_t bytes) {
  // Looked up by reference (std::less<>): a hit copies no rank list.
  auto it = phases_.find(std::forward_as_tuple(static_cast<int>(kind), ranks, bytes));
  if (it == phases_.end())
    it = phases_
             .emplace(std::make_tuple(static_cast<int>(kind), ranks, bytes),
                      hw_models::plan_collective(topo_, sc_.hardware, kind, hw_models::Algorithm::kRing, ranks,
                                                 bytes))
             .first;
  return it->second;
}

void Builder::note_period(const std::vector<sim::TaskId>& pair_starts) {
  sim::TaskId period = 0;
  const size_t middle = pair_starts.size() / 2;
  if (p_.schedule == ScheduleKind::kOneFOneB && p_.virtual_stages == 1 && pair_starts.size() >= 3)
    period = pair_starts[middle] - pair_starts[middle - 1];
  prog_.period_tasks_per_gpu.push_back(period);
  if (gpu_ == 0 && period > 0) prog_.period_anchors = pair_starts;
  if (prog_.omitted_periods == 0) return;
  // Compressed: where the omitted periods go, and their flows.
  const auto at = [&](int pair) { return pair_starts[static_cast<size_t>(pair)]; };
  if (pair_starts.size() <= static_cast<size_t>(kCutPair)) {
    compressible_ = false;
    return;
  }
  for (int i = kPeriodicFromPair; i < kCutPair; ++i)
    compressible_ = compressible_ && at(i + 1) - at(i) == period;
  const auto flow_of = [&](sim::TaskId t) { return prog_.tasks[static_cast<size_t>(t)].first_flow; };
  prog_.period_flows_per_gpu.push_back(flow_of(at(kCutPair)) - flow_of(at(kCutPair - 1)));
  prog_.period_cut_per_gpu.push_back(at(kCutPair));
  prog_.periodic_from_per_gpu.push_back(at(kPeriodicFromPair));
}

}  // namespace lynx::schedule::detail
