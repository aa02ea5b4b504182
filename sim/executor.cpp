// sim::execute and its per-instant loop: units ready, issued and started, kernels under
// contention, flows over fair-shared links, memory effects, events, and the result.
#include "sim/execution.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

namespace lynx::sim::detail {

ExecResult Execution::run() {
  validate();
  build_structure();  // also validates each task, and lists the tasks ready at time 0
  init_state();
  arm_fast_forward();
  settle();
  engine_.run();
  if (ended_tasks_ != (inserted_ ? full_tasks_ : program_.tasks.size())) report_stuck();
  finish_result();
  return std::move(result_);
}

void Execution::end_host_waits_for(TaskId task) {
  auto it = std::lower_bound(waits_by_until_.begin(), waits_by_until_.end(), std::pair<TaskId, std::size_t>{task, 0});
  for (; it != waits_by_until_.end() && it->first == task; ++it) {
    wait_until_end_ps_[it->second] = engine_.now();
    const std::size_t g = static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(program_.host_waits[it->second].resume)].gpu);
    while (next_wait_[g] < waits_of_gpu_[g].size()) {
      const std::size_t w = waits_of_gpu_[g][next_wait_[g]];
      if (wait_until_end_ps_[w] < 0) break;
      // The host resumes at max(its clock, the end it waited for).
      host_wait_shift_ps_[g] = std::max(host_wait_shift_ps_[g], wait_until_end_ps_[w] - program_.host_waits[w].host_before_ps);
      ++next_wait_[g];
    }
    for (const std::uint32_t unit : parked_[g]) unparked_.push_back(unit);
    parked_[g].clear();
  }
}

void Execution::settle() {
  for (;;) {
    if (ending_head_ < ending_.size()) {
      end_unit(ending_[ending_head_++]);
    } else if (ready_head_ < ready_.size()) {
      task_ready(ready_[ready_head_++]);
    } else if (!unparked_.empty()) {
      const std::uint32_t unit = unparked_.back();  // order is immaterial: each waits for its own issue time
      unparked_.pop_back();
      issue_or_wait(unit);
    } else {
      break;
    }
  }
  ending_.clear();
  ending_head_ = 0;
  ready_.clear();
  ready_head_ = 0;
  reshare_links();
  update_dirty_gpus();
  if (checkpoint_due_) checkpoint();
}

void Execution::issue_or_wait(std::uint32_t unit) {
  if (!program_.host_waits.empty()) {
    const UnitMembers members = members_of(unit);
    for (std::uint32_t m = 0; m < members.count; ++m)
      if (const std::int64_t g = open_wait_before(members[m]); g >= 0) {
        parked_[static_cast<std::size_t>(g)].push_back(unit);  // its host is blocked
        return;
      }
  }
  const TimePs issued = issue_time(unit);
  if (issued > engine_.now()) {
    if (ff_) waited_for_issue_ = true;
    schedule_event(issued, {EventKind::kIssued, unit, 0});
    return;
  }
  start_unit(unit);
}

TimePs Execution::issue_time(std::uint32_t unit) const {
  if (program_.issue_ps.empty()) return 0;
  const UnitMembers members = members_of(unit);
  TimePs latest = 0;
  for (std::uint32_t m = 0; m < members.count; ++m) {
    const std::size_t t = static_cast<std::size_t>(members[m]);
    const std::size_t g = static_cast<std::size_t>(program_.tasks[t].gpu);
    TimePs shift = host_wait_shift_ps_.empty() ? 0 : host_wait_shift_ps_[g];
    if (omitted_ > 0) shift += issue_shift_ps_[g];
    latest = std::max(latest, checked_add(program_.issue_ps[t], shift, kSimulatedClock));
  }
  return latest;
}

void Execution::start_unit(std::uint32_t unit) {
  UnitParts& state = parts_of(unit);
  bool has_comm = false;
  const UnitMembers members = members_of(unit);
  for (std::uint32_t m = 0; m < members.count; ++m) {
    const TaskId t = members[m];
    const Task& task = program_.tasks[static_cast<std::size_t>(t)];
    result_.task_start_ps[static_cast<std::size_t>(t)] = engine_.now();
    if (ff_) {
      note_touched(t);
      if (!anchors_.empty()) log_.push_back({engine_.now(), t, 0});
      if (next_anchor_ < program_.period_anchors.size() && t == program_.period_anchors[next_anchor_]) {
        ++next_anchor_;
        checkpoint_due_ = true;
      }
    }
    // The next task of this stream starts when this one ends, or later: time enough to
    // bring its records into cache (in time order the program is visited far from
    // sequentially, so these would be misses).
    const TaskState& st = state_[static_cast<std::size_t>(t)];
    if (const TaskId next = st.stream_next; next >= 0) {
      prefetch_record(&program_.tasks[static_cast<std::size_t>(next)]);
      prefetch_record(&state_[static_cast<std::size_t>(next)]);
      __builtin_prefetch(&result_.task_start_ps[static_cast<std::size_t>(next)]);
    }
    // Likewise what its end writes and reads: its end time, where its successor list ends
    // (the next record), and the list.
    __builtin_prefetch(&result_.task_end_ps[static_cast<std::size_t>(t)]);
    prefetch_record(&state_[static_cast<std::size_t>(t) + 1]);
    __builtin_prefetch(successors_.data() + st.first_successor);
    // The memory effects and flows built after its own are mostly those of the next task
    // of its GPU (the builder writes a GPU's tasks in order).
    __builtin_prefetch(program_.mem.data() + task.first_mem + task.num_mem);
    __builtin_prefetch(program_.flows.data() + task.first_flow + task.num_flows);
    __builtin_prefetch(flow_latency_ps_.data() + task.first_flow + task.num_flows);
    task_fingerprint_.add_signed(engine_.now());
    task_fingerprint_.add(static_cast<std::uint64_t>(t) << 1);
    if (options_.record_event_order) result_.event_order.push_back(static_cast<std::int64_t>(t) << 1);
    apply_memory(t, /*at_end=*/false);
    switch (task.kind) {
      case TaskKind::kKernel:
        if (task.work_ps > 0) {
          start_kernel(t, unit);
          ++state.open_parts;
        }
        break;
      case TaskKind::kComm:
        has_comm = true;
        ++gpus_[static_cast<std::size_t>(task.gpu)].running_comm;
        mark_dirty(task.gpu);
        for (std::uint32_t k = 0; k < task.num_flows; ++k) start_flow(task.first_flow + k, unit, task.gpu);
        break;
      case TaskKind::kMarker:
        break;
    }
  }
  if (has_comm) {
    ++state.open_parts;
    if (state.open_flows == 0) comm_flows_done(unit);
  } else if (state.open_parts == 0) {
    ending_.push_back(unit);
  }
}

void Execution::end_unit(std::uint32_t unit) {
  const TimePs now = engine_.now();
  const UnitMembers members = members_of(unit);
  for (std::uint32_t m = 0; m < members.count; ++m) {
    const TaskId t = members[m];
    const std::size_t ti = static_cast<std::size_t>(t);
    const Task& task = program_.tasks[ti];
    result_.task_end_ps[ti] = now;
    if (ff_ && !anchors_.empty()) log_.push_back({now, t, 1});
    task_fingerprint_.add_signed(now);
    task_fingerprint_.add((static_cast<std::uint64_t>(t) << 1) | 1);
    if (options_.record_event_order) result_.event_order.push_back((static_cast<std::int64_t>(t) << 1) | 1);
    apply_memory(t, /*at_end=*/true);
    if (!waits_by_until_.empty()) end_host_waits_for(t);
    if (task.kind == TaskKind::kComm) {
      --gpus_[static_cast<std::size_t>(task.gpu)].running_comm;
      mark_dirty(task.gpu);
    }
    ++ended_tasks_;
    if (options_.on_progress && ended_tasks_ % ExecOptions::kProgressTasks == 0)
      options_.on_progress(ended_tasks_, full_tasks_);
    const TaskState& ended = state_[ti];
    for (std::uint32_t k = ended.first_successor; k < state_[ti + 1].first_successor; ++k) release(successors_[k]);
    if (ended.stream_next >= 0) release(ended.stream_next);
  }
}

void Execution::apply_memory(TaskId t, bool at_end) {
  const Task& task = program_.tasks[static_cast<std::size_t>(t)];
  if (task.num_mem == 0) return;
  const std::size_t g = static_cast<std::size_t>(task.gpu);
  MemoryTracker& tracker = memory_[g];
  for (std::uint32_t k = 0; k < task.num_mem; ++k) {
    const MemEffect& effect = program_.mem[task.first_mem + k];
    if (effect.at_end != at_end) continue;
    if (effect.bytes < 0 && tracker.tag_bytes(effect.tag) + effect.bytes < 0) {
      fail(ErrorCode::kInternal, "{} frees {} bytes of memory tag '{}' at {} ps, but the tag holds only {} bytes on that GPU "
           "(malformed program: free without a matching alloc)",
           task_label(t), -effect.bytes, program_.tags[effect.tag], engine_.now(), tracker.tag_bytes(effect.tag));
    }
    tracker.apply(effect.bytes, effect.tag, engine_.now());
    if (options_.record_memory_timeline) result_.memory_timeline[g].emplace_back(engine_.now(), tracker.current_bytes());
  }
}

void Execution::start_kernel(TaskId t, std::uint32_t unit) {
  const Task& task = program_.tasks[static_cast<std::size_t>(t)];
  GpuState& gpu = gpus_[static_cast<std::size_t>(task.gpu)];
  const std::uint32_t index = kernels_.acquire();
  KernelRun& run = kernels_[index];
  run.task = t;
  run.unit = unit;
  run.gpu = task.gpu;
  run.remaining = static_cast<Int128>(task.work_ps) * kKernelUnitsPerPs;
  run.last_update_ps = engine_.now();
  run.position = static_cast<std::uint32_t>(gpu.running_kernels.size());
  gpu.running_kernels.push_back(index);
  mark_dirty(task.gpu);
}

void Execution::kernel_done(std::uint32_t index) {
  KernelRun& run = kernels_[index];
  const GpuId gpu_id = run.gpu;
  GpuState& gpu = gpus_[static_cast<std::size_t>(gpu_id)];
  const std::uint32_t moved = gpu.running_kernels.back();
  gpu.running_kernels[run.position] = moved;
  kernels_[moved].position = run.position;
  gpu.running_kernels.pop_back();
  mark_dirty(gpu_id);
  const std::uint32_t unit = run.unit;
  kernels_.release(index);
  part_done(unit);
}

void Execution::update_dirty_gpus() {
  const TimePs now = engine_.now();
  for (const GpuId gpu_id : dirty_gpus_) {
    GpuState& gpu = gpus_[static_cast<std::size_t>(gpu_id)];
    gpu.dirty = false;
    if (!gpu.slowed_flows.empty()) {
      const std::uint64_t flow_div = flow_divisor(gpu_id);
      for (const std::uint32_t index : gpu.slowed_flows) {
        const FlowRun& run = flows_[index];
        if (run.share.bytes_per_s_num != 0) set_flow_rate(index, slowed_rate(run.share, flow_div));
      }
    }
    if (gpu.running_kernels.empty()) continue;
    const Int128 wide = static_cast<Int128>(gpu.running_kernels.size()) *
                        (kPpm + static_cast<Int128>(gpu.contention_ppm) * gpu.running_comm);
    LYNX_CHECK(wide <= static_cast<Int128>(UINT64_MAX), "contention divisor overflows on gpu {}", gpu_id);
    const std::uint64_t divisor = static_cast<std::uint64_t>(wide);
    for (const std::uint32_t index : gpu.running_kernels) {
      KernelRun& run = kernels_[index];
      if (run.divisor == divisor) continue;
      const bool rearm = run.divisor != 0;
      if (rearm) run.remaining -= progress_capped(now - run.last_update_ps, kKernelProgressPerPs, run.divisor, run.remaining);
      run.divisor = divisor;
      run.last_update_ps = now;
      const TimePs delay = ceil_mul_div_time(run.remaining, divisor, kKernelProgressPerPs);
      const TimePs at = checked_add(now, delay, kSimulatedClock);
      const EventDesc what{EventKind::kKernelDone, index, 0};
      run.completion = rearm ? reschedule_event(run.completion, at, what) : schedule_event(at, what);
    }
  }
  dirty_gpus_.clear();
}

void Execution::fire(EventDesc what) {
  switch (what.kind) {
    case EventKind::kKernelDone: kernel_done(what.a); break;
    case EventKind::kFlowBytesDone: flow_bytes_done(what.a); break;
    case EventKind::kFlowDone: flow_done(what.a, what.b); break;
    case EventKind::kCommWorkDone: part_done(what.a); break;
    case EventKind::kIssued:
      if (ff_) waited_for_issue_ = true;
      start_unit(what.a);
      break;
  }
  settle();
}

void Execution::start_flow(std::uint32_t f, std::uint32_t unit, GpuId gpu) {
  const Flow& flow = program_.flows[f];
  const TimePs latency = flow_latency_ps_[f];
  if (flow.bytes == 0 || flow.num_links == 0) {  // nothing to share: only the path latency
    if (latency == 0) {
      result_.flow_end_ps[out_flow(f, unit)] = engine_.now();
      if (ff_) log_flow_end(f, unit);
      return;
    }
    ++parts_of(unit).open_flows;
    schedule_event(checked_add(engine_.now(), latency, kSimulatedClock), {EventKind::kFlowDone, f, unit});
    return;
  }
  ++parts_of(unit).open_flows;
  const std::uint32_t index = flows_.acquire();
  FlowRun& run = flows_[index];
  run.flow = f;
  run.unit = unit;
  run.remaining = static_cast<Int128>(flow.bytes) * kPsPerS;
  run.last_update_ps = engine_.now();
  run.latency_ps = latency;
  run.gpu = gpu;
  GpuState& state = gpus_[static_cast<std::size_t>(gpu)];
  if (state.comm_contention_ppm > 0) {
    run.position = static_cast<std::uint32_t>(state.slowed_flows.size());
    state.slowed_flows.push_back(index);
  }
  const std::span<const LinkId> path(program_.path_links.data() + flow.first_link, flow.num_links);
  network_.add_flow(index, path);
  touch_links(path);
}

void Execution::flow_bytes_done(std::uint32_t index) {
  FlowRun& run = flows_[index];
  touch_links(network_.path_of(index));
  network_.remove_flow(index);
  const std::uint32_t f = run.flow;
  const std::uint32_t unit = run.unit;
  const TimePs latency = run.latency_ps;
  GpuState& state = gpus_[static_cast<std::size_t>(run.gpu)];
  if (state.comm_contention_ppm > 0) {
    const std::uint32_t moved = state.slowed_flows.back();
    state.slowed_flows[run.position] = moved;
    flows_[moved].position = run.position;
    state.slowed_flows.pop_back();
  }
  flows_.release(index);
  if (latency == 0) {
    flow_done(f, unit);
  } else {
    schedule_event(checked_add(engine_.now(), latency, kSimulatedClock), {EventKind::kFlowDone, f, unit});
  }
}

void Execution::comm_flows_done(std::uint32_t unit) {
  TimePs work = 0;  // the largest work_ps among the unit's comm tasks
  const UnitMembers members = members_of(unit);
  for (std::uint32_t m = 0; m < members.count; ++m) {
    const Task& task = program_.tasks[static_cast<std::size_t>(members[m])];
    if (task.kind == TaskKind::kComm) work = std::max(work, task.work_ps);
  }
  if (work == 0) {
    part_done(unit);
  } else {
    schedule_event(checked_add(engine_.now(), work, kSimulatedClock), {EventKind::kCommWorkDone, unit, 0});
  }
}

void Execution::reshare_links() {
  if (touched_links_.empty()) return;
  rate_changes_.clear();
  sharing_->reshare(network_, touched_links_, rate_changes_);
  for (const LinkId link : touched_links_) link_touched_[static_cast<std::size_t>(link)] = false;
  touched_links_.clear();
  for (const RateChange& change : rate_changes_) {
    FlowRun& run = flows_[change.handle];
    run.share = change.rate;
    set_flow_rate(change.handle, comm_contention_on_ ? slowed_rate(run.share, flow_divisor(run.gpu)) : run.share);
  }
}

FlowRate Execution::slowed_rate(const FlowRate& share, std::uint64_t divisor) {
  if (divisor == static_cast<std::uint64_t>(kPpm) || share.bytes_per_s_num == 0) return share;
  // share.num * (kPpm / g) / (share.den * (divisor / g)), reduced by the gcd of the result.
  const std::uint64_t g = std::gcd(static_cast<std::uint64_t>(kPpm), divisor);
  UInt128 num = static_cast<UInt128>(share.bytes_per_s_num) * (static_cast<std::uint64_t>(kPpm) / g);
  UInt128 den = static_cast<UInt128>(share.den) * (divisor / g);
  if (num > UINT64_MAX || den > UINT64_MAX) {
    UInt128 a = num, b = den;
    while (b != 0) {
      const UInt128 r = a % b;
      a = b;
      b = r;
    }
    num /= a;
    den /= a;
  }
  LYNX_CHECK(num <= UINT64_MAX && den <= UINT64_MAX,
             "a flow rate slowed by comm contention does not fit 64 bits ({} / {} bytes/s, divisor {} ppm)",
             share.bytes_per_s_num, share.den, divisor);
  return FlowRate{static_cast<std::uint64_t>(num), static_cast<std::uint64_t>(den)};
}

void Execution::set_flow_rate(std::uint32_t index, const FlowRate& rate) {
  FlowRun& run = flows_[index];
  if (run.rate == rate) return;
  const TimePs now = engine_.now();
  const bool rearm = run.rate.bytes_per_s_num != 0;
  if (rearm) {
    run.remaining -= progress_capped(now - run.last_update_ps, run.rate.bytes_per_s_num,
                                     static_cast<Int128>(run.rate.den), run.remaining);
  }
  run.rate = rate;
  run.last_update_ps = now;
  const TimePs delay = ceil_mul_div_time(run.remaining, static_cast<Int128>(run.rate.den),
                                         static_cast<Int128>(run.rate.bytes_per_s_num));
  const TimePs at = checked_add(now, delay, kSimulatedClock);
  const EventDesc what{EventKind::kFlowBytesDone, index, 0};
  run.completion = rearm ? reschedule_event(run.completion, at, what) : schedule_event(at, what);
}

void Execution::finish_result() {
  result_.makespan_ps = inserted_end_ps_;
  for (const TimePs end : result_.task_end_ps) result_.makespan_ps = std::max(result_.makespan_ps, end);
  result_.peak_bytes.resize(memory_.size());
  result_.first_oom_ps.resize(memory_.size());
  for (std::size_t g = 0; g < memory_.size(); ++g) {
    result_.peak_bytes[g] = memory_[g].peak_bytes();
    result_.first_oom_ps[g] = memory_[g].first_oom_ps();
  }
  result_.events = engine_.events_processed() + skipped_events_;
  result_.complete = omitted_ == 0 || inserted_;
  result_.skipped_periods = skipped_periods_;
  result_.skip_cycle_periods = skip_cycle_periods_;
  Fingerprint combined = engine_.fingerprint();
  combined.add(task_fingerprint_.value());
  result_.fingerprint = combined.value();
}

}  // namespace lynx::sim::detail

namespace lynx::sim {

ExecResult execute(const Machine& machine, const Program& program, const ExecOptions& options) {
  detail::Execution execution(machine, program, options);
  return execution.run();
}

}  // namespace lynx::sim
