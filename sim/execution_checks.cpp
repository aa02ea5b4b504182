// sim::detail::Execution: the checks of a program against its machine, the labels of its
// tasks in messages, and the report of a program that cannot finish.
#include "sim/execution.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

namespace lynx::sim::detail {
namespace {

const char* kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kKernel: return "kernel";
    case TaskKind::kComm: return "comm";
    case TaskKind::kMarker: return "marker";
  }
  return "?";
}

}  // namespace

std::string Execution::task_label(TaskId t) const {
  const Task& task = program_.tasks[static_cast<std::size_t>(t)];
  const std::string name = sim::task_label(program_, t);
  const GpuDesc& gpu = machine_.gpus[static_cast<std::size_t>(task.gpu)];
  const std::string stream = static_cast<std::size_t>(task.stream) < gpu.stream_names.size()
                                 ? gpu.stream_names[static_cast<std::size_t>(task.stream)]
                                 : std::to_string(task.stream);
  return fmt::format("task {} '{}' ({} on gpu {} '{}', stream '{}')", t, name, kind_name(task.kind), task.gpu,
                     gpu.name, stream);
}

void Execution::validate() const {
  const std::size_t num_gpus = machine_.gpus.size();
  const std::size_t num_tasks = program_.tasks.size();
  if (num_tasks > static_cast<std::size_t>(INT32_MAX)) fail(ErrorCode::kWorkTooLarge, "program has too many tasks: {}", num_tasks);
  if (!program_.issue_ps.empty() && program_.issue_ps.size() != num_tasks)
    fail(ErrorCode::kInternal, "program has issue times for {} tasks, it has {}", program_.issue_ps.size(), num_tasks);
  for (std::size_t t = 0; t < program_.issue_ps.size(); ++t)
    if (program_.issue_ps[t] < 0) fail(ErrorCode::kInternal, "{}: negative issue time {}", task_label(static_cast<TaskId>(t)), program_.issue_ps[t]);
  if (!program_.host_waits.empty() && program_.issue_ps.empty())
    fail(ErrorCode::kInternal, "program has {} host waits and no issue times", program_.host_waits.size());
  std::vector<TaskId> last_resume(num_gpus, -1);
  for (const Program::HostWait& w : program_.host_waits) {
    if (w.resume < 0 || static_cast<std::size_t>(w.resume) >= num_tasks || w.until < 0 ||
        static_cast<std::size_t>(w.until) >= num_tasks || w.host_before_ps < 0)
      fail(ErrorCode::kInternal, "host wait (resume {}, until {}, host clock {} ps) is out of range ({} tasks)", w.resume,
           w.until, w.host_before_ps, num_tasks);
    TaskId& last = last_resume[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(w.resume)].gpu)];
    if (w.resume <= last) fail(ErrorCode::kInternal, "{}: host waits of a GPU out of program order", task_label(w.resume));
    if (program_.tasks[static_cast<std::size_t>(w.until)].gpu == program_.tasks[static_cast<std::size_t>(w.resume)].gpu &&
        w.until >= w.resume)
      fail(ErrorCode::kInternal, "{}: its host waits for {}, which it issues later", task_label(w.resume), task_label(w.until));
    last = w.resume;
  }
  if (!program_.static_bytes_per_gpu.empty() && program_.static_bytes_per_gpu.size() != num_gpus) {
    fail(ErrorCode::kInternal, "program has static bytes for {} GPUs, the machine has {}", program_.static_bytes_per_gpu.size(), num_gpus);
  }
  for (std::size_t g = 0; g < program_.static_bytes_per_gpu.size(); ++g) {
    if (program_.static_bytes_per_gpu[g] < 0) fail(ErrorCode::kInternal, "gpu {}: negative static bytes {}", g, program_.static_bytes_per_gpu[g]);
  }
  for (std::size_t g = 0; g < num_gpus; ++g) {
    const double factor = machine_.gpus[g].contention_factor;
    if (!std::isfinite(factor) || factor < 0.0 || factor > 1e6) {
      fail(ErrorCode::kInternal, "gpu {} '{}': contention factor {} is not in [0, 1e6]", g, machine_.gpus[g].name, factor);
    }
    const double comm = machine_.gpus[g].comm_contention;
    if (!std::isfinite(comm) || comm < 0.0 || comm > 1e6) {
      fail(ErrorCode::kInternal, "gpu {} '{}': comm contention {} is not in [0, 1e6]", g, machine_.gpus[g].name, comm);
    }
  }
  for (std::size_t i = 0; i < program_.path_links.size(); ++i) {
    const LinkId link = program_.path_links[i];
    if (link < 0 || static_cast<std::size_t>(link) >= machine_.links.size()) {
      fail(ErrorCode::kInternal, "path_links[{}] = {} is not a link (machine has {})", i, link, machine_.links.size());
    }
  }
  for (std::size_t f = 0; f < program_.flows.size(); ++f) {
    const Flow& flow = program_.flows[f];
    if (std::uint64_t{flow.first_link} + flow.num_links > program_.path_links.size()) {
      fail(ErrorCode::kInternal, "flow {}: path [{}, +{}) is outside path_links ({})", f, flow.first_link, flow.num_links,
           program_.path_links.size());
    }
    for (std::uint32_t k = 0; k < flow.num_links && flow.bytes > 0; ++k) {
      const LinkId link = program_.path_links[flow.first_link + k];
      if (machine_.links[static_cast<std::size_t>(link)].bw_bytes_per_s == 0) {
        fail(ErrorCode::kInternal, "flow {}: {} bytes over link {} '{}' of zero bandwidth", f, flow.bytes, link,
             machine_.links[static_cast<std::size_t>(link)].name);
      }
      if (machine_.links[static_cast<std::size_t>(link)].latency_ps < 0) fail(ErrorCode::kInternal, "link {}: negative latency", link);
    }
  }
}

void Execution::validate_task(std::size_t t) const {
  const std::size_t num_gpus = machine_.gpus.size();
  const std::size_t num_tasks = program_.tasks.size();
  const Task& task = program_.tasks[t];
  if (task.gpu < 0 || static_cast<std::size_t>(task.gpu) >= num_gpus) {
    fail(ErrorCode::kInternal, "task {}: gpu {} is not on the machine ({} GPUs)", t, task.gpu, num_gpus);
  }
  const GpuDesc& gpu = machine_.gpus[static_cast<std::size_t>(task.gpu)];
  if (task.stream < 0 || static_cast<std::size_t>(task.stream) >= gpu.stream_names.size()) {
    fail(ErrorCode::kInternal, "task {}: stream {} is not a stream of gpu {} '{}' ({} streams)", t, task.stream, task.gpu, gpu.name,
         gpu.stream_names.size());
  }
  const TaskId id = static_cast<TaskId>(t);
  if (!program_.names.empty() && task.name >= program_.names.size()) {
    fail(ErrorCode::kInternal, "{}: name index {} out of range ({} names)", task_label(id), task.name, program_.names.size());
  }
  if (task.work_ps < 0) fail(ErrorCode::kInternal, "{}: negative work_ps {}", task_label(id), task.work_ps);
  if (task.kind == TaskKind::kMarker && task.work_ps != 0) fail(ErrorCode::kInternal, "{}: a marker takes zero time", task_label(id));
  if (task.kind != TaskKind::kComm && task.num_flows != 0) fail(ErrorCode::kInternal, "{}: only comm tasks carry flows", task_label(id));
  if (std::uint64_t{task.first_dep} + task.num_deps > program_.deps.size()) {
    fail(ErrorCode::kInternal, "{}: deps [{}, +{}) outside Program::deps ({})", task_label(id), task.first_dep, task.num_deps,
         program_.deps.size());
  }
  for (std::uint32_t k = 0; k < task.num_deps; ++k) {
    const TaskId dep = program_.deps[task.first_dep + k];
    if (dep < 0 || static_cast<std::size_t>(dep) >= num_tasks) fail(ErrorCode::kInternal, "{}: depends on task {}, which does not exist", task_label(id), dep);
  }
  if (std::uint64_t{task.first_flow} + task.num_flows > program_.flows.size()) {
    fail(ErrorCode::kInternal, "{}: flows [{}, +{}) outside Program::flows ({})", task_label(id), task.first_flow, task.num_flows,
         program_.flows.size());
  }
  if (std::uint64_t{task.first_mem} + task.num_mem > program_.mem.size()) {
    fail(ErrorCode::kInternal, "{}: memory effects [{}, +{}) outside Program::mem ({})", task_label(id), task.first_mem, task.num_mem,
         program_.mem.size());
  }
  for (std::uint32_t k = 0; k < task.num_mem; ++k) {
    const MemEffect& effect = program_.mem[task.first_mem + k];
    if (effect.tag >= program_.tags.size()) {
      fail(ErrorCode::kInternal, "{}: memory tag {} out of range ({} tags)", task_label(id), effect.tag, program_.tags.size());
    }
  }
}

void Execution::report_stuck() const {
  const std::size_t num_tasks = program_.tasks.size();
  std::vector<TaskId> stream_prev(num_tasks, -1);
  for (std::size_t t = 0; t < num_tasks; ++t) {
    if (state_[t].stream_next >= 0) stream_prev[static_cast<std::size_t>(state_[t].stream_next)] = static_cast<TaskId>(t);
  }
  auto unfinished = [&](TaskId t) { return end_of(t) < 0; };
  TaskId current = -1;
  for (std::size_t t = 0; t < num_tasks && current < 0; ++t) {
    if (unfinished(static_cast<TaskId>(t))) current = static_cast<TaskId>(t);
  }
  std::vector<char> visited(num_tasks, 0);
  while (!visited[static_cast<std::size_t>(current)]) {
    visited[static_cast<std::size_t>(current)] = 1;
    const std::size_t ci = static_cast<std::size_t>(current);
    LYNX_CHECK(start_of(current) < 0, "{} started but never ended", task_label(current));
    const Task& task = program_.tasks[ci];
    TaskId blocker = -1;
    if (stream_prev[ci] >= 0 && unfinished(stream_prev[ci])) blocker = stream_prev[ci];
    for (std::uint32_t k = 0; k < task.num_deps && blocker < 0; ++k) {
      if (unfinished(program_.deps[task.first_dep + k])) blocker = program_.deps[task.first_dep + k];
    }
    if (blocker < 0) {  // ready, so it waits for a collective partner that is not
      const std::uint32_t unit = state_[ci].unit;
      const UnitMembers members = members_of(unit);
      for (std::uint32_t m = 0; m < members.count && blocker < 0; ++m) {
        if (state_[static_cast<std::size_t>(members[m])].pending > 0) blocker = members[m];
      }
    }
    LYNX_CHECK(blocker >= 0, "{} is unfinished but waits on nothing", task_label(current));
    current = blocker;
  }
  const Task& task = program_.tasks[static_cast<std::size_t>(current)];
  std::string how = "dependencies and stream order";
  if (task.group >= 0) how = fmt::format("dependencies, stream order and collective group {}", task.group);
  fail(ErrorCode::kInternal, "program cannot finish: {} never starts; it waits, through {}, on itself (a cycle, or a collective "
       "group whose members can never be ready together); {} of {} tasks ended",
       task_label(current), how, ended_tasks_, num_tasks);
}

}  // namespace lynx::sim::detail
