#include "sim/executor.hpp"

#include "sim/engine.hpp"
#include "sim/link_network.hpp"
#include "sim/link_sharing.hpp"
#include "sim/memory_tracker.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>

namespace lynx::sim {
namespace {

// A program has millions of tasks, visited in time order: a bigger Task costs cache misses
// and page faults on every run (sim/program.hpp orders its fields for this size).
static_assert(sizeof(Task) <= 56, "sim::Task grew beyond 56 bytes");

/// The contention factor is applied in parts per million so rates are exact rationals.
constexpr std::int64_t kPpm = 1'000'000;
/// Kernel work is counted in units of 1e-6 solo picoseconds. Under divisor D =
/// n_k * (kPpm + c_ppm * n_comm) a kernel does kKernelProgressPerPs / D units per wall ps;
/// alone (D = kPpm) that is exactly kKernelUnitsPerPs, so a solo kernel takes exactly work_ps.
constexpr Int128 kKernelUnitsPerPs = 1'000'000;
constexpr Int128 kKernelProgressPerPs = kKernelUnitsPerPs * kPpm;

/// ceil(a * b / divisor) for a, b >= 0 and divisor > 0, as a time; throws lynx::Error on overflow.
TimePs ceil_mul_div_time(Int128 a, Int128 b, Int128 divisor) {
  Int128 product = 0;
  if (__builtin_mul_overflow(a, b, &product)) fail("simulated time overflow while rescheduling a completion");
  const Int128 quotient = product / divisor + (product % divisor != 0 ? 1 : 0);
  if (quotient > static_cast<Int128>(INT64_MAX)) fail("simulated time overflow while rescheduling a completion");
  return static_cast<TimePs>(quotient);
}

/// floor(elapsed * num / den), capped at `cap` (also when the product overflows 128 bits).
Int128 progress_capped(TimePs elapsed_ps, Int128 num, Int128 den, Int128 cap) {
  Int128 product = 0;
  if (__builtin_mul_overflow(static_cast<Int128>(elapsed_ps), num, &product)) return cap;
  return std::min(product / den, cap);
}

/// A kernel task occupying SMs; lives in a pool while it runs.
struct KernelRun {
  TaskId task = 0;
  std::uint32_t unit = 0;
  std::uint32_t position = 0;  ///< index in its GPU's running list
  Int128 remaining = 0;        ///< solo work left, in kernel units
  std::uint64_t divisor = 0;   ///< D of the current rate; 0 before the first rate
  TimePs last_update_ps = 0;
  EventId completion;
};

/// A flow whose bytes are crossing links; lives in a pool while bytes remain.
struct FlowRun {
  std::uint32_t flow = 0;
  std::uint32_t unit = 0;
  Int128 remaining = 0;  ///< bytes left times kPsPerS (so rate num/den bytes/s moves num/den per ps)
  FlowRate rate;         ///< 0 numerator before the first rate
  TimePs last_update_ps = 0;
  TimePs latency_ps = 0;
  EventId completion;
};

struct GpuState {
  std::vector<std::uint32_t> running_kernels;  ///< KernelRun indices
  std::uint32_t running_comm = 0;
  std::uint64_t contention_ppm = 0;
  bool dirty = false;  ///< the set of running tasks changed since rates were last set
};

/// What a started rendezvous unit (a collective group, or one task on its own) waits for.
struct UnitParts {
  std::uint32_t open_parts = 0;  ///< kernels with work still running + 1 for an open comm phase
  std::uint32_t open_flows = 0;
};

/// A collective group.
struct UnitState {
  std::uint32_t ready_members = 0;
  UnitParts parts;
};

/// Per task, what starting and ending it touches, in one record of 24 bytes:
/// the executor's working set is millions of tasks, visited in time order, not program order.
struct TaskState {
  std::uint32_t pending = 0;         ///< unfinished deps + unfinished stream predecessor
  std::uint32_t unit = 0;            ///< its rendezvous unit
  TaskId stream_next = -1;           ///< next task on its (gpu, stream), -1 if none
  std::uint32_t first_successor = 0; ///< successors_[first_successor, next task's first_successor)
  UnitParts parts;                   ///< of its unit when the task is not in a group
};

/// Pool of records with a free list; indices stay valid while in use.
template <typename T>
class Pool {
 public:
  std::uint32_t acquire() {
    if (!free_.empty()) {
      const std::uint32_t index = free_.back();
      free_.pop_back();
      items_[index] = T{};
      return index;
    }
    items_.emplace_back();
    return static_cast<std::uint32_t>(items_.size() - 1);
  }
  void release(std::uint32_t index) { free_.push_back(index); }
  T& operator[](std::uint32_t index) { return items_[index]; }

 private:
  std::vector<T> items_;
  std::vector<std::uint32_t> free_;
};

const char* kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kKernel: return "kernel";
    case TaskKind::kComm: return "comm";
    case TaskKind::kMarker: return "marker";
  }
  return "?";
}

/// One execution of a program: owns the engine and all dynamic state.
class Execution {
 public:
  Execution(const Machine& machine, const Program& program, const ExecOptions& options)
      : machine_(machine), program_(program), options_(options), network_(link_bandwidths(machine)) {}

  ExecResult run() {
    validate();
    build_structure();
    init_state();
    for (std::size_t t = 0; t < program_.tasks.size(); ++t) {
      if (state_[t].pending == 0) ready_.push_back(static_cast<TaskId>(t));
    }
    settle();
    engine_.run();
    if (ended_tasks_ != program_.tasks.size()) report_stuck();
    finish_result();
    return std::move(result_);
  }

 private:
  static std::vector<std::uint64_t> link_bandwidths(const Machine& machine) {
    std::vector<std::uint64_t> bandwidths;
    bandwidths.reserve(machine.links.size());
    for (const LinkDesc& link : machine.links) bandwidths.push_back(link.bw_bytes_per_s);
    return bandwidths;
  }

  // ---- labels for messages ----
  std::string task_label(TaskId t) const {
    const Task& task = program_.tasks[static_cast<std::size_t>(t)];
    const std::string name = sim::task_label(program_, t);
    const GpuDesc& gpu = machine_.gpus[static_cast<std::size_t>(task.gpu)];
    const std::string stream = static_cast<std::size_t>(task.stream) < gpu.stream_names.size()
                                   ? gpu.stream_names[static_cast<std::size_t>(task.stream)]
                                   : std::to_string(task.stream);
    return fmt::format("task {} '{}' ({} on gpu {} '{}', stream '{}')", t, name, kind_name(task.kind), task.gpu,
                       gpu.name, stream);
  }

  // ---- checks ----
  void validate() const {
    const std::size_t num_gpus = machine_.gpus.size();
    const std::size_t num_tasks = program_.tasks.size();
    if (num_tasks > static_cast<std::size_t>(INT32_MAX)) fail("program has too many tasks: {}", num_tasks);
    if (!program_.static_bytes_per_gpu.empty() && program_.static_bytes_per_gpu.size() != num_gpus) {
      fail("program has static bytes for {} GPUs, the machine has {}", program_.static_bytes_per_gpu.size(), num_gpus);
    }
    for (std::size_t g = 0; g < program_.static_bytes_per_gpu.size(); ++g) {
      if (program_.static_bytes_per_gpu[g] < 0) fail("gpu {}: negative static bytes {}", g, program_.static_bytes_per_gpu[g]);
    }
    for (std::size_t g = 0; g < num_gpus; ++g) {
      const double factor = machine_.gpus[g].contention_factor;
      if (!std::isfinite(factor) || factor < 0.0 || factor > 1e6) {
        fail("gpu {} '{}': contention factor {} is not in [0, 1e6]", g, machine_.gpus[g].name, factor);
      }
    }
    for (std::size_t i = 0; i < program_.path_links.size(); ++i) {
      const LinkId link = program_.path_links[i];
      if (link < 0 || static_cast<std::size_t>(link) >= machine_.links.size()) {
        fail("path_links[{}] = {} is not a link (machine has {})", i, link, machine_.links.size());
      }
    }
    for (std::size_t f = 0; f < program_.flows.size(); ++f) {
      const Flow& flow = program_.flows[f];
      if (std::uint64_t{flow.first_link} + flow.num_links > program_.path_links.size()) {
        fail("flow {}: path [{}, +{}) is outside path_links ({})", f, flow.first_link, flow.num_links,
             program_.path_links.size());
      }
      for (std::uint32_t k = 0; k < flow.num_links && flow.bytes > 0; ++k) {
        const LinkId link = program_.path_links[flow.first_link + k];
        if (machine_.links[static_cast<std::size_t>(link)].bw_bytes_per_s == 0) {
          fail("flow {}: {} bytes over link {} '{}' of zero bandwidth", f, flow.bytes, link,
               machine_.links[static_cast<std::size_t>(link)].name);
        }
        if (machine_.links[static_cast<std::size_t>(link)].latency_ps < 0) fail("link {}: negative latency", link);
      }
    }
    for (std::size_t t = 0; t < num_tasks; ++t) {
      const Task& task = program_.tasks[t];
      if (task.gpu < 0 || static_cast<std::size_t>(task.gpu) >= num_gpus) {
        fail("task {}: gpu {} is not on the machine ({} GPUs)", t, task.gpu, num_gpus);
      }
      const GpuDesc& gpu = machine_.gpus[static_cast<std::size_t>(task.gpu)];
      if (task.stream < 0 || static_cast<std::size_t>(task.stream) >= gpu.stream_names.size()) {
        fail("task {}: stream {} is not a stream of gpu {} '{}' ({} streams)", t, task.stream, task.gpu, gpu.name,
             gpu.stream_names.size());
      }
      const TaskId id = static_cast<TaskId>(t);
      if (!program_.names.empty() && task.name >= program_.names.size()) {
        fail("{}: name index {} out of range ({} names)", task_label(id), task.name, program_.names.size());
      }
      if (task.work_ps < 0) fail("{}: negative work_ps {}", task_label(id), task.work_ps);
      if (task.kind == TaskKind::kMarker && task.work_ps != 0) fail("{}: a marker takes zero time", task_label(id));
      if (task.kind != TaskKind::kComm && task.num_flows != 0) fail("{}: only comm tasks carry flows", task_label(id));
      if (std::uint64_t{task.first_dep} + task.num_deps > program_.deps.size()) {
        fail("{}: deps [{}, +{}) outside Program::deps ({})", task_label(id), task.first_dep, task.num_deps,
             program_.deps.size());
      }
      for (std::uint32_t k = 0; k < task.num_deps; ++k) {
        const TaskId dep = program_.deps[task.first_dep + k];
        if (dep < 0 || static_cast<std::size_t>(dep) >= num_tasks) fail("{}: depends on task {}, which does not exist", task_label(id), dep);
      }
      if (std::uint64_t{task.first_flow} + task.num_flows > program_.flows.size()) {
        fail("{}: flows [{}, +{}) outside Program::flows ({})", task_label(id), task.first_flow, task.num_flows,
             program_.flows.size());
      }
      if (std::uint64_t{task.first_mem} + task.num_mem > program_.mem.size()) {
        fail("{}: memory effects [{}, +{}) outside Program::mem ({})", task_label(id), task.first_mem, task.num_mem,
             program_.mem.size());
      }
      for (std::uint32_t k = 0; k < task.num_mem; ++k) {
        const MemEffect& effect = program_.mem[task.first_mem + k];
        if (effect.tag >= program_.tags.size()) {
          fail("{}: memory tag {} out of range ({} tags)", task_label(id), effect.tag, program_.tags.size());
        }
      }
    }
  }

  // ---- static structure, built once ----
  void build_structure() {
    const std::size_t num_tasks = program_.tasks.size();
    const std::size_t num_gpus = machine_.gpus.size();
    state_.assign(num_tasks + 1, TaskState{});  // the last one only ends the successor lists
    first_group_unit_ = static_cast<std::uint32_t>(num_tasks);

    // One pass over the tasks: successor counts, stream FIFO (each task also waits for the
    // previous task on its (gpu, stream)), pending counts, unit of each ungrouped task.
    std::vector<std::size_t> stream_base(num_gpus + 1, 0);
    for (std::size_t g = 0; g < num_gpus; ++g) stream_base[g + 1] = stream_base[g] + machine_.gpus[g].stream_names.size();
    std::vector<TaskId> last_on_stream(stream_base[num_gpus], -1);
    std::vector<std::pair<std::int32_t, TaskId>> grouped;
    for (std::size_t t = 0; t < num_tasks; ++t) {
      const Task& task = program_.tasks[t];
      for (std::uint32_t k = 0; k < task.num_deps; ++k) ++state_[static_cast<std::size_t>(program_.deps[task.first_dep + k]) + 1].first_successor;
      state_[t].pending += task.num_deps;
      TaskId& last = last_on_stream[stream_base[static_cast<std::size_t>(task.gpu)] + static_cast<std::size_t>(task.stream)];
      if (last >= 0) {
        state_[static_cast<std::size_t>(last)].stream_next = static_cast<TaskId>(t);
        ++state_[t].pending;
      }
      last = static_cast<TaskId>(t);
      if (task.group >= 0) {
        grouped.emplace_back(task.group, static_cast<TaskId>(t));
      } else {
        state_[t].unit = static_cast<std::uint32_t>(t);
      }
    }

    // Successors in CSR form; lists are in dependent-task order. Each start serves as the fill
    // cursor (ending at the next one's start), then the starts shift back into place.
    for (std::size_t t = 0; t < num_tasks; ++t) state_[t + 1].first_successor += state_[t].first_successor;
    successors_.resize(state_[num_tasks].first_successor);
    for (std::size_t t = 0; t < num_tasks; ++t) {
      const Task& task = program_.tasks[t];
      for (std::uint32_t k = 0; k < task.num_deps; ++k) {
        successors_[state_[static_cast<std::size_t>(program_.deps[task.first_dep + k])].first_successor++] = static_cast<TaskId>(t);
      }
    }
    for (std::size_t t = num_tasks; t-- > 1;) state_[t].first_successor = state_[t - 1].first_successor;
    if (num_tasks > 0) state_[0].first_successor = 0;

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

  void init_state() {
    const std::size_t num_gpus = machine_.gpus.size();
    gpus_.assign(num_gpus, GpuState{});
    memory_.clear();
    memory_.reserve(num_gpus);
    for (std::size_t g = 0; g < num_gpus; ++g) {
      gpus_[g].contention_ppm = static_cast<std::uint64_t>(std::llround(machine_.gpus[g].contention_factor * kPpm));
      const std::int64_t static_bytes = program_.static_bytes_per_gpu.empty() ? 0 : program_.static_bytes_per_gpu[g];
      memory_.emplace_back(static_bytes, machine_.gpus[g].memory_capacity_bytes, program_.tags.size());
    }
    link_touched_.assign(machine_.links.size(), false);
    result_.task_start_ps.assign(program_.tasks.size(), -1);
    result_.task_end_ps.assign(program_.tasks.size(), -1);
    result_.flow_end_ps.assign(program_.flows.size(), -1);
    if (options_.record_memory_timeline) {
      result_.memory_timeline.assign(num_gpus, {});
      for (std::size_t g = 0; g < num_gpus; ++g) result_.memory_timeline[g].emplace_back(0, memory_[g].current_bytes());
    }
  }

  /// The tasks of a unit: a collective group's list, or the one ungrouped task.
  struct UnitMembers {
    const TaskId* list = nullptr;  ///< null: the single task `single`
    TaskId single = -1;
    std::uint32_t count = 0;
    TaskId operator[](std::uint32_t m) const { return list != nullptr ? list[m] : single; }
  };
  UnitMembers members_of(std::uint32_t unit) const {
    if (unit < first_group_unit_) return {nullptr, static_cast<TaskId>(unit), 1};
    const std::uint32_t group = unit - first_group_unit_;
    return {unit_members_.data() + unit_offsets_[group], -1, unit_offsets_[group + 1] - unit_offsets_[group]};
  }

  UnitParts& parts_of(std::uint32_t unit) {
    return unit < first_group_unit_ ? state_[unit].parts : units_[unit - first_group_unit_].parts;
  }

  // ---- the per-instant work loop ----
  /// Drains tasks that became ready and units that ended at this instant, then sets new
  /// kernel and flow rates once for everything that changed.
  void settle() {
    for (;;) {
      if (ending_head_ < ending_.size()) {
        end_unit(ending_[ending_head_++]);
      } else if (ready_head_ < ready_.size()) {
        task_ready(ready_[ready_head_++]);
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
  }

  void task_ready(TaskId t) {
    const std::uint32_t unit = state_[static_cast<std::size_t>(t)].unit;
    // A task on its own starts when ready; a group when its last member is.
    if (unit < first_group_unit_ || ++units_[unit - first_group_unit_].ready_members == members_of(unit).count) {
      start_unit(unit);
    }
  }

  void start_unit(std::uint32_t unit) {
    UnitParts& state = parts_of(unit);
    bool has_comm = false;
    const UnitMembers members = members_of(unit);
    for (std::uint32_t m = 0; m < members.count; ++m) {
      const TaskId t = members[m];
      const Task& task = program_.tasks[static_cast<std::size_t>(t)];
      result_.task_start_ps[static_cast<std::size_t>(t)] = engine_.now();
      // The next task of this stream starts when this one ends, or later: time enough to
      // bring its records into cache (in time order the program is visited far from
      // sequentially, so these would be misses).
      if (const TaskId next = state_[static_cast<std::size_t>(t)].stream_next; next >= 0) {
        __builtin_prefetch(&program_.tasks[static_cast<std::size_t>(next)]);
        __builtin_prefetch(&state_[static_cast<std::size_t>(next)]);
        __builtin_prefetch(&result_.task_start_ps[static_cast<std::size_t>(next)]);
      }
      task_fingerprint_.add_signed(engine_.now());
      task_fingerprint_.add(static_cast<std::uint64_t>(t) << 1);
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
          for (std::uint32_t k = 0; k < task.num_flows; ++k) start_flow(task.first_flow + k, unit);
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

  void part_done(std::uint32_t unit) {
    if (--parts_of(unit).open_parts == 0) ending_.push_back(unit);
  }

  void end_unit(std::uint32_t unit) {
    const TimePs now = engine_.now();
    const UnitMembers members = members_of(unit);
    for (std::uint32_t m = 0; m < members.count; ++m) {
      const TaskId t = members[m];
      const std::size_t ti = static_cast<std::size_t>(t);
      const Task& task = program_.tasks[ti];
      result_.task_end_ps[ti] = now;
      task_fingerprint_.add_signed(now);
      task_fingerprint_.add((static_cast<std::uint64_t>(t) << 1) | 1);
      apply_memory(t, /*at_end=*/true);
      if (task.kind == TaskKind::kComm) {
        --gpus_[static_cast<std::size_t>(task.gpu)].running_comm;
        mark_dirty(task.gpu);
      }
      ++ended_tasks_;
      if (options_.on_progress && ended_tasks_ % ExecOptions::kProgressTasks == 0)
        options_.on_progress(ended_tasks_, program_.tasks.size());
      const TaskState& ended = state_[ti];
      for (std::uint32_t k = ended.first_successor; k < state_[ti + 1].first_successor; ++k) release(successors_[k]);
      if (ended.stream_next >= 0) release(ended.stream_next);
    }
  }

  void release(TaskId t) {
    if (--state_[static_cast<std::size_t>(t)].pending == 0) {
      // It starts within this instant: load its record while the rest of the instant runs.
      __builtin_prefetch(&program_.tasks[static_cast<std::size_t>(t)]);
      ready_.push_back(t);
    }
  }

  // ---- memory ----
  void apply_memory(TaskId t, bool at_end) {
    const Task& task = program_.tasks[static_cast<std::size_t>(t)];
    if (task.num_mem == 0) return;
    const std::size_t g = static_cast<std::size_t>(task.gpu);
    MemoryTracker& tracker = memory_[g];
    for (std::uint32_t k = 0; k < task.num_mem; ++k) {
      const MemEffect& effect = program_.mem[task.first_mem + k];
      if (effect.at_end != at_end) continue;
      if (effect.bytes < 0 && tracker.tag_bytes(effect.tag) + effect.bytes < 0) {
        fail("{} frees {} bytes of memory tag '{}' at {} ps, but the tag holds only {} bytes on that GPU "
             "(malformed program: free without a matching alloc)",
             task_label(t), -effect.bytes, program_.tags[effect.tag], engine_.now(), tracker.tag_bytes(effect.tag));
      }
      tracker.apply(effect.bytes, effect.tag, engine_.now());
      if (options_.record_memory_timeline) result_.memory_timeline[g].emplace_back(engine_.now(), tracker.current_bytes());
    }
  }

  // ---- kernels and contention ----
  void mark_dirty(GpuId gpu) {
    GpuState& state = gpus_[static_cast<std::size_t>(gpu)];
    if (!state.dirty) {
      state.dirty = true;
      dirty_gpus_.push_back(gpu);
    }
  }

  void start_kernel(TaskId t, std::uint32_t unit) {
    const Task& task = program_.tasks[static_cast<std::size_t>(t)];
    GpuState& gpu = gpus_[static_cast<std::size_t>(task.gpu)];
    const std::uint32_t index = kernels_.acquire();
    KernelRun& run = kernels_[index];
    run.task = t;
    run.unit = unit;
    run.remaining = static_cast<Int128>(task.work_ps) * kKernelUnitsPerPs;
    run.last_update_ps = engine_.now();
    run.position = static_cast<std::uint32_t>(gpu.running_kernels.size());
    gpu.running_kernels.push_back(index);
    mark_dirty(task.gpu);
  }

  void kernel_done(std::uint32_t index) {
    KernelRun& run = kernels_[index];
    const GpuId gpu_id = program_.tasks[static_cast<std::size_t>(run.task)].gpu;
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

  /// Rate of every kernel on a GPU: 1 / (n_k * (1 + c * n_comm)), as kPpm / divisor.
  void update_dirty_gpus() {
    const TimePs now = engine_.now();
    for (const GpuId gpu_id : dirty_gpus_) {
      GpuState& gpu = gpus_[static_cast<std::size_t>(gpu_id)];
      gpu.dirty = false;
      if (gpu.running_kernels.empty()) continue;
      const Int128 wide = static_cast<Int128>(gpu.running_kernels.size()) *
                          (kPpm + static_cast<Int128>(gpu.contention_ppm) * gpu.running_comm);
      LYNX_CHECK(wide <= static_cast<Int128>(UINT64_MAX), "contention divisor overflows on gpu {}", gpu_id);
      const std::uint64_t divisor = static_cast<std::uint64_t>(wide);
      for (const std::uint32_t index : gpu.running_kernels) {
        KernelRun& run = kernels_[index];
        if (run.divisor == divisor) continue;
        if (run.divisor != 0) {
          run.remaining -= progress_capped(now - run.last_update_ps, kKernelProgressPerPs, run.divisor, run.remaining);
          engine_.cancel(run.completion);
        }
        run.divisor = divisor;
        run.last_update_ps = now;
        const TimePs delay = ceil_mul_div_time(run.remaining, divisor, kKernelProgressPerPs);
        run.completion = engine_.schedule_after(delay, [this, index] {
          kernel_done(index);
          settle();
        });
      }
    }
    dirty_gpus_.clear();
  }

  // ---- flows and links ----
  void start_flow(std::uint32_t f, std::uint32_t unit) {
    const Flow& flow = program_.flows[f];
    const TimePs latency = flow_latency_ps_[f];
    if (flow.bytes == 0 || flow.num_links == 0) {  // nothing to share: only the path latency
      if (latency == 0) {
        result_.flow_end_ps[f] = engine_.now();
        return;
      }
      ++parts_of(unit).open_flows;
      engine_.schedule_after(latency, [this, f, unit] {
        flow_done(f, unit);
        settle();
      });
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
    const std::span<const LinkId> path(program_.path_links.data() + flow.first_link, flow.num_links);
    network_.add_flow(index, path);
    touch_links(path);
  }

  void touch_links(std::span<const LinkId> path) {
    for (const LinkId link : path) {
      if (!link_touched_[static_cast<std::size_t>(link)]) {
        link_touched_[static_cast<std::size_t>(link)] = true;
        touched_links_.push_back(link);
      }
    }
  }

  void flow_bytes_done(std::uint32_t index) {
    FlowRun& run = flows_[index];
    touch_links(network_.path_of(index));
    network_.remove_flow(index);
    const std::uint32_t f = run.flow;
    const std::uint32_t unit = run.unit;
    const TimePs latency = run.latency_ps;
    flows_.release(index);
    if (latency == 0) {
      flow_done(f, unit);
    } else {
      engine_.schedule_after(latency, [this, f, unit] {
        flow_done(f, unit);
        settle();
      });
    }
  }

  void flow_done(std::uint32_t f, std::uint32_t unit) {
    result_.flow_end_ps[f] = engine_.now();
    if (--parts_of(unit).open_flows == 0) comm_flows_done(unit);
  }

  void comm_flows_done(std::uint32_t unit) {
    TimePs work = 0;  // the largest work_ps among the unit's comm tasks
    const UnitMembers members = members_of(unit);
    for (std::uint32_t m = 0; m < members.count; ++m) {
      const Task& task = program_.tasks[static_cast<std::size_t>(members[m])];
      if (task.kind == TaskKind::kComm) work = std::max(work, task.work_ps);
    }
    if (work == 0) {
      part_done(unit);
    } else {
      engine_.schedule_after(work, [this, unit] {
        part_done(unit);
        settle();
      });
    }
  }

  void reshare_links() {
    if (touched_links_.empty()) return;
    rate_changes_.clear();
    sharing_->reshare(network_, touched_links_, rate_changes_);
    for (const LinkId link : touched_links_) link_touched_[static_cast<std::size_t>(link)] = false;
    touched_links_.clear();
    const TimePs now = engine_.now();
    for (const RateChange& change : rate_changes_) {
      FlowRun& run = flows_[change.handle];
      if (run.rate == change.rate) continue;
      if (run.rate.bytes_per_s_num != 0) {
        run.remaining -= progress_capped(now - run.last_update_ps, run.rate.bytes_per_s_num,
                                         static_cast<Int128>(run.rate.den), run.remaining);
        engine_.cancel(run.completion);
      }
      run.rate = change.rate;
      run.last_update_ps = now;
      const TimePs delay = ceil_mul_div_time(run.remaining, static_cast<Int128>(run.rate.den),
                                             static_cast<Int128>(run.rate.bytes_per_s_num));
      const std::uint32_t index = change.handle;
      run.completion = engine_.schedule_after(delay, [this, index] {
        flow_bytes_done(index);
        settle();
      });
    }
  }

  // ---- results and diagnostics ----
  void finish_result() {
    result_.makespan_ps = 0;
    for (const TimePs end : result_.task_end_ps) result_.makespan_ps = std::max(result_.makespan_ps, end);
    result_.peak_bytes.resize(memory_.size());
    result_.first_oom_ps.resize(memory_.size());
    for (std::size_t g = 0; g < memory_.size(); ++g) {
      result_.peak_bytes[g] = memory_[g].peak_bytes();
      result_.first_oom_ps[g] = memory_[g].first_oom_ps();
    }
    result_.events = engine_.events_processed();
    Fingerprint combined = engine_.fingerprint();
    combined.add(task_fingerprint_.value());
    result_.fingerprint = combined.value();
  }

  /// Every unfinished task waits on another unfinished one, so following "waits on" edges from
  /// any of them must revisit a task: that task lies on the cycle, and the error names it.
  [[noreturn]] void report_stuck() const {
    const std::size_t num_tasks = program_.tasks.size();
    std::vector<TaskId> stream_prev(num_tasks, -1);
    for (std::size_t t = 0; t < num_tasks; ++t) {
      if (state_[t].stream_next >= 0) stream_prev[static_cast<std::size_t>(state_[t].stream_next)] = static_cast<TaskId>(t);
    }
    auto unfinished = [&](TaskId t) { return result_.task_end_ps[static_cast<std::size_t>(t)] < 0; };
    TaskId current = -1;
    for (std::size_t t = 0; t < num_tasks && current < 0; ++t) {
      if (unfinished(static_cast<TaskId>(t))) current = static_cast<TaskId>(t);
    }
    std::vector<char> visited(num_tasks, 0);
    while (!visited[static_cast<std::size_t>(current)]) {
      visited[static_cast<std::size_t>(current)] = 1;
      const std::size_t ci = static_cast<std::size_t>(current);
      LYNX_CHECK(result_.task_start_ps[ci] < 0, "{} started but never ended", task_label(current));
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
    fail("program cannot finish: {} never starts; it waits, through {}, on itself (a cycle, or a collective "
         "group whose members can never be ready together); {} of {} tasks ended",
         task_label(current), how, ended_tasks_, num_tasks);
  }

  const Machine& machine_;
  const Program& program_;
  const ExecOptions& options_;
  Engine engine_;
  Fingerprint task_fingerprint_;  ///< (time, task << 1 | ended) of every task start and end
  ExecResult result_;

  // static structure
  std::vector<TaskId> successors_;
  std::vector<std::uint32_t> unit_offsets_;  ///< per collective group: [offset, next offset) in unit_members_
  std::vector<TaskId> unit_members_;         ///< members of the collective groups
  std::uint32_t first_group_unit_ = 0;       ///< units below are ungrouped tasks (unit t = task t), from here groups
  std::vector<TimePs> flow_latency_ps_;

  // dynamic state
  std::vector<TaskState> state_;  ///< per task, plus one sentinel
  std::vector<UnitState> units_;  ///< per collective group
  std::vector<GpuState> gpus_;
  std::vector<MemoryTracker> memory_;
  Pool<KernelRun> kernels_;
  Pool<FlowRun> flows_;
  LinkNetwork network_;
  /// Behind the interface so another policy (e.g. max-min) can replace bottleneck fair share.
  std::unique_ptr<SharingPolicy> sharing_ = std::make_unique<BottleneckFairShare>();
  std::vector<RateChange> rate_changes_;
  std::vector<bool> link_touched_;
  std::vector<LinkId> touched_links_;
  std::vector<GpuId> dirty_gpus_;
  std::vector<TaskId> ready_;
  std::size_t ready_head_ = 0;
  std::vector<std::uint32_t> ending_;
  std::size_t ending_head_ = 0;
  std::size_t ended_tasks_ = 0;
};

}  // namespace

ExecResult execute(const Machine& machine, const Program& program, const ExecOptions& options) {
  Execution execution(machine, program, options);
  return execution.run();
}

}  // namespace lynx::sim
