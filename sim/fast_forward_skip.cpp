// sim::detail::Execution: the steady-state fast-forward's skip (periods proven to repeat, moved
// on by whole periods, or a compressed program's omitted periods inserted).
#include "sim/execution.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

namespace lynx::sim::detail {

void Execution::apply_skip(std::int64_t periods, TimePs period_ps, bool insert) {
  const std::int64_t id_periods = insert ? 0 : periods;  // how far built task ids move
  const TimePs now = engine_.now();
  const TimePs shift_ps = checked_product(kSimulatedClock, {periods, period_ps});
  checked_add(checked_add(now, shift_ps, kSimulatedClock), period_ps, kSimulatedClock);  // overflow check of every time written
  // The skipped periods' task and flow times: the logged period's, shifted.
  std::size_t ends_per_period = 0;
  for (const PeriodLogEntry& e : log_) ends_per_period += e.what == 1 ? 1 : 0;
  // GPU by GPU (each GPU's entries in log order, so writes to one place keep their order):
  // the images of one GPU's entries then advance through its id range period by period, which
  // the caches follow, instead of jumping between all GPUs' ranges at every entry.
  // Inserted periods write only flow times (their task times are ExecResult::inserted).
  const std::size_t num_gpus = gpu_first_.size();
  auto written = [&](const PeriodLogEntry& e) { return !insert || e.what > 1; };
  std::vector<std::size_t> gpu_begin(num_gpus + 1, 0);
  for (const PeriodLogEntry& e : log_)
    if (written(e)) ++gpu_begin[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(e.task)].gpu) + 1];
  for (std::size_t g = 0; g < num_gpus; ++g) gpu_begin[g + 1] += gpu_begin[g];
  std::vector<std::uint32_t> by_gpu(gpu_begin[num_gpus]);
  {
    std::vector<std::size_t> cursor(gpu_begin.begin(), gpu_begin.end() - 1);
    for (std::size_t i = 0; i < log_.size(); ++i)
      if (written(log_[i]))
        by_gpu[cursor[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(log_[i].task)].gpu)]++] = static_cast<std::uint32_t>(i);
  }
  for (std::size_t g = 0; g < num_gpus; ++g) {
    const TaskId d = delta_[g];
    const std::int64_t out_shift = out_task_shift_[g];
    for (std::int64_t j = 1; j <= periods; ++j) {
      const TimePs offset = static_cast<TimePs>(j) * period_ps;
      const std::int64_t shift = j * d;
      for (std::size_t i = gpu_begin[g]; i < gpu_begin[g + 1]; ++i) {
        const PeriodLogEntry& e = log_[by_gpu[i]];
        const std::size_t t = static_cast<std::size_t>(e.task + out_shift + shift);
        if (e.what == 0) result_.task_start_ps[t] = e.time_ps + offset;
        else if (e.what == 1) result_.task_end_ps[t] = e.time_ps + offset;
        else if (insert)
          result_.flow_end_ps[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(e.task)].first_flow + out_flow_shift_[g] +
                                                       j * program_.period_flows_per_gpu[g] + (e.what - 2))] = e.time_ps + offset;
        else result_.flow_end_ps[program_.tasks[t].first_flow + (e.what - 2)] = e.time_ps + offset;
      }
    }
  }
  ended_tasks_ += static_cast<std::size_t>(periods) * ends_per_period;
  skipped_periods_ += static_cast<std::uint64_t>(periods * cycle_periods_);
  skip_cycle_periods_ = cycle_periods_;
  skipped_events_ += static_cast<std::uint64_t>(periods) * (engine_.events_processed() - previous_events_);
  // The frontier moves to its image (inserted periods: stays).
  struct Moved {
    TaskId task;
    std::uint32_t pending;
    UnitParts parts;
  };
  std::vector<Moved> moved;
  moved.reserve(frontier_.size());
  // The collective groups of the frontier move to their images too (once each).
  std::vector<std::pair<std::uint32_t, UnitState>> moved_groups;
  for (const TaskId t : frontier_) {
    TaskState& st = state_[static_cast<std::size_t>(t)];
    moved.push_back({phi(t, id_periods), st.pending, st.parts});
    st.pending = 0;
    st.parts = {};
    if (st.unit >= first_group_unit_ && id_periods > 0) moved_groups.emplace_back(st.unit, UnitState{});
  }
  std::sort(moved_groups.begin(), moved_groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  moved_groups.erase(std::unique(moved_groups.begin(), moved_groups.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
                     moved_groups.end());
  for (auto& [unit, saved] : moved_groups) {
    saved = units_[unit - first_group_unit_];
    units_[unit - first_group_unit_] = {};
  }
  for (const Moved& m : moved) {
    TaskState& st = state_[static_cast<std::size_t>(m.task)];
    st.pending = m.pending;
    st.parts = m.parts;
  }
  for (const auto& [unit, saved] : moved_groups) units_[phi_unit(unit, id_periods) - first_group_unit_] = saved;
  for (std::size_t g = 0; g < hi_.size(); ++g) hi_[g] += static_cast<TaskId>(id_periods * delta_[g]);
  // Running kernels and flows belong to the image tasks; their clocks move with the shift.
  for (GpuState& gpu : gpus_) {
    for (const std::uint32_t index : gpu.running_kernels) {
      KernelRun& run = kernels_[index];
      run.task = phi(run.task, id_periods);
      run.unit = state_[static_cast<std::size_t>(run.task)].unit;
      run.last_update_ps += shift_ps;
    }
  }
  std::vector<bool> free_flow(flows_.size(), false);
  for (const std::uint32_t i : flows_.free_list()) free_flow[i] = true;
  for (std::uint32_t i = 0; i < flows_.size(); ++i) {
    if (free_flow[i]) continue;
    FlowRun& run = flows_[i];
    const FlowImage image = phi_flow(run.flow, run.unit, id_periods);
    run.flow = image.flow;
    run.unit = image.unit;
    run.last_update_ps += shift_ps;
  }
  // Pending events: the same, in the same order, shifted.
  const std::vector<PendingEvent> events = engine_.pending_events();
  std::vector<EventDesc> descs;
  descs.reserve(events.size());
  for (const PendingEvent& e : events) {
    descs.push_back(descs_[e.id.slot]);
    engine_.cancel(e.id);
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    EventDesc d = descs[i];
    switch (d.kind) {
      case EventKind::kKernelDone:
      case EventKind::kFlowBytesDone: break;
      case EventKind::kFlowDone: {
        const FlowImage image = phi_flow(d.a, d.b, id_periods);
        d.a = image.flow;
        d.b = image.unit;
        break;
      }
      case EventKind::kCommWorkDone:
      case EventKind::kIssued: d.a = phi_unit(d.a, id_periods); break;
    }
    const EventId id = schedule_event(events[i].time_ps + shift_ps, d);
    if (d.kind == EventKind::kKernelDone) kernels_[d.a].completion = id;
    if (d.kind == EventKind::kFlowBytesDone) flows_[d.a].completion = id;
  }
  if (insert) {
    record_periodic_ranges(periods, period_ps);
    record_inserted(periods, period_ps);
    // From now on the built tasks stand for the full program's tasks after the inserted
    // periods: their results, and their host issue times, move on by those periods.
    for (std::size_t g = 0; g < num_gpus; ++g) {
      out_task_shift_[g] += periods * delta_[g];
      out_flow_shift_[g] += periods * static_cast<std::int64_t>(program_.period_flows_per_gpu[g]);
      issue_shift_ps_[g] = checked_add(issue_shift_ps_[g], checked_product(kSimulatedClock, {periods, issue_step_ps_[g]}), kSimulatedClock);
    }
    inserted_ = true;
  }
  if (options_.on_progress) options_.on_progress(ended_tasks_, full_tasks_);
}

void Execution::record_periodic_ranges(std::int64_t periods, TimePs period_ps) {
  const std::size_t num_gpus = gpu_first_.size();
  result_.period_ps = period_ps;
  result_.periodic_tasks.assign(num_gpus, {});
  struct Seen {
    TaskId lo = INT32_MAX, hi = -1;
    std::int64_t count = 0;
    bool repeated = false;
  };
  std::vector<Seen> seen(2 * num_gpus);
  std::vector<std::vector<bool>> residues(2 * num_gpus);
  for (std::size_t g = 0; g < num_gpus; ++g)
    if (gpu_first_[g] >= 0) residues[2 * g].assign(static_cast<std::size_t>(delta_[g]), false), residues[2 * g + 1] = residues[2 * g];
  for (const PeriodLogEntry& e : log_) {
    if (e.what > 1) continue;
    const std::size_t g = static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(e.task)].gpu);
    Seen& s = seen[2 * g + e.what];
    std::vector<bool>& used = residues[2 * g + e.what];
    const std::size_t residue = static_cast<std::size_t>((e.task - gpu_first_[g]) % delta_[g]);
    if (used[residue]) s.repeated = true;
    used[residue] = true;
    s.lo = std::min(s.lo, e.task);
    s.hi = std::max(s.hi, e.task);
    ++s.count;
  }
  for (std::size_t g = 0; g < num_gpus; ++g) {
    const Seen& starts = seen[2 * g];
    const Seen& ends = seen[2 * g + 1];
    const TaskId d = delta_[g];
    if (starts.repeated || ends.repeated || starts.count != d || ends.count != d) continue;
    const std::int64_t shift = out_task_shift_[g];
    result_.periodic_tasks[g] = {static_cast<TaskId>(std::max(starts.hi, ends.hi) + d + shift),
                                 static_cast<TaskId>(std::min(starts.lo, ends.lo) + periods * d + shift + 1), d};
  }
}

void Execution::record_inserted(std::int64_t periods, TimePs period_ps) {
  ExecResult::InsertedPeriods& in = result_.inserted;
  const std::size_t num_gpus = gpu_first_.size();
  in.periods = periods;
  in.period_ps = period_ps;
  in.inserted_at_ps = engine_.now();
  in.first_residue.assign(num_gpus + 1, 0);
  for (std::size_t g = 0; g < num_gpus; ++g) in.first_residue[g + 1] = in.first_residue[g] + (gpu_first_[g] >= 0 ? static_cast<std::size_t>(delta_[g]) : 0);
  in.starts.assign(in.first_residue[num_gpus], {});
  in.ends.assign(in.first_residue[num_gpus], {});
  for (const PeriodLogEntry& e : log_) {
    if (e.what > 1) continue;
    const std::size_t g = static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(e.task)].gpu);
    const std::size_t r = in.first_residue[g] + static_cast<std::size_t>((e.task - gpu_first_[g]) % delta_[g]);
    ExecResult::InsertedPeriods::Logged& slot = (e.what == 0 ? in.starts : in.ends)[r];
    if (slot.task < 0) {
      slot = {e.task, e.time_ps, periods};
    } else {
      // A residue logged twice (at both ends of the period): the copies of the later one
      // continue those of the earlier by whole periods.
      const TaskId first = std::min(slot.task, e.task), last = std::max(slot.task, e.task);
      const std::int64_t apart = (last - first) / delta_[g];
      const TimePs first_time = e.task == first ? e.time_ps : slot.time_ps;
      const TimePs last_time = e.task == first ? slot.time_ps : e.time_ps;
      LYNX_CHECK(last_time - first_time == apart * period_ps, "period log: tasks {} and {} do not repeat", first, last);
      slot = {first, first_time, std::max(slot.last, apart + periods)};
    }
  }
  // The latest inserted end is a candidate for the makespan.
  for (const ExecResult::InsertedPeriods::Logged& e : in.ends)
    if (e.task >= 0) inserted_end_ps_ = std::max(inserted_end_ps_, checked_add(e.time_ps, checked_product(kSimulatedClock, {e.last, period_ps}), kSimulatedClock));
}

}  // namespace lynx::sim::detail
