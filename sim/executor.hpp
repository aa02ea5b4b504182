#pragma once
/// Runs a Program on a Machine in simulated time with the event Engine: stream FIFOs,
/// cross-stream/cross-GPU dependencies, collective rendezvous, kernel contention,
/// fair-shared links and per-GPU memory tracking.
#include "sim/program.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace lynx::sim {

struct ExecOptions {
  bool record_memory_timeline = false;  ///< keep (time, bytes) samples per GPU for the trace
  /// Keep every task start and end in the order the executor processed them
  /// (ExecResult::event_order; live mode replays it). Off fast_forward while on.
  bool record_event_order = false;
  /// Skip steady-state periods once the executor's state provably repeats (the program's
  /// period hint, Program::period_tasks_per_gpu): every result but `events` and `fingerprint`
  /// is unchanged. Off while record_memory_timeline is on.
  bool fast_forward = true;
  /// Called with (tasks ended, tasks in the program) every kProgressTasks ended tasks (progress
  /// bars of long runs); empty: not called.
  std::function<void(std::size_t ended, std::size_t total)> on_progress;
  static constexpr std::size_t kProgressTasks = 4096;
};

/// Per-task entries are indexed by the program's task ids, per-flow entries by the full
/// program's flow ids: for a compressed program (Program::omitted_periods > 0) flows include
/// the omitted periods, and the full program's task times are read through sim::FullProgram
/// (`inserted`).
struct ExecResult {
  TimePs makespan_ps = 0;                ///< end of the last task
  std::vector<TimePs> task_start_ps;     ///< per (built) task
  std::vector<TimePs> task_end_ps;       ///< per (built) task
  std::vector<TimePs> flow_end_ps;       ///< per flow (a flow starts with its task)
  std::vector<std::int64_t> peak_bytes;  ///< per GPU, static bytes included
  std::vector<TimePs> first_oom_ps;      ///< per GPU: first time usage exceeded capacity, -1 if never
  std::uint64_t events = 0;              ///< engine events processed (skipped periods' included)
  std::uint64_t skipped_periods = 0;     ///< steady-state periods the fast-forward skipped
  /// Periods in the repeating cycle the fast-forward skipped (skipped_periods is a multiple of
  /// it): 1 where the state repeats every period, up to 4 where it repeats every few (the
  /// micro-batch load's broadcasts on some pipelines: every two); 0 when nothing was skipped.
  std::int64_t skip_cycle_periods = 0;
  /// False only for a compressed program (Program::omitted_periods) whose omitted periods the
  /// executor could not insert (no period proven, or fast_forward off): the results are then
  /// not the full program's, and the caller must execute the full program.
  bool complete = true;
  /// A compressed program's omitted periods, inserted (nothing otherwise). Built task t's
  /// times are those of the full task it stood for: t + (the omitted tasks of the GPUs before
  /// its own, in id order) for times up to inserted_at_ps, that plus its GPU's omitted tasks
  /// for later ones; the omitted tasks' times are a logged period's moved on by whole periods.
  /// sim::FullProgram::start_ps / end_ps read them all in full-program ids.
  struct InsertedPeriods {
    std::int64_t periods = 0;  ///< 0: none inserted
    TimePs period_ps = 0;
    TimePs inserted_at_ps = 0;
    /// A task's start or end logged in the period (task -1: none).
    struct Logged {
      TaskId task = -1;
      TimePs time_ps = -1;
      std::int64_t last = 0;  ///< the last period it is copied to (periods, or more when the log has it twice)
    };
    /// Per GPU, then per residue r = (built id - the GPU's first built id) mod its period:
    /// the first logged start (end) of that residue. Full task x of the residue, as built id
    /// t = x - the omitted tasks before its GPU, has its time j·period_ps later when t is j in
    /// [1, last] periods after the logged task.
    std::vector<std::size_t> first_residue;  ///< per GPU, into starts and ends
    std::vector<Logged> starts, ends;
  };
  InsertedPeriods inserted;
  /// Where inserted periods repeat (a compressed program whose omitted periods were inserted;
  /// empty otherwise): per GPU, every full-program task x in [first, end) started and ended
  /// period_ps after task x - period_tasks. Readers of every task (the runner's breakdown,
  /// schedule::compute_stream_gaps) take such a period's results from the one before.
  struct PeriodicRange {
    TaskId first = 0, end = 0;  ///< full-program ids; empty when end <= first
    TaskId period_tasks = 0;
  };
  std::vector<PeriodicRange> periodic_tasks;  ///< per GPU
  TimePs period_ps = 0;
  /// Whether full-program tasks [first, end) of `gpu` all repeat the period before (see
  /// periodic_tasks).
  bool repeats_previous_period(GpuId gpu, TaskId first, TaskId end) const {
    if (static_cast<std::size_t>(gpu) >= periodic_tasks.size()) return false;
    const PeriodicRange& r = periodic_tasks[static_cast<std::size_t>(gpu)];
    return first < end && first >= r.first && end <= r.end;
  }
  /// Hash of the engine's (time, sequence) event stream and of every task start and end
  /// (time, task): equal for two runs that did the same thing (sim/fingerprint.hpp).
  std::uint64_t fingerprint = 0;
  /// Per GPU (only with record_memory_timeline): (time, bytes in use) after every change.
  std::vector<std::vector<std::pair<TimePs, std::int64_t>>> memory_timeline;
  /// Only with record_event_order: task << 1 for a start, (task << 1) | 1 for an end, in the
  /// order they were processed (memory effects were applied in this order).
  std::vector<std::int64_t> event_order;
};

// Execution semantics (sim/executor.cpp):
// - A task starts when its deps ended and the previous task of its (gpu, stream) ended; tasks
//   of one collective group (group >= 0) start together once all members are ready.
// - kKernel: work_ps of solo time at rate 1 / (n_k * (1 + c * n_comm)) on its GPU, n_k = running
//   kKernel tasks, n_comm = running kComm tasks, c = contention_factor (quantised to 1e-6).
//   kComm tasks slow kernels while they run (start to end).
// - kComm: its flows start with it; a flow's rate is its bottleneck fair share
//   (min over its links of bw / flows on the link, sim/link_sharing.hpp), divided by
//   (1 + f * n_k) with f = the sending GPU's comm_contention (quantised to 1e-6) and n_k its
//   running kKernel tasks with work (the GPU of the comm task the flow belongs to: the receiver's
//   kernels do not count; a program records a flow on its sender only). Rates change whenever
//   shares or n_k change; f = 0 (the default) is the rule without the division. A flow ends
//   when its bytes are through plus its path latency (the latency is not slowed). The task (or its whole group) ends when the last
//   flow ended plus work_ps (the largest work_ps of the group's comm members).
//   A flow of 0 bytes or with no links takes only its path latency.
// - kMarker: zero time (work_ps must be 0). Only kComm tasks may carry flows.
// - Memory: MemEffects at start, then at end; GpuDesc::memory_capacity_bytes == 0 means "no
//   limit". A group's members all start and end at the group's times; a kKernel member's work
//   also has to finish before the group ends.
// - Determinism: integer arithmetic only, events ordered by (time, insertion sequence).

/// Executes `program`; throws lynx::Error on a malformed program (bad ids, a dependency cycle
/// that leaves tasks unfinished, a negative balance on a memory tag).
ExecResult execute(const Machine& machine, const Program& program, const ExecOptions& options = {});

/// An interval to show on a GPU's "annotations" track (e.g. an overlap window).
struct TraceSpan {
  GpuId gpu = 0;
  std::string name;
  TimePs start_ps = 0;
  TimePs end_ps = 0;
};

/// What write_chrome_trace writes; it never changes what was simulated.
struct TraceOptions {
  /// Per GPU: whether to write its tracks (empty: every GPU). A link slice belongs to the GPU
  /// of the task that sent its flow.
  std::vector<bool> gpus;
  /// Only slices overlapping [from_ps, to_ps] (kept whole), instants and counter samples inside
  /// it; the memory counter also gets its value at from_ps.
  TimePs from_ps = 0;
  TimePs to_ps = std::numeric_limits<TimePs>::max();
  /// (key, text) pairs, in order: the top-level "metadata" object (chrome://tracing) and the
  /// arguments of a "lynxsim" instant event at from_ps (Perfetto shows them when clicked).
  std::vector<std::pair<std::string, std::string>> metadata;
};

/// Chrome-trace / Perfetto JSON: one track per GPU stream, link tracks, a memory counter per
/// GPU (needs record_memory_timeline), and `annotations` on extra tracks per GPU. Timestamps in
/// microseconds. Slices on one track never partially overlap (Perfetto requires it): a link's
/// concurrent flows, and overlapping annotations, go to lane tracks ("LINK lane K"), assigned
/// greedily (lowest free lane, by start time), so equal inputs give equal bytes.
/// Link slice arguments: task, flow, payload `bytes` and, for flows of a collective efficiency
/// below 1, `efficiency` (the link moved ceil(bytes / efficiency), which set the timing).
void write_chrome_trace(std::ostream& out, const Machine& machine, const Program& program,
                        const ExecResult& result, const std::vector<TraceSpan>& annotations = {},
                        const TraceOptions& options = {});

}  // namespace lynx::sim
