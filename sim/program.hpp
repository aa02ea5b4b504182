#pragma once
/// The contract between schedules (which build programs) and the executor (which runs them).
/// A Program is a flat task DAG over GPUs, their named streams and one-directional links.
/// It knows nothing about transformers: a task is a kernel, a communication or a marker.
#include "sim/time.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace lynx::sim {

using GpuId = std::int32_t;
using StreamId = std::int32_t;  ///< index into GpuDesc::stream_names
using LinkId = std::int32_t;    ///< index into Machine::links
using TaskId = std::int32_t;    ///< index into Program::tasks
using TagId = std::uint16_t;    ///< index into Program::tags (memory tags, e.g. "act/attn_core")

/// One GPU: its streams (from configuration, not hard-coded) and how kernels share it.
struct GpuDesc {
  std::string name;                        ///< trace label, e.g. "stage3"
  std::vector<std::string> stream_names;   ///< e.g. {"compute","tp","pp","dp","recompute"}
  std::uint64_t memory_capacity_bytes = 0; ///< OOM is recorded (not thrown) above this
  /// Each communication kernel running beside a compute kernel slows it by this fraction:
  /// rate = 1 / (n_compute_kernels * (1 + contention_factor * n_comm_kernels)).
  double contention_factor = 0.0;
  /// Each compute kernel running on this GPU slows every flow this GPU's comm tasks send by this
  /// fraction: flow rate = fair share / (1 + comm_contention * n_compute_kernels). 0: flows are
  /// never slowed by kernels (sim/executor.hpp, "Execution semantics").
  double comm_contention = 0.0;
};

/// A link's name, shared by the copies of a machine rather than copied: fast mode builds a
/// machine of every link of the cluster for each step it simulates. Reads as a string.
class LinkName {
 public:
  LinkName() = default;
  LinkName(std::string name) : name_(std::make_shared<const std::string>(std::move(name))) {}  // NOLINT: a name
  LinkName(const char* name) : LinkName(std::string(name)) {}  // NOLINT: a name
  const std::string& str() const { return name_ ? *name_ : empty(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads as a string
  operator std::string_view() const { return str(); }    // NOLINT: reads as a string
  friend bool operator==(const LinkName& a, std::string_view b) { return a.str() == b; }

 private:
  static const std::string& empty() {
    static const std::string none;
    return none;
  }
  std::shared_ptr<const std::string> name_;
};

/// One-directional link (full duplex = two links); bandwidth shared by its concurrent flows.
struct LinkDesc {
  LinkName name;
  std::uint64_t bw_bytes_per_s = 0;
  TimePs latency_ps = 0;  ///< added once per flow, after its bytes are through
};

struct Machine {
  std::vector<GpuDesc> gpus;
  std::vector<LinkDesc> links;
};

enum class TaskKind : std::uint8_t {
  kKernel,  ///< occupies SMs for work_ps of solo time, slowed by concurrent kernels
  kComm,    ///< moves its flows over links; also a kernel for contention (NCCL uses SMs)
  kMarker,  ///< zero-time synchronisation point (e.g. "iteration start")
};

/// What the time of a task counts as in the per-stage breakdown.
enum class Category : std::uint8_t {
  kCompute, kRecompute, kRecomputeOverlapped, kTpComm, kPpComm, kDpComm, kOptimizer, kOther,
  kCpComm,  ///< context parallelism's ring-attention transfers
};

/// Bytes over a path of links; the path is Program::path_links[first_link, +num_links).
struct Flow {
  std::uint64_t bytes = 0;  ///< what the links move (sets the timing)
  std::uint32_t first_link = 0;
  std::uint32_t num_links = 0;
  /// Trace metadata only (the executor ignores both): the data the flow carries and the
  /// collective efficiency that inflated it to `bytes` = ceil(payload_bytes / efficiency).
  /// payload_bytes == 0 means "equal to bytes".
  std::uint64_t payload_bytes = 0;
  double efficiency = 1.0;
};

/// A memory change applied when a task starts (alloc, bytes > 0) or ends (free, bytes < 0).
struct MemEffect {
  std::int64_t bytes = 0;
  TagId tag = 0;
  bool at_end = false;  ///< false: applied at task start; true: at task end
};

// Field order keeps the struct at 56 bytes (no padding holes): millions of tasks per program.
struct Task {
  /// kKernel: solo duration. kComm: fixed latency added after all its flows complete.
  TimePs work_ps = 0;
  GpuId gpu = 0;
  StreamId stream = 0;
  std::uint32_t name = 0;      ///< index into Program::names (trace label)
  std::uint32_t instance = 0;  ///< index into Program::instances: label prefix (e.g. "mb3.L12.")
  /// Collective rendezvous: tasks with the same group >= 0 start together once all are ready,
  /// and end together when the last member's flows are done.
  std::int32_t group = -1;
  std::uint32_t first_dep = 0, num_deps = 0;  ///< Program::deps: tasks that must end first
  std::uint32_t first_flow = 0, num_flows = 0;
  std::uint32_t first_mem = 0, num_mem = 0;
  TaskKind kind = TaskKind::kKernel;
  Category category = Category::kCompute;
};

/// Tasks on one (gpu, stream) run in the order they appear in `tasks` (CUDA stream FIFO);
/// cross-stream and cross-GPU ordering is explicit in deps (CUDA events).
struct Program {
  std::vector<Task> tasks;
  std::vector<TaskId> deps;
  std::vector<Flow> flows;
  std::vector<LinkId> path_links;
  std::vector<MemEffect> mem;
  std::vector<std::string> names;
  /// Prefixes shared by many tasks (which micro-batch and layer), so names stay few and short;
  /// empty, or instances[0] = "" for tasks without one.
  std::vector<std::string> instances;
  std::vector<std::string> tags;
  /// Bytes resident on each GPU before the first task (weights, grads, optimizer state).
  std::vector<std::int64_t> static_bytes_per_gpu;
  /// Optional hint for the executor's steady-state fast-forward: per GPU, the task ids one
  /// period (one 1F1B micro-batch) spans, and tasks whose starts begin periods, in start order.
  /// Empty: no hint. The executor proves every skip itself; a wrong hint only costs the skip.
  std::vector<TaskId> period_tasks_per_gpu;
  std::vector<TaskId> period_anchors;  ///< see period_tasks_per_gpu
  /// Steady-state compression (schedule::build_program): the builder left out this many
  /// periods of every GPU's steady state (period_tasks_per_gpu[g] tasks and
  /// period_flows_per_gpu[g] flows each). The executor inserts them once it has proven the
  /// built periods repeat, and reports the full program's results (full-program task and flow
  /// ids, sim::FullProgram); where it cannot, ExecResult::complete is false. 0: complete.
  std::int64_t omitted_periods = 0;
  std::vector<std::uint32_t> period_flows_per_gpu;
  /// Per GPU, with omitted periods: the full program has them just before built task
  /// period_cut_per_gpu[g] (any steady-state place gives the same program), and a dependency
  /// on a built task from periodic_from_per_gpu[g] on moves with the periods (sim::FullProgram).
  std::vector<TaskId> period_cut_per_gpu;
  std::vector<TaskId> periodic_from_per_gpu;
  /// Per task, its host issue time: the earliest it may start (its GPU's host thread issues
  /// tasks in program order). Empty: every task is issued at time 0 (no host model).
  std::vector<TimePs> issue_ps;
  /// Host synchronisations (with issue_ps): before issuing task `resume` its GPU's host thread
  /// blocks until task `until` has ended (PyTorch's `.item()` / `.cpu()` of a GPU result), so
  /// its issue clock becomes max(the clock, that end) and goes on from there: `resume` and every
  /// later task of the GPU are issued that much later than issue_ps says. `host_before_ps`: the
  /// built clock just before `resume`'s issue. Per GPU in program (id) order.
  struct HostWait {
    TaskId resume = -1;
    TaskId until = -1;
    TimePs host_before_ps = 0;
  };
  std::vector<HostWait> host_waits;
};

/// Appends a flow of `bytes` over `path` (its links copied to path_links); the caller counts it
/// in its task's num_flows.
inline void append_flow(Program& program, const std::vector<LinkId>& path, std::uint64_t bytes) {
  Flow flow;
  flow.bytes = bytes;
  flow.first_link = static_cast<std::uint32_t>(program.path_links.size());
  flow.num_links = static_cast<std::uint32_t>(path.size());
  program.path_links.insert(program.path_links.end(), path.begin(), path.end());
  program.flows.push_back(flow);
}

/// A task's full label: its instance prefix and its name ("mb3.L12.qkv_gemm_dgrad").
inline std::string task_label(const Program& program, TaskId task) {
  const Task& t = program.tasks[static_cast<size_t>(task)];
  std::string label = t.instance < program.instances.size() ? program.instances[t.instance] : "";
  label += t.name < program.names.size() ? program.names[t.name] : "task " + std::to_string(task);
  return label;
}

/// Asks the kernel to back a large array's capacity with transparent huge pages (Linux with
/// THP "madvise" or "always"; elsewhere nothing). The program and executor arrays are tens of MB
/// written once: on the GPT-1T step their 4 KiB page faults were ~18% of the CPU time. Call it
/// after reserving and before writing. Memory placement only: no effect on any result.
template <typename T>
void advise_huge_pages(const std::vector<T>& v) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHugePageBytes = std::uintptr_t{2} << 20;
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t end = begin + v.capacity() * sizeof(T);
  const std::uintptr_t first = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const std::uintptr_t last = end & ~(kHugePageBytes - 1);
  // Only whole huge pages inside the array: advising a page shared with other allocations
  // would be harmless but could back them too. A failure only leaves 4 KiB pages.
  if (first < last) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)v;
#endif
}

}  // namespace lynx::sim

template <>
struct fmt::formatter<lynx::sim::LinkName> : fmt::formatter<std::string_view> {
  auto format(const lynx::sim::LinkName& n, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(n.str(), ctx);
  }
};
