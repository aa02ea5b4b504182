// sim::detail::Execution: the static structure built once per run (successor lists, collective
// units, flow latencies), the initial state, the host waits and a compressed program's ids.
#include "sim/execution.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

namespace lynx::sim::detail {

void Execution::build_structure() {
  const std::size_t num_tasks = program_.tasks.size();
  const std::size_t num_gpus = machine_.gpus.size();
  assign_huge(state_, num_tasks + 1, TaskState{});  // the last one only ends the successor lists
  first_group_unit_ = static_cast<std::uint32_t>(num_tasks);

  // One pass over the tasks: successor counts, stream FIFO (each task also waits for the
  // previous task on its (gpu, stream)), pending counts, unit of each ungrouped task.
  std::vector<std::size_t> stream_base(num_gpus + 1, 0);
  for (std::size_t g = 0; g < num_gpus; ++g) stream_base[g + 1] = stream_base[g] + machine_.gpus[g].stream_names.size();
  std::vector<TaskId> last_on_stream(stream_base[num_gpus], -1);
  std::vector<std::pair<std::int32_t, TaskId>> grouped;
  // Also, for the fast-forward: each GPU's id range, whether it is contiguous, and which
  // tasks have a stream predecessor.
  const bool period_hints = !program_.period_anchors.empty();
  gpu_first_.assign(num_gpus, -1);
  gpu_end_.assign(num_gpus, -1);
  gpus_contiguous_ = true;
  if (period_hints) has_stream_pred_.assign(num_tasks, false);
  for (std::size_t t = 0; t < num_tasks; ++t) {
    validate_task(t);
    const Task& task = program_.tasks[t];
    for (std::uint32_t k = 0; k < task.num_deps; ++k) ++state_[static_cast<std::size_t>(program_.deps[task.first_dep + k])].first_successor;
    state_[t].pending += task.num_deps;
    TaskId& last = last_on_stream[stream_base[static_cast<std::size_t>(task.gpu)] + static_cast<std::size_t>(task.stream)];
    if (last >= 0) {
      state_[static_cast<std::size_t>(last)].stream_next = static_cast<TaskId>(t);
      ++state_[t].pending;
      if (period_hints) has_stream_pred_[t] = true;
    }
    last = static_cast<TaskId>(t);
    if (task.group >= 0) {
      grouped.emplace_back(task.group, static_cast<TaskId>(t));
    } else {
      state_[t].unit = static_cast<std::uint32_t>(t);
    }
    // Its pending count is final now: in id order, as the ready list must be.
    if (state_[t].pending == 0) ready_.push_back(static_cast<TaskId>(t));
    const std::size_t g = static_cast<std::size_t>(task.gpu);
    if (gpu_first_[g] < 0) gpu_first_[g] = static_cast<TaskId>(t);
    else if (gpu_end_[g] != static_cast<TaskId>(t)) gpus_contiguous_ = false;
    gpu_end_[g] = static_cast<TaskId>(t) + 1;
  }

  // Successors in CSR form; lists are in dependent-task order. The counts become each list's
  // end; filling from the back (tasks in reverse order) leaves every start in place.
  for (std::size_t t = 0; t < num_tasks; ++t) state_[t + 1].first_successor += state_[t].first_successor;
  assign_huge(successors_, state_[num_tasks].first_successor, TaskId{0});
  for (std::size_t t = num_tasks; t-- > 0;) {
    const Task& task = program_.tasks[t];
    for (std::uint32_t k = task.num_deps; k-- > 0;) {
      successors_[--state_[static_cast<std::size_t>(program_.deps[task.first_dep + k])].first_successor] = static_cast<TaskId>(t);
    }
  }

  // Units: unit t for each ungrouped task t (no member list), then unit num_tasks + i for
  // collective group i (dense, in group order; members listed in task order).
  std::sort(grouped.begin(), grouped.end());
  std::uint32_t num_groups = 0;
  unit_offsets_.assign(1, 0);
  unit_members_.resize(grouped.size());
  for (std::size_t i = 0; i < grouped.size(); ++i) {
    if (i > 0 && grouped[i].first != grouped[i - 1].first) {
      ++num_groups;
      unit_offsets_.push_back(static_cast<std::uint32_t>(i));
    }
    state_[static_cast<std::size_t>(grouped[i].second)].unit = first_group_unit_ + num_groups;
    unit_members_[i] = grouped[i].second;
  }
  if (!grouped.empty()) {
    ++num_groups;
    unit_offsets_.push_back(static_cast<std::uint32_t>(grouped.size()));
  }
  units_.assign(num_groups, UnitState{});

  // Path latency per flow.
  flow_latency_ps_.assign(program_.flows.size(), 0);
  for (std::size_t f = 0; f < program_.flows.size(); ++f) {
    const Flow& flow = program_.flows[f];
    TimePs latency = 0;
    for (std::uint32_t k = 0; k < flow.num_links; ++k) {
      latency = checked_add(latency, machine_.links[static_cast<std::size_t>(program_.path_links[flow.first_link + k])].latency_ps,
                            "a flow's path latency (hardware.node.*.latency)");
    }
    flow_latency_ps_[f] = latency;
  }
}

void Execution::init_state() {
  const std::size_t num_gpus = machine_.gpus.size();
  gpus_.assign(num_gpus, GpuState{});
  memory_.clear();
  memory_.reserve(num_gpus);
  for (std::size_t g = 0; g < num_gpus; ++g) {
    gpus_[g].contention_ppm = static_cast<std::uint64_t>(std::llround(machine_.gpus[g].contention_factor * kPpm));
    gpus_[g].comm_contention_ppm = static_cast<std::uint64_t>(std::llround(machine_.gpus[g].comm_contention * kPpm));
    comm_contention_on_ = comm_contention_on_ || gpus_[g].comm_contention_ppm > 0;
    const std::int64_t static_bytes = program_.static_bytes_per_gpu.empty() ? 0 : program_.static_bytes_per_gpu[g];
    memory_.emplace_back(static_bytes, machine_.gpus[g].memory_capacity_bytes, program_.tags.size());
  }
  link_touched_.assign(machine_.links.size(), false);
  init_full_ids();
  init_host_waits();
  // Per built task (ExecResult::inserted): the omitted periods' task times are not written.
  assign_huge(result_.task_start_ps, program_.tasks.size(), TimePs{-1});
  assign_huge(result_.task_end_ps, program_.tasks.size(), TimePs{-1});
  assign_huge(result_.flow_end_ps, full_flows_, TimePs{-1});
  if (options_.record_memory_timeline) {
    result_.memory_timeline.assign(num_gpus, {});
    for (std::size_t g = 0; g < num_gpus; ++g) result_.memory_timeline[g].emplace_back(0, memory_[g].current_bytes());
  }
}

void Execution::init_host_waits() {
  if (program_.host_waits.empty()) return;
  if (omitted_ > 0) fail(ErrorCode::kInternal, "compressed program with host waits");
  const std::size_t num_gpus = machine_.gpus.size();
  host_wait_shift_ps_.assign(num_gpus, 0);
  waits_of_gpu_.assign(num_gpus, {});
  next_wait_.assign(num_gpus, 0);
  parked_.assign(num_gpus, {});
  wait_until_end_ps_.assign(program_.host_waits.size(), -1);
  for (std::size_t w = 0; w < program_.host_waits.size(); ++w) {
    const Program::HostWait& hw = program_.host_waits[w];
    waits_of_gpu_[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(hw.resume)].gpu)].push_back(w);
    waits_by_until_.emplace_back(hw.until, w);
  }
  std::sort(waits_by_until_.begin(), waits_by_until_.end());
}

void Execution::init_full_ids() {
  const std::size_t num_gpus = machine_.gpus.size();
  omitted_ = program_.omitted_periods;
  out_task_shift_.assign(num_gpus, 0);
  out_flow_shift_.assign(num_gpus, 0);
  issue_shift_ps_.assign(num_gpus, 0);
  issue_step_ps_.assign(num_gpus, 0);
  full_tasks_ = program_.tasks.size();
  full_flows_ = program_.flows.size();
  if (omitted_ == 0) return;
  if (omitted_ < 0 || program_.period_tasks_per_gpu.size() != num_gpus || program_.period_flows_per_gpu.size() != num_gpus ||
      !gpus_contiguous_)
    fail(ErrorCode::kInternal, "compressed program ({} omitted periods) without per-GPU periods or contiguous GPUs", omitted_);
  std::vector<std::size_t> order;
  for (std::size_t g = 0; g < num_gpus; ++g)
    if (gpu_first_[g] >= 0) order.push_back(g);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return gpu_first_[a] < gpu_first_[b]; });
  std::int64_t tasks = 0, flows = 0;
  for (const std::size_t g : order) {
    out_task_shift_[g] = tasks;
    out_flow_shift_[g] = flows;
    tasks = checked_sum("a compressed program's tasks",
                        {tasks, checked_product("a compressed program's tasks", {omitted_, std::int64_t{program_.period_tasks_per_gpu[g]}})});
    flows = checked_sum("a compressed program's flows",
                        {flows, checked_product("a compressed program's flows", {omitted_, std::int64_t{program_.period_flows_per_gpu[g]}})});
  }
  full_tasks_ += static_cast<std::size_t>(tasks);
  full_flows_ += static_cast<std::size_t>(flows);
  if (full_tasks_ > static_cast<std::size_t>(INT32_MAX)) fail(ErrorCode::kWorkTooLarge, "program has too many tasks: {}", full_tasks_);
}

}  // namespace lynx::sim::detail
