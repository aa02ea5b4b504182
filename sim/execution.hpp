#pragma once
/// One execution of a program by sim::execute: the records of its dynamic state and the
/// Execution class that owns them. Internal to sim/: only the executor's .cpp files include it
/// (executor.cpp: the per-instant loop; execution_checks.cpp, execution_setup.cpp,
/// fast_forward_proof.cpp, fast_forward_skip.cpp).
#include "sim/executor.hpp"

#include "common/checked.hpp"

#include "sim/engine.hpp"
#include "sim/link_network.hpp"
#include "sim/link_sharing.hpp"
#include "sim/memory_tracker.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

// Hidden: nothing outside the library links to these, and a hidden function cannot be
// interposed, so in a -fPIC build the compiler may still inline the per-instant loop's calls
// within executor.cpp (as it did when they had internal linkage in one file).
namespace lynx::sim {
namespace detail __attribute__((visibility("hidden"))) {

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
inline TimePs ceil_mul_div_time(Int128 a, Int128 b, Int128 divisor) {
  Int128 product = 0;
  if (__builtin_mul_overflow(a, b, &product)) fail(ErrorCode::kTimeOverflow, "simulated time overflow while rescheduling a completion");
  const Int128 quotient = product / divisor + (product % divisor != 0 ? 1 : 0);
  if (quotient > static_cast<Int128>(INT64_MAX)) fail(ErrorCode::kTimeOverflow, "simulated time overflow while rescheduling a completion");
  return static_cast<TimePs>(quotient);
}

/// floor(elapsed * num / den), capped at `cap` (also when the product overflows 128 bits).
inline Int128 progress_capped(TimePs elapsed_ps, Int128 num, Int128 den, Int128 cap) {
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

/// One execution of a program: owns the engine and all dynamic state.
class Execution {
 public:
  Execution(const Machine& machine, const Program& program, const ExecOptions& options)
      : machine_(machine), program_(program), options_(options), network_(link_bandwidths(machine)) {}

  ExecResult run();

 private:
  static std::vector<std::uint64_t> link_bandwidths(const Machine& machine) {
    std::vector<std::uint64_t> bandwidths;
    bandwidths.reserve(machine.links.size());
    for (const LinkDesc& link : machine.links) bandwidths.push_back(link.bw_bytes_per_s);
    return bandwidths;
  }

  // ---- labels for messages ----
  std::string task_label(TaskId t) const;

  // ---- checks ----
  void validate() const;

  /// The checks of one task; build_structure runs them in its pass over the tasks, before it
  /// uses the task (one pass over millions of records, not two).
  void validate_task(std::size_t t) const;

  // ---- static structure, built once ----
  void build_structure();

  void init_state();

  /// Host waits (Program::host_waits): each GPU's in program order, and which end each waits for.
  void init_host_waits();

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
  void end_host_waits_for(TaskId task);

  /// Full-program ids of a compressed program's results (Program::omitted_periods; the
  /// identity for a complete one): GPU g's built task t is full task t + out_task_shift_[g],
  /// its flow f full flow f + out_flow_shift_[g]. Before the omitted periods are inserted the
  /// shifts hold the omitted tasks of the GPUs before g, after it also g's own.
  void init_full_ids();
  std::size_t out_flow(std::uint32_t f, std::uint32_t unit) const {
    if (omitted_ == 0) return f;
    return static_cast<std::size_t>(f + out_flow_shift_[static_cast<std::size_t>(program_.tasks[flow_task(f, unit)].gpu)]);
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

  /// The task of `unit` that flow `f` belongs to (a group's flows are its members').
  TaskId flow_task(std::uint32_t f, std::uint32_t unit) const {
    if (unit < first_group_unit_) return static_cast<TaskId>(unit);
    const UnitMembers members = members_of(unit);
    for (std::uint32_t m = 0; m < members.count; ++m) {
      const Task& task = program_.tasks[static_cast<std::size_t>(members[m])];
      if (f >= task.first_flow && f < task.first_flow + task.num_flows) return members[m];
    }
    fail(ErrorCode::kInternal, "flow {} belongs to no member of unit {}", f, unit);
  }

  UnitParts& parts_of(std::uint32_t unit) {
    return unit < first_group_unit_ ? state_[unit].parts : units_[unit - first_group_unit_].parts;
  }

  // ---- the per-instant work loop ----
  /// Drains tasks that became ready and units that ended at this instant, then sets new
  /// kernel and flow rates once for everything that changed.
  void settle();

  void task_ready(TaskId t) {
    const std::uint32_t unit = state_[static_cast<std::size_t>(t)].unit;
    // A task on its own starts when ready; a group when its last member is.
    if (unit < first_group_unit_ || ++units_[unit - first_group_unit_].ready_members == members_of(unit).count)
      issue_or_wait(unit);
  }

  /// A unit all of whose members are ready starts once its host thread(s) have issued them.
  void issue_or_wait(std::uint32_t unit);

  /// The latest host issue time among a unit's members (0 without a host model).
  TimePs issue_time(std::uint32_t unit) const;

  void start_unit(std::uint32_t unit);

  void part_done(std::uint32_t unit) {
    if (--parts_of(unit).open_parts == 0) ending_.push_back(unit);
  }

  void end_unit(std::uint32_t unit);

  void release(TaskId t) {
    if (ff_) note_touched(t);
    if (--state_[static_cast<std::size_t>(t)].pending == 0) {
      // It starts within this instant: load its record while the rest of the instant runs.
      prefetch_record(&program_.tasks[static_cast<std::size_t>(t)]);
      ready_.push_back(t);
    }
  }

  // ---- memory ----
  void apply_memory(TaskId t, bool at_end);

  // ---- kernels and contention ----
  void mark_dirty(GpuId gpu) {
    GpuState& state = gpus_[static_cast<std::size_t>(gpu)];
    if (!state.dirty) {
      state.dirty = true;
      dirty_gpus_.push_back(gpu);
    }
  }

  void start_kernel(TaskId t, std::uint32_t unit);

  void kernel_done(std::uint32_t index);

  /// Rate of every kernel on a GPU: 1 / (n_k * (1 + c * n_comm)), as kPpm / divisor; with
  /// comm contention, also the rate of every flow it sends: share * kPpm / (kPpm + f * n_k).
  void update_dirty_gpus();

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

  void fire(EventDesc what);

  // ---- flows and links ----
  void start_flow(std::uint32_t f, std::uint32_t unit, GpuId gpu);

  void touch_links(std::span<const LinkId> path) {
    for (const LinkId link : path) {
      if (!link_touched_[static_cast<std::size_t>(link)]) {
        link_touched_[static_cast<std::size_t>(link)] = true;
        touched_links_.push_back(link);
      }
    }
  }

  void flow_bytes_done(std::uint32_t index);

  void flow_done(std::uint32_t f, std::uint32_t unit) {
    result_.flow_end_ps[out_flow(f, unit)] = engine_.now();
    if (ff_) log_flow_end(f, unit);
    if (--parts_of(unit).open_flows == 0) comm_flows_done(unit);
  }

  void comm_flows_done(std::uint32_t unit);

  void reshare_links();

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
  static FlowRate slowed_rate(const FlowRate& share, std::uint64_t divisor);

  /// Moves flow `index` to `rate` now: its bytes so far at the old rate are through, and its
  /// completion is (re)scheduled at the new one. Nothing when the rate is unchanged.
  void set_flow_rate(std::uint32_t index, const FlowRate& rate);

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
  void arm_fast_forward();

  TaskId phi(TaskId t, std::int64_t periods) const {
    return static_cast<TaskId>(t + periods * delta_[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(t)].gpu)]);
  }
  /// The unit of phi^periods of `unit`'s first member: a group's image is the group of its
  /// members' images (same_structure checks that they form one).
  std::uint32_t phi_unit(std::uint32_t unit, std::int64_t periods) const {
    if (periods == 0) return unit;
    return state_[static_cast<std::size_t>(phi(members_of(unit)[0], periods))].unit;
  }
  /// Flow `f` of `unit` moved on by phi^periods: the same flow of its task's image, and that
  /// image's unit.
  struct FlowImage {
    std::uint32_t flow = 0, unit = 0;
  };
  FlowImage phi_flow(std::uint32_t f, std::uint32_t unit, std::int64_t periods) const {
    const TaskId owner = flow_task(f, unit);
    const TaskId image = phi(owner, periods);
    const std::uint32_t k = f - program_.tasks[static_cast<std::size_t>(owner)].first_flow;
    return {program_.tasks[static_cast<std::size_t>(image)].first_flow + k, state_[static_cast<std::size_t>(image)].unit};
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
    const std::uint32_t unit = state_[ti].unit;
    // A group counts its ready members (one of them may have had nothing to wait for).
    return start_of(t) < 0 && state_[ti].pending == initial_pending(t) &&
           (unit < first_group_unit_ || units_[unit - first_group_unit_].ready_members == 0);
  }
  void note_touched(TaskId t) {
    TaskId& hi = hi_[static_cast<std::size_t>(program_.tasks[static_cast<std::size_t>(t)].gpu)];
    hi = std::max(hi, t);
  }
  void log_flow_end(std::uint32_t f, std::uint32_t unit) {
    if (anchors_.empty()) return;  // the log is kept from the first anchor on
    const TaskId task = flow_task(f, unit);
    log_.push_back({engine_.now(), task, 2 + (f - program_.tasks[static_cast<std::size_t>(task)].first_flow)});
  }

  /// Tasks touched (released or started) and not ended, in id order.
  void collect_frontier(std::vector<TaskId>& out);

  /// The canonical snapshot; every task id t is written as phi^periods(t) (0: t itself).
  void encode(const std::vector<TaskId>& frontier, std::int64_t periods, std::vector<std::int64_t>& out) const;

  void checkpoint();

  /// Whether task b = phi(a) does, for the executor, exactly what a does, phi-shifted.
  bool same_structure(TaskId a, TaskId b) const;

  /// The state now equals the snapshot at `back`, `cycle` periods ago, shifted by phi^cycle:
  /// skips as many whole cycles as proven. A cycle of k periods is proven as one period of k
  /// times the tasks (phi^k is phi with k·delta_): the proof below never looks at the anchors
  /// in between, so it holds for any k.
  void try_skip(std::int64_t cycle, const Anchor& back);

  void prove_and_skip(TimePs period_ps, const std::vector<TaskId>& previous_frontier);

  /// Skips `periods` periods of length `period_ps`: writes their task and flow times and moves
  /// the state on. `insert`: periods a compressed program omitted (their flow times in
  /// full-program ids, their task times as ExecResult::inserted; the state keeps its built
  /// task ids), else built ones (the state moves to their images).
  void apply_skip(std::int64_t periods, TimePs period_ps, bool insert);

  /// ExecResult::periodic_tasks of inserted periods (before the shifts move on): on each GPU
  /// whose period log holds one start and one end of every residue of its task ids modulo the
  /// period, a full task x in [largest logged id + d, smallest logged id + periods·d] (+ the
  /// GPU's shift) is the image j >= 1 of the logged task of its residue, and x - d its image
  /// j - 1 (the logged task itself for j = 1), so x's times are x - d's plus one period.
  void record_periodic_ranges(std::int64_t periods, TimePs period_ps);

  /// ExecResult::inserted, from the period log (before the shifts move on).
  void record_inserted(std::int64_t periods, TimePs period_ps);

  // ---- results and diagnostics ----
  void finish_result();

  /// Every unfinished task waits on another unfinished one, so following "waits on" edges from
  /// any of them must revisit a task: that task lies on the cycle, and the error names it.
  [[noreturn]] void report_stuck() const;

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

  // steady-state fast-forward (armed only with a period hint and no host waits)
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

}  // namespace detail
}  // namespace lynx::sim
