// sim::detail::Execution: the steady-state fast-forward's proof (the snapshot at each anchor, its
// encoding, and the comparison that proves the next periods repeat).
#include "sim/execution.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

namespace lynx::sim::detail {

void Execution::arm_fast_forward() {
  ff_ = false;
  const std::size_t num_gpus = machine_.gpus.size();
  if (!options_.fast_forward || options_.record_memory_timeline || options_.record_event_order ||
      !program_.host_waits.empty())
    return;
  if (program_.period_tasks_per_gpu.size() != num_gpus || program_.period_anchors.empty()) return;
  delta_.assign(program_.period_tasks_per_gpu.begin(), program_.period_tasks_per_gpu.end());
  for (const TaskId d : delta_)
    if (d <= 0 || static_cast<std::int64_t>(d) * static_cast<std::int64_t>(kMaxCyclePeriods) > INT32_MAX) return;
  // Each GPU's tasks must be one contiguous id range (phi stays inside it).
  const std::size_t num_tasks = program_.tasks.size();
  if (!gpus_contiguous_) return;
  for (const TaskId a : program_.period_anchors)
    if (a < 0 || static_cast<std::size_t>(a) >= num_tasks) return;
  // The GPUs' id ranges in id order (phi_near's lookup).
  range_gpu_.clear();
  for (std::size_t g = 0; g < num_gpus; ++g)
    if (gpu_first_[g] >= 0) range_gpu_.push_back(g);
  std::sort(range_gpu_.begin(), range_gpu_.end(), [&](std::size_t a, std::size_t b) { return gpu_first_[a] < gpu_first_[b]; });
  range_first_.clear();
  for (const std::size_t g : range_gpu_) range_first_.push_back(gpu_first_[g]);
  lo_ = gpu_first_;
  hi_.assign(num_gpus, -1);
  for (std::size_t g = 0; g < num_gpus; ++g) hi_[g] = gpu_first_[g] - 1;
  // The period log holds at most every built task's start and end and every flow's end
  // (each is logged once, before the skip): capacity only, touched as it fills. On the
  // GPT-1T step it grew by doubling to 8 MB (copies and 4 KiB page faults).
  log_.reserve(2 * num_tasks + program_.flows.size());
  advise_huge_pages(log_);
  ff_ = true;
}

void Execution::collect_frontier(std::vector<TaskId>& out) {
  out.clear();
  for (std::size_t g = 0; g < gpu_first_.size(); ++g) {
    TaskId& lo = lo_[g];
    while (lo < gpu_end_[g] && result_.task_end_ps[static_cast<std::size_t>(lo)] >= 0) ++lo;
    for (TaskId t = lo; t <= hi_[g] && t < gpu_end_[g]; ++t) {
      const std::size_t ti = static_cast<std::size_t>(t);
      if (result_.task_end_ps[ti] < 0 && (result_.task_start_ps[ti] >= 0 || state_[ti].pending < initial_pending(t)))
        out.push_back(t);
    }
  }
}

void Execution::encode(const std::vector<TaskId>& frontier, std::int64_t periods, std::vector<std::int64_t>& out) const {
  const TimePs now = engine_.now();
  out.clear();
  auto id = [&](TaskId t) -> std::int64_t { return periods == 0 ? t : phi(t, periods); };
  auto put128 = [&](Int128 v) {
    out.push_back(static_cast<std::int64_t>(v >> 64));
    out.push_back(static_cast<std::int64_t>(static_cast<std::uint64_t>(v)));
  };
  auto first_flow = [&](std::uint32_t task) { return program_.tasks[task].first_flow; };
  // Pool indices are labels only (free-list order and list positions decide behaviour, not
  // the values): they are written as the order of first appearance in free lists, then in
  // the GPUs' running-kernel lists and the links' flow lists.
  std::vector<std::int64_t> kernel_label(kernels_.size(), -1), flow_label(flows_.size(), -1);
  std::int64_t next_kernel = 0, next_flow = 0;
  for (const std::uint32_t i : kernels_.free_list()) kernel_label[i] = next_kernel++;
  for (const GpuState& gpu : gpus_)
    for (const std::uint32_t i : gpu.running_kernels) kernel_label[i] = next_kernel++;
  for (const std::uint32_t i : flows_.free_list()) flow_label[i] = next_flow++;
  out.push_back(static_cast<std::int64_t>(dirty_gpus_.size() + touched_links_.size()));
  out.push_back(static_cast<std::int64_t>(kernels_.size()));
  out.push_back(static_cast<std::int64_t>(kernels_.free_list().size()));
  out.push_back(static_cast<std::int64_t>(flows_.size()));
  out.push_back(static_cast<std::int64_t>(flows_.free_list().size()));
  for (const GpuState& gpu : gpus_) {
    out.push_back(gpu.running_comm);
    out.push_back(static_cast<std::int64_t>(gpu.running_kernels.size()));
    for (const std::uint32_t index : gpu.running_kernels) {
      const KernelRun& run = kernels_.at(index);
      out.push_back(id(run.task));
      put128(run.remaining);
      out.push_back(static_cast<std::int64_t>(run.divisor));
      out.push_back(run.last_update_ps - now);
      out.push_back(run.position);
    }
  }
  for (std::size_t link = 0; link < network_.num_links(); ++link) {
    const auto on = network_.flows_on(static_cast<LinkId>(link));
    if (on.empty()) continue;
    out.push_back(static_cast<std::int64_t>(link));
    out.push_back(static_cast<std::int64_t>(on.size()));
    for (const std::uint32_t handle : on) {
      if (flow_label[handle] >= 0) {
        out.push_back(flow_label[handle]);
        continue;
      }
      flow_label[handle] = next_flow++;
      out.push_back(flow_label[handle]);
      const FlowRun& run = flows_.at(handle);
      const TaskId owner = flow_task(run.flow, run.unit);
      out.push_back(id(owner));
      out.push_back(run.flow - first_flow(static_cast<std::uint32_t>(owner)));
      put128(run.remaining);
      out.push_back(static_cast<std::int64_t>(run.rate.bytes_per_s_num));
      out.push_back(static_cast<std::int64_t>(run.rate.den));
      out.push_back(run.last_update_ps - now);
      out.push_back(run.latency_ps);
      if (comm_contention_on_) {  // the rate above is this share, slowed by the GPU's kernels
        out.push_back(static_cast<std::int64_t>(run.share.bytes_per_s_num));
        out.push_back(static_cast<std::int64_t>(run.share.den));
        out.push_back(run.gpu);
      }
    }
  }
  // With comm contention: each GPU's slowed flows in list order (the order their rates are
  // set in when its kernels change). Every one has bytes on links, so a label from above.
  if (comm_contention_on_) {
    for (const GpuState& gpu : gpus_) {
      out.push_back(static_cast<std::int64_t>(gpu.slowed_flows.size()));
      for (const std::uint32_t handle : gpu.slowed_flows) out.push_back(flow_label[handle] >= 0 ? flow_label[handle] : -2);
    }
  }
  // Every pool entry has a label (in use entries are on a list), else no two snapshots match.
  out.push_back(next_kernel == static_cast<std::int64_t>(kernels_.size()) && next_flow == static_cast<std::int64_t>(flows_.size()) ? 1 : -1);
  const std::vector<PendingEvent> events = engine_.pending_events();
  out.push_back(static_cast<std::int64_t>(events.size()));
  for (const PendingEvent& e : events) {
    const EventDesc d = descs_[e.id.slot];
    out.push_back(e.time_ps - now);
    out.push_back(static_cast<std::int64_t>(d.kind));
    switch (d.kind) {
      case EventKind::kKernelDone: out.push_back(kernel_label[d.a]); break;
      case EventKind::kFlowBytesDone: out.push_back(flow_label[d.a]); break;
      case EventKind::kFlowDone: {
        const TaskId owner = flow_task(d.a, d.b);
        out.push_back(id(owner));
        out.push_back(d.a - first_flow(static_cast<std::uint32_t>(owner)));
        break;
      }
      // A unit as its first member (a group's image is the group of its members' images).
      case EventKind::kCommWorkDone:
      case EventKind::kIssued: out.push_back(id(members_of(d.a)[0])); break;
    }
  }
  for (const MemoryTracker& memory : memory_) {
    out.push_back(memory.current_bytes());
    for (std::size_t tag = 0; tag < program_.tags.size(); ++tag) out.push_back(memory.tag_bytes(static_cast<TagId>(tag)));
  }
  out.push_back(static_cast<std::int64_t>(frontier.size()));
  for (const TaskId t : frontier) {
    const TaskState& st = state_[static_cast<std::size_t>(t)];
    out.push_back(id(t));
    out.push_back(st.pending);
    // A member of a group: the group's state (written once per member: canonical all the same).
    const bool grouped = st.unit >= first_group_unit_;
    const UnitParts& parts = grouped ? units_[st.unit - first_group_unit_].parts : st.parts;
    out.push_back(parts.open_parts);
    out.push_back(parts.open_flows);
    out.push_back(grouped ? units_[st.unit - first_group_unit_].ready_members : -1);
    out.push_back(start_of(t) >= 0 ? 1 : 0);
  }
}

void Execution::checkpoint() {
  checkpoint_due_ = false;
  collect_frontier(frontier_);
  if (!anchors_.empty()) {
    // The period that ends here: whether a task of it waited for its host issue.
    anchors_.back().waited_in_period = waited_for_issue_;
    encode(frontier_, 0, snapshot_);
    // The shortest cycle first: k periods back, the state phi^k-shifted.
    for (std::size_t k = 1; k <= anchors_.size(); ++k) {
      const Anchor& back = anchors_[anchors_.size() - k];
      if (snapshot_ != back.mapped[k - 1]) continue;
      waited_for_issue_ = false;
      for (std::size_t i = anchors_.size() - k; i < anchors_.size(); ++i)
        waited_for_issue_ = waited_for_issue_ || anchors_[i].waited_in_period;
      // The log from that anchor on: the cycle's k periods.
      log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(back.log_begin));
      try_skip(static_cast<std::int64_t>(k), back);
      waited_for_issue_ = false;
      ff_ = false;  // one attempt: a later one could only skip fewer periods
      log_.clear();
      anchors_.clear();
      return;
    }
  }
  // A compressed program's omitted periods are inserted one period at a time (k = 1 only).
  const std::size_t max_cycle = omitted_ > 0 ? 1 : kMaxCyclePeriods;
  if (anchors_.size() == max_cycle) {
    anchors_.erase(anchors_.begin());
    const std::size_t drop = anchors_.front().log_begin;
    log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(drop));
    for (Anchor& a : anchors_) a.log_begin -= drop;
  }
  Anchor now;
  now.mapped.resize(max_cycle);
  for (std::size_t k = 1; k <= max_cycle; ++k) encode(frontier_, static_cast<std::int64_t>(k), now.mapped[k - 1]);
  now.time_ps = engine_.now();
  now.events = engine_.events_processed();
  now.frontier = frontier_;
  now.log_begin = log_.size();
  anchors_.push_back(std::move(now));
  waited_for_issue_ = false;
}

bool Execution::same_structure(TaskId a, TaskId b) const {
  const Task& x = program_.tasks[static_cast<std::size_t>(a)];
  const Task& y = program_.tasks[static_cast<std::size_t>(b)];
  // Host issue: if a task of the period waited for its issue, the copies are exact only when
  // the host advances by exactly one period per period; otherwise it may advance less (it
  // then runs further ahead each period and never gates a copy).
  if (!program_.issue_ps.empty()) {
    const TimePs host_shift = program_.issue_ps[static_cast<std::size_t>(b)] - program_.issue_ps[static_cast<std::size_t>(a)];
    if (waited_for_issue_ ? host_shift != skip_period_ps_ : host_shift > skip_period_ps_) return false;
    // Omitted periods move the host's later issue times by one fixed step each.
    if (omitted_ > 0 && host_shift != issue_step_ps_[static_cast<std::size_t>(x.gpu)]) return false;
  }
  if (x.work_ps != y.work_ps || x.gpu != y.gpu || x.stream != y.stream || (x.group < 0) != (y.group < 0) || x.kind != y.kind ||
      x.category != y.category || x.num_deps != y.num_deps || x.num_flows != y.num_flows || x.num_mem != y.num_mem)
    return false;
  if (has_stream_pred_[static_cast<std::size_t>(a)] != has_stream_pred_[static_cast<std::size_t>(b)]) return false;
  // Omitted periods: their flows are numbered one period's flows apart, as the built ones.
  if (omitted_ > 0 && y.first_flow - x.first_flow != program_.period_flows_per_gpu[static_cast<std::size_t>(x.gpu)]) return false;
  const std::size_t g = static_cast<std::size_t>(x.gpu);
  // A collective group's image: the group of exactly its members' images, in the same order.
  if (x.group >= 0) {
    const UnitMembers mx = members_of(state_[static_cast<std::size_t>(a)].unit);
    const UnitMembers my = members_of(state_[static_cast<std::size_t>(b)].unit);
    if (mx.count != my.count) return false;
    for (std::uint32_t m = 0; m < mx.count; ++m)
      if (my[m] != phi_near(mx[m], g)) return false;
  }
  for (std::uint32_t k = 0; k < x.num_deps; ++k)
    if (program_.deps[y.first_dep + k] != phi_near(program_.deps[x.first_dep + k], g)) return false;
  for (std::uint32_t k = 0; k < x.num_mem; ++k) {
    const MemEffect& p = program_.mem[x.first_mem + k];
    const MemEffect& q = program_.mem[y.first_mem + k];
    if (p.bytes != q.bytes || p.tag != q.tag || p.at_end != q.at_end) return false;
  }
  for (std::uint32_t k = 0; k < x.num_flows; ++k) {
    const Flow& p = program_.flows[x.first_flow + k];
    const Flow& q = program_.flows[y.first_flow + k];
    if (p.bytes != q.bytes || p.num_links != q.num_links ||
        flow_latency_ps_[x.first_flow + k] != flow_latency_ps_[y.first_flow + k])
      return false;
    for (std::uint32_t l = 0; l < p.num_links; ++l)
      if (program_.path_links[p.first_link + l] != program_.path_links[q.first_link + l]) return false;
  }
  const TaskState& sa = state_[static_cast<std::size_t>(a)];
  const TaskState& sb = state_[static_cast<std::size_t>(b)];
  if ((sa.stream_next < 0) != (sb.stream_next < 0)) return false;
  if (sa.stream_next >= 0 && sb.stream_next != phi_near(sa.stream_next, g)) return false;
  const std::uint32_t na = state_[static_cast<std::size_t>(a) + 1].first_successor - sa.first_successor;
  const std::uint32_t nb = state_[static_cast<std::size_t>(b) + 1].first_successor - sb.first_successor;
  if (na != nb) return false;
  for (std::uint32_t k = 0; k < na; ++k)
    if (successors_[sb.first_successor + k] != phi_near(successors_[sa.first_successor + k], g)) return false;
  return true;
}

void Execution::try_skip(std::int64_t cycle, const Anchor& back) {
  const TimePs now = engine_.now();
  const TimePs period_ps = now - back.time_ps;
  if (period_ps <= 0) return;
  const std::vector<TaskId> one_period = delta_;
  for (TaskId& d : delta_) d = static_cast<TaskId>(cycle * d);  // checked in arm_fast_forward
  cycle_periods_ = cycle;
  previous_events_ = back.events;
  prove_and_skip(period_ps, back.frontier);
  delta_ = one_period;
}

void Execution::prove_and_skip(TimePs period_ps, const std::vector<TaskId>& previous_frontier) {
  skip_period_ps_ = period_ps;
  const std::size_t num_gpus = gpu_first_.size();
  // New: touched for the first time during the period. I: everything the period touched.
  std::vector<TaskId> fresh;
  fresh.reserve(log_.size() + frontier_.size());
  for (const PeriodLogEntry& e : log_) fresh.push_back(e.task);
  fresh.insert(fresh.end(), frontier_.begin(), frontier_.end());
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
  std::vector<TaskId> lo(num_gpus, INT32_MAX), hi(num_gpus, -1);
  auto span = [&](TaskId t) {
    const std::size_t g = static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(t)].gpu);
    lo[g] = std::min(lo[g], t);
    hi[g] = std::max(hi[g], t);
  };
  for (const TaskId t : fresh) span(t);
  for (const TaskId t : previous_frontier) span(t);
  std::vector<TaskId> previous = previous_frontier;
  std::sort(previous.begin(), previous.end());
  std::vector<TaskId> new_tasks;
  std::set_difference(fresh.begin(), fresh.end(), previous.begin(), previous.end(), std::back_inserter(new_tasks));

  // A compressed program: the host time one period adds on each GPU (the same for every
  // period, checked by same_structure over the built ones).
  if (omitted_ > 0 && !program_.issue_ps.empty()) {
    for (std::size_t g = 0; g < num_gpus; ++g) {
      const TaskId d = delta_[g];
      if (hi[g] >= 0 && lo[g] + d < gpu_end_[g])
        issue_step_ps_[g] = program_.issue_ps[static_cast<std::size_t>(lo[g] + d)] - program_.issue_ps[static_cast<std::size_t>(lo[g])];
    }
  }
  std::int64_t periods = INT32_MAX;
  // The program is phi-invariant over every orbit x, phi(x), ..., phi^N(x) of x in I.
  for (std::size_t g = 0; g < num_gpus && periods > 0; ++g) {
    if (hi[g] < 0) continue;
    const TaskId d = delta_[g];
    const std::int64_t scan_end = std::min<std::int64_t>(gpu_end_[g] - d, hi[g] + (periods - 1) * static_cast<std::int64_t>(d) + 1);
    TaskId x = lo[g];
    while (x < scan_end && same_structure(x, x + d)) ++x;
    // x + (N - 1)·d < x_first_mismatch for the largest member of I on this GPU.
    periods = std::min<std::int64_t>(periods, x > hi[g] ? (x - 1 - hi[g]) / d + 1 : 0);
  }
  // A compressed program: the built periods proved the period (the touched tasks and at
  // least one period beyond are phi-invariant); the omitted ones are further copies of it
  // (the builder's), inserted here with their ids, the built tasks keeping theirs.
  const bool insert = omitted_ > 0;
  if (insert) {
    if (periods < 1) return;
    periods = omitted_;
  }
  // Images of newly touched tasks are untouched now, and never newly touched themselves.
  for (const TaskId u : new_tasks) {
    const std::size_t g = static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(u)].gpu);
    for (std::int64_t j = 1; j <= periods; ++j) {
      const std::int64_t image = u + j * delta_[g];
      if (image > hi_[g] && image > hi[g]) break;
      if (image >= gpu_end_[g] || !untouched(static_cast<TaskId>(image)) ||
          std::binary_search(new_tasks.begin(), new_tasks.end(), static_cast<TaskId>(image))) {
        periods = std::min<std::int64_t>(periods, j - 1);
        break;
      }
    }
  }
  if (periods < 1 || (insert && periods < omitted_)) return;
  apply_skip(periods, period_ps, insert);
}

}  // namespace lynx::sim::detail
