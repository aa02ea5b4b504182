#include "sim/executor.hpp"

#include "common/checked.hpp"

#include "sim/engine.hpp"
#include "sim/link_network.hpp"
#include "sim/link_sharing.hpp"
#include "sim/memory_tracker.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <numeric>
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
  if (__builtin_mul_overflow(a, b, &product)) fail(ErrorCode::kTimeOverflow, "simulated time overflow while rescheduling a completion");
  const Int128 quotient = product / divisor + (product % divisor != 0 ? 1 : 0);
  if (quotient > static_cast<Int128>(INT64_MAX)) fail(ErrorCode::kTimeOverflow, "simulated time overflow while rescheduling a completion");
  return static_cast<TimePs>(quotient);
}

/// floor(elapsed * num / den), capped at `cap` (also when the product overflows 128 bits).
Int128 progress_capped(TimePs elapsed_ps, Int128 num, Int128 den, Int128 cap) {
  Int128 product = 0;
  if (__builtin_mul_overflow(static_cast<Int128>(elapsed_ps), num, &product)) return cap;
  return std::min(product / den, cap);
}

/// Prefetches every cache line of one record: a 56-byte Task or a 24-byte TaskState often
/// straddles two 64-byte lines, and a prefetch of its address brings in only the first.
template <typename T>
void prefetch_record(const T* record) {
  __builtin_prefetch(record);
  __builtin_prefetch(reinterpret_cast<const char*>(record) + sizeof(T) - 1);
}

/// v.assign(n, value), its memory advised for huge pages first (sim::advise_huge_pages).
template <typename T>
void assign_huge(std::vector<T>& v, std::size_t n, const T& value) {
  v.reserve(n);
  advise_huge_pages(v);
  v.assign(n, value);
}

/// A kernel task occupying SMs; lives in a pool while it runs.
struct KernelRun {
  TaskId task = 0;
  std::uint32_t unit = 0;
  std::uint32_t position = 0;  ///< index in its GPU's running list
  /// The task's GPU, kept here (in what was padding): at the kernel's end its Task record
  /// has usually left the cache.
  GpuId gpu = 0;
  Int128 remaining = 0;        ///< solo work left, in kernel units
  std::uint64_t divisor = 0;   ///< D of the current rate; 0 before the first rate
  TimePs last_update_ps = 0;
  EventId completion;
};
static_assert(sizeof(KernelRun) <= 64, "KernelRun grew beyond one cache line");

/// A flow whose bytes are crossing links; lives in a pool while bytes remain.
struct FlowRun {
  std::uint32_t flow = 0;
  std::uint32_t unit = 0;
  Int128 remaining = 0;  ///< bytes left times kPsPerS (so rate num/den bytes/s moves num/den per ps)
  FlowRate rate;         ///< what it moves at: `share`, slowed by its GPU's kernels; 0 numerator before the first rate
  FlowRate share;        ///< the sharing policy's rate (its link share)
  TimePs last_update_ps = 0;
  TimePs latency_ps = 0;
  EventId completion;
  GpuId gpu = 0;               ///< the GPU of the task that sends it
  std::uint32_t position = 0;  ///< index in its GPU's slowed_flows (with comm contention on)
};

struct GpuState {
  std::vector<std::uint32_t> running_kernels;  ///< KernelRun indices
  std::uint32_t running_comm = 0;
  std::uint64_t contention_ppm = 0;
  std::uint64_t comm_contention_ppm = 0;  ///< GpuDesc::comm_contention in kPpm
  /// With comm_contention_ppm > 0: FlowRun indices of the flows its tasks send that have bytes
  /// on links, in the order they started (an ended one's place taken by the last).
  std::vector<std::uint32_t> slowed_flows;
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
  const T& at(std::uint32_t index) const { return items_[index]; }
  std::size_t size() const { return items_.size(); }
  /// Free indices, reused last first (so part of the state that decides future indices).
  const std::vector<std::uint32_t>& free_list() const { return free_; }

 private:
  std::vector<T> items_;
  std::vector<std::uint32_t> free_;
};

/// What a pending event will do: every event is one of these, so the queue can be listed
/// (the fast-forward's state snapshots) and re-created shifted.
enum class EventKind : std::uint8_t {
  kKernelDone,     ///< a = KernelRun index
  kFlowBytesDone,  ///< a = FlowRun index
  kFlowDone,       ///< a = flow, b = its unit (path latency over)
  kCommWorkDone,   ///< a = unit (the comm phase's fixed latency over)
  kIssued,         ///< a = unit (ready, waited for its host issue time)
};
struct EventDesc {
  EventKind kind = EventKind::kKernelDone;
  std::uint32_t a = 0;
  std::uint32_t b = 0;
};

/// A task start (what 0), end (1) or the end of its flow k (2 + k), logged during one period.
struct PeriodLogEntry {
  TimePs time_ps = 0;
  TaskId task = 0;
  std::uint32_t what = 0;
};

/// The longest cycle, in periods, the fast-forward proves (assumed: the cycles seen are of two
/// periods, docs/host.md "The micro-batch load"; each bound more costs one more encoding of the
/// state at every anchor until the first match).
constexpr std::size_t kMaxCyclePeriods = 4;

/// The fast-forward's snapshot at an anchor (Program::period_anchors).
struct Anchor {
  std::vector<std::vector<std::int64_t>> mapped;  ///< [k - 1]: every task id t as phi^k(t)
  TimePs time_ps = 0;
  std::uint64_t events = 0;      ///< engine events processed by then
  std::vector<TaskId> frontier;  ///< tasks touched and not ended
  std::size_t log_begin = 0;     ///< the log's entries from here on are after it
  bool waited_in_period = false; ///< a task waited for its host issue before the next anchor
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
    build_structure();  // also validates each task, and lists the tasks ready at time 0
    init_state();
    arm_fast_forward();
    settle();
    engine_.run();
    if (ended_tasks_ != (inserted_ ? full_tasks_ : program_.tasks.size())) report_stuck();
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

  /// The checks of one task; build_structure runs them in its pass over the tasks, before it
  /// uses the task (one pass over millions of records, not two).
  void validate_task(std::size_t t) const {
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

  // ---- static structure, built once ----
  void build_structure() {
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

  void init_state() {
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

  /// Host waits (Program::host_waits): each GPU's in program order, and which end each waits for.
  void init_host_waits() {
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

  /// The first host wait of `task`'s GPU not yet over, if `task` comes after it (its issue
  /// time is not known yet); -1 otherwise.
  std::int64_t open_wait_before(TaskId task) const {
    if (program_.host_waits.empty()) return -1;
    const std::size_t g = static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(task)].gpu);
    if (next_wait_[g] >= waits_of_gpu_[g].size()) return -1;
    const std::size_t w = waits_of_gpu_[g][next_wait_[g]];
    return program_.host_waits[w].resume <= task ? static_cast<std::int64_t>(g) : -1;
  }

  /// `task` ended now: the host waits for it are over, and with them maybe later ones of the
  /// same GPUs; units parked behind them go back to their issue check.
  void end_host_waits_for(TaskId task) {
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

  /// Full-program ids of a compressed program's results (Program::omitted_periods; the
  /// identity for a complete one): GPU g's built task t is full task t + out_task_shift_[g],
  /// its flow f full flow f + out_flow_shift_[g]. Before the omitted periods are inserted the
  /// shifts hold the omitted tasks of the GPUs before g, after it also g's own.
  void init_full_ids() {
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
        !gpus_contiguous_ || !units_.empty())
      fail(ErrorCode::kInternal, "compressed program ({} omitted periods) without per-GPU periods, contiguous GPUs or free of "
           "collective groups", omitted_);
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
  std::size_t out_flow(std::uint32_t f, std::uint32_t unit) const {
    if (omitted_ == 0) return f;
    return static_cast<std::size_t>(f + out_flow_shift_[static_cast<std::size_t>(program_.tasks[unit].gpu)]);  // unit = task
  }
  TimePs start_of(TaskId t) const { return result_.task_start_ps[static_cast<std::size_t>(t)]; }
  TimePs end_of(TaskId t) const { return result_.task_end_ps[static_cast<std::size_t>(t)]; }

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

  void task_ready(TaskId t) {
    const std::uint32_t unit = state_[static_cast<std::size_t>(t)].unit;
    // A task on its own starts when ready; a group when its last member is.
    if (unit < first_group_unit_ || ++units_[unit - first_group_unit_].ready_members == members_of(unit).count)
      issue_or_wait(unit);
  }

  /// A unit all of whose members are ready starts once its host thread(s) have issued them.
  void issue_or_wait(std::uint32_t unit) {
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

  /// The latest host issue time among a unit's members (0 without a host model).
  TimePs issue_time(std::uint32_t unit) const {
    if (program_.issue_ps.empty()) return 0;
    const UnitMembers members = members_of(unit);
    TimePs latest = 0;
    for (std::uint32_t m = 0; m < members.count; ++m) {
      const std::size_t t = static_cast<std::size_t>(members[m]);
      const TimePs shift = host_wait_shift_ps_.empty() ? 0 : host_wait_shift_ps_[static_cast<std::size_t>(program_.tasks[t].gpu)];
      latest = std::max(latest, checked_add(program_.issue_ps[t], shift, kSimulatedClock));
    }
    if (omitted_ > 0) latest += issue_shift_ps_[static_cast<std::size_t>(program_.tasks[unit].gpu)];  // unit = task
    return latest;
  }

  void start_unit(std::uint32_t unit) {
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

  void release(TaskId t) {
    if (ff_) note_touched(t);
    if (--state_[static_cast<std::size_t>(t)].pending == 0) {
      // It starts within this instant: load its record while the rest of the instant runs.
      prefetch_record(&program_.tasks[static_cast<std::size_t>(t)]);
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
        fail(ErrorCode::kInternal, "{} frees {} bytes of memory tag '{}' at {} ps, but the tag holds only {} bytes on that GPU "
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
    run.gpu = task.gpu;
    run.remaining = static_cast<Int128>(task.work_ps) * kKernelUnitsPerPs;
    run.last_update_ps = engine_.now();
    run.position = static_cast<std::uint32_t>(gpu.running_kernels.size());
    gpu.running_kernels.push_back(index);
    mark_dirty(task.gpu);
  }

  void kernel_done(std::uint32_t index) {
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

  /// Rate of every kernel on a GPU: 1 / (n_k * (1 + c * n_comm)), as kPpm / divisor; with
  /// comm contention, also the rate of every flow it sends: share * kPpm / (kPpm + f * n_k).
  void update_dirty_gpus() {
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

  // ---- events ----
  /// Schedules the event `what` at `at_ps`; with the fast-forward armed, remembers what it is.
  EventId schedule_event(TimePs at_ps, EventDesc what) {
    return remember(engine_.schedule_at(at_ps, [this, what] { fire(what); }), what);
  }

  /// With the fast-forward armed, records what the event `id` does; returns `id`.
  EventId remember(EventId id, EventDesc what) {
    if (ff_) {
      if (id.slot >= descs_.size()) descs_.resize(static_cast<std::size_t>(id.slot) + 1);
      descs_[id.slot] = what;
    }
    return id;
  }

  /// engine_.cancel(old) then schedule_event(at_ps, what), with the queue entry moved in place.
  EventId reschedule_event(EventId old, TimePs at_ps, EventDesc what) {
    return remember(engine_.reschedule(old, at_ps, [this, what] { fire(what); }), what);
  }

  void fire(EventDesc what) {
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

  // ---- flows and links ----
  void start_flow(std::uint32_t f, std::uint32_t unit, GpuId gpu) {
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

  void flow_done(std::uint32_t f, std::uint32_t unit) {
    result_.flow_end_ps[out_flow(f, unit)] = engine_.now();
    if (ff_) log_flow_end(f, unit);
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
      schedule_event(checked_add(engine_.now(), work, kSimulatedClock), {EventKind::kCommWorkDone, unit, 0});
    }
  }

  void reshare_links() {
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

  /// The divisor D (in kPpm) of the rates of the flows GPU `gpu` sends: kPpm + comm_contention
  /// (ppm) * its running compute kernels; kPpm when none runs or comm contention is 0.
  std::uint64_t flow_divisor(GpuId gpu) const {
    const GpuState& state = gpus_[static_cast<std::size_t>(gpu)];
    const Int128 wide = kPpm + static_cast<Int128>(state.comm_contention_ppm) * state.running_kernels.size();
    LYNX_CHECK(wide <= static_cast<Int128>(UINT64_MAX), "comm contention divisor overflows on gpu {}", gpu);
    return static_cast<std::uint64_t>(wide);
  }

  /// `share` slowed to share * kPpm / divisor, exact (the same rate when divisor is kPpm);
  /// throws lynx::Error when the reduced fraction does not fit 64 bits.
  static FlowRate slowed_rate(const FlowRate& share, std::uint64_t divisor) {
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

  /// Moves flow `index` to `rate` now: its bytes so far at the old rate are through, and its
  /// completion is (re)scheduled at the new one. Nothing when the rate is unchanged.
  void set_flow_rate(std::uint32_t index, const FlowRate& rate) {
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

  // ---- steady-state fast-forward ----
  // At each anchor task's start (Program::period_anchors) the executor takes a canonical
  // snapshot of its whole dynamic state: pending events in firing order with times relative to
  // now, running kernels and flows (remaining work, rates; with comm contention also each
  // flow's link share and sending GPU, and each GPU's list of slowed flows), pool free lists,
  // per-link flow lists, memory balances, and the frontier (tasks touched but not ended:
  // pending counts and open parts). The previous snapshot is kept with every task id t mapped to phi(t) = t +
  // period_tasks_per_gpu[gpu of t]. Equal snapshots mean the state is the earlier one shifted by
  // one period T and phi; with the program itself phi-invariant over the tasks the coming
  // periods touch (checked task by task), and the tasks first touched in the last period having
  // untouched, disjoint images, the next N periods are exact copies: their task times are the
  // logged period's plus j·T, and the state after them is the current one shifted by N·T and
  // phi^N. Memory balances repeat, so peaks and first-OOM times stay as they are.
  // Cycles: the state need not repeat every period. Some pipelines' rounding repeats every two
  // (a flow that shares a link with another ends 1 ps apart in alternate periods), so each
  // anchor's snapshot is also compared with the one k = 2 .. kMaxCyclePeriods anchors back,
  // mapped by phi^k: a match is the proof above for phi^k (k·delta_ tasks per GPU, the k
  // periods' log, time k periods), which never looks at the anchors in between; the skip is
  // whole cycles. The shortest k is tried first; a compressed program only takes k = 1 (its
  // omitted periods are inserted as copies of one period).
  void arm_fast_forward() {
    ff_ = false;
    const std::size_t num_gpus = machine_.gpus.size();
    if (!options_.fast_forward || options_.record_memory_timeline || options_.record_event_order ||
        !units_.empty() || !program_.host_waits.empty())
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

  TaskId phi(TaskId t, std::int64_t periods) const {
    return static_cast<TaskId>(t + periods * delta_[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(t)].gpu)]);
  }
  /// phi(t, 1) for a task t that is usually on GPU `g`: its GPU comes from the id ranges, not
  /// from its Task record (a cache miss when t is far away, as dependencies across stages are).
  TaskId phi_near(TaskId t, std::size_t g) const {
    if (t < gpu_first_[g] || t >= gpu_end_[g]) {
      const auto after = std::upper_bound(range_first_.begin(), range_first_.end(), t);
      g = range_gpu_[static_cast<std::size_t>(after - range_first_.begin()) - 1];
    }
    return t + delta_[g];
  }
  std::uint32_t initial_pending(TaskId t) const {
    return program_.tasks[static_cast<std::size_t>(t)].num_deps + (has_stream_pred_[static_cast<std::size_t>(t)] ? 1 : 0);
  }
  bool untouched(TaskId t) const {
    const std::size_t ti = static_cast<std::size_t>(t);
    return start_of(t) < 0 && state_[ti].pending == initial_pending(t);
  }
  void note_touched(TaskId t) {
    TaskId& hi = hi_[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(t)].gpu)];
    hi = std::max(hi, t);
  }
  void log_flow_end(std::uint32_t f, std::uint32_t unit) {
    if (anchors_.empty()) return;  // the log is kept from the first anchor on
    log_.push_back({engine_.now(), static_cast<TaskId>(unit), 2 + (f - program_.tasks[unit].first_flow)});
  }

  /// Tasks touched (released or started) and not ended, in id order.
  void collect_frontier(std::vector<TaskId>& out) {
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

  /// The canonical snapshot; every task id t is written as phi^periods(t) (0: t itself).
  void encode(const std::vector<TaskId>& frontier, std::int64_t periods, std::vector<std::int64_t>& out) const {
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
        out.push_back(id(static_cast<TaskId>(run.unit)));
        out.push_back(run.flow - first_flow(run.unit));
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
        case EventKind::kFlowDone:
          out.push_back(id(static_cast<TaskId>(d.b)));
          out.push_back(d.a - first_flow(d.b));
          break;
        case EventKind::kCommWorkDone: out.push_back(id(static_cast<TaskId>(d.a))); break;
        case EventKind::kIssued: out.push_back(id(static_cast<TaskId>(d.a))); break;
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
      out.push_back(st.parts.open_parts);
      out.push_back(st.parts.open_flows);
      out.push_back(start_of(t) >= 0 ? 1 : 0);
    }
  }

  void checkpoint() {
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

  /// Whether task b = phi(a) does, for the executor, exactly what a does, phi-shifted.
  bool same_structure(TaskId a, TaskId b) const {
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
    if (x.work_ps != y.work_ps || x.gpu != y.gpu || x.stream != y.stream || x.group != y.group || x.kind != y.kind ||
        x.category != y.category || x.num_deps != y.num_deps || x.num_flows != y.num_flows || x.num_mem != y.num_mem)
      return false;
    if (has_stream_pred_[static_cast<std::size_t>(a)] != has_stream_pred_[static_cast<std::size_t>(b)]) return false;
    // Omitted periods: their flows are numbered one period's flows apart, as the built ones.
    if (omitted_ > 0 && y.first_flow - x.first_flow != program_.period_flows_per_gpu[static_cast<std::size_t>(x.gpu)]) return false;
    const std::size_t g = static_cast<std::size_t>(x.gpu);
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

  /// The state now equals the snapshot at `back`, `cycle` periods ago, shifted by phi^cycle:
  /// skips as many whole cycles as proven. A cycle of k periods is proven as one period of k
  /// times the tasks (phi^k is phi with k·delta_): the proof below never looks at the anchors
  /// in between, so it holds for any k.
  void try_skip(std::int64_t cycle, const Anchor& back) {
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

  void prove_and_skip(TimePs period_ps, const std::vector<TaskId>& previous_frontier) {
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

  /// Skips `periods` periods of length `period_ps`: writes their task and flow times and moves
  /// the state on. `insert`: periods a compressed program omitted (their flow times in
  /// full-program ids, their task times as ExecResult::inserted; the state keeps its built
  /// task ids), else built ones (the state moves to their images).
  void apply_skip(std::int64_t periods, TimePs period_ps, bool insert) {
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
    for (const TaskId t : frontier_) {
      TaskState& st = state_[static_cast<std::size_t>(t)];
      moved.push_back({phi(t, id_periods), st.pending, st.parts});
      st.pending = 0;
      st.parts = {};
    }
    for (const Moved& m : moved) {
      TaskState& st = state_[static_cast<std::size_t>(m.task)];
      st.pending = m.pending;
      st.parts = m.parts;
    }
    for (std::size_t g = 0; g < hi_.size(); ++g) hi_[g] += static_cast<TaskId>(id_periods * delta_[g]);
    // Running kernels and flows belong to the image tasks; their clocks move with the shift.
    for (GpuState& gpu : gpus_) {
      for (const std::uint32_t index : gpu.running_kernels) {
        KernelRun& run = kernels_[index];
        run.task = phi(run.task, id_periods);
        run.unit = static_cast<std::uint32_t>(run.task);
        run.last_update_ps += shift_ps;
      }
    }
    std::vector<bool> free_flow(flows_.size(), false);
    for (const std::uint32_t i : flows_.free_list()) free_flow[i] = true;
    for (std::uint32_t i = 0; i < flows_.size(); ++i) {
      if (free_flow[i]) continue;
      FlowRun& run = flows_[i];
      const std::uint32_t k = run.flow - program_.tasks[run.unit].first_flow;
      run.unit = static_cast<std::uint32_t>(phi(static_cast<TaskId>(run.unit), id_periods));
      run.flow = program_.tasks[run.unit].first_flow + k;
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
          const std::uint32_t k = d.a - program_.tasks[d.b].first_flow;
          d.b = static_cast<std::uint32_t>(phi(static_cast<TaskId>(d.b), id_periods));
          d.a = program_.tasks[d.b].first_flow + k;
          break;
        }
        case EventKind::kCommWorkDone:
        case EventKind::kIssued: d.a = static_cast<std::uint32_t>(phi(static_cast<TaskId>(d.a), id_periods)); break;
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

  /// ExecResult::periodic_tasks of inserted periods (before the shifts move on): on each GPU
  /// whose period log holds one start and one end of every residue of its task ids modulo the
  /// period, a full task x in [largest logged id + d, smallest logged id + periods·d] (+ the
  /// GPU's shift) is the image j >= 1 of the logged task of its residue, and x - d its image
  /// j - 1 (the logged task itself for j = 1), so x's times are x - d's plus one period.
  void record_periodic_ranges(std::int64_t periods, TimePs period_ps) {
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

  /// ExecResult::inserted, from the period log (before the shifts move on).
  void record_inserted(std::int64_t periods, TimePs period_ps) {
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

  // ---- results and diagnostics ----
  void finish_result() {
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

  /// Every unfinished task waits on another unfinished one, so following "waits on" edges from
  /// any of them must revisit a task: that task lies on the cycle, and the error names it.
  [[noreturn]] void report_stuck() const {
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

  // steady-state fast-forward (armed only with a period hint and no collective groups)
  bool ff_ = false;
  bool comm_contention_on_ = false;  ///< some GPU has GpuDesc::comm_contention > 0
  std::vector<TaskId> delta_;      ///< per GPU: task ids one period spans (a cycle's, in try_skip)
  std::vector<TaskId> gpu_first_;  ///< per GPU: [first, end) of its task ids
  std::vector<TaskId> gpu_end_;
  bool gpus_contiguous_ = false;   ///< every GPU's tasks form one id range
  std::vector<TaskId> lo_;         ///< per GPU: no task below has to be looked at (all ended)
  std::vector<TaskId> hi_;         ///< per GPU: highest task touched so far
  std::vector<TaskId> range_first_;     ///< first task ids of the GPUs' ranges, ascending
  std::vector<std::size_t> range_gpu_;  ///< the GPU of each of those ranges
  std::vector<bool> has_stream_pred_;
  std::vector<EventDesc> descs_;   ///< per engine slot: what its pending event does
  /// Task starts and ends since the last checkpoint; only from the first one on (try_skip reads
  /// the log of one period, so the warm-up before it, hundreds of thousands of entries on a big
  /// pipeline, is not kept).
  std::vector<PeriodLogEntry> log_;
  std::size_t next_anchor_ = 0;
  bool checkpoint_due_ = false;
  /// The last kMaxCyclePeriods anchors' snapshots (at most 1 for a compressed program), oldest
  /// first, each encoded with phi^k for k = 1..that bound (compared k anchors later).
  std::vector<Anchor> anchors_;
  std::vector<std::int64_t> snapshot_;
  std::vector<TaskId> frontier_;
  /// A task started late for its host issue since the last checkpoint (fast-forward proof;
  /// while proving a cycle: in any of its periods).
  bool waited_for_issue_ = false;
  std::int64_t cycle_periods_ = 1;       ///< periods in the cycle try_skip is proving
  std::int64_t skip_cycle_periods_ = 0;  ///< periods in the cycle that was skipped (0: none)
  TimePs skip_period_ps_ = 0;  ///< the period try_skip is proving
  std::uint64_t previous_events_ = 0;
  std::uint64_t skipped_events_ = 0;  ///< events the skipped periods would have run
  std::uint64_t skipped_periods_ = 0;
  // compressed programs (init_full_ids)
  std::int64_t omitted_ = 0;           ///< Program::omitted_periods
  bool inserted_ = false;              ///< the omitted periods were inserted (results complete)
  TimePs inserted_end_ps_ = 0;         ///< the latest end among the inserted tasks
  std::size_t full_tasks_ = 0, full_flows_ = 0;
  std::vector<std::int64_t> out_task_shift_;
  std::vector<std::int64_t> out_flow_shift_;
  std::vector<TimePs> issue_shift_ps_;  ///< per GPU: added to built issue times (the omitted periods' host time)
  std::vector<TimePs> issue_step_ps_;   ///< per GPU: host issue time one period adds (try_skip)
  // host waits (init_host_waits; empty without)
  std::vector<TimePs> host_wait_shift_ps_;            ///< per GPU: how much later than built its host now issues
  std::vector<std::vector<std::size_t>> waits_of_gpu_;  ///< per GPU: its waits, in program order
  std::vector<std::size_t> next_wait_;                ///< per GPU: its first wait not over
  std::vector<TimePs> wait_until_end_ps_;             ///< per wait: when its `until` ended (-1: not yet)
  std::vector<std::pair<TaskId, std::size_t>> waits_by_until_;  ///< (until, wait), sorted
  std::vector<std::vector<std::uint32_t>> parked_;    ///< per GPU: ready units its blocked host has not issued
  std::vector<std::uint32_t> unparked_;               ///< units whose host wait just ended
};

}  // namespace

ExecResult execute(const Machine& machine, const Program& program, const ExecOptions& options) {
  Execution execution(machine, program, options);
  return execution.run();
}

}  // namespace lynx::sim
