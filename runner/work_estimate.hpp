#pragma once
/// The size of a simulation, estimated from the scenario before anything is built, so that a
/// run which cannot finish (too many tasks for sim.max_tasks, more memory than the machine has)
/// is refused up front with its estimate instead of ending in bad_alloc.
#include "scenarios/scenario.hpp"

#include <cstdint>

namespace lynx::runner {

/// Tasks ≈ simulated GPUs × micro-batches × ops per GPU per micro-batch × passes.
struct WorkEstimate {
  std::int64_t simulated_gpus = 0;   ///< pp with the symmetry reduction, else tp · pp · dp
  std::int64_t micro_batches = 0;    ///< per pipeline per iteration
  std::int64_t ops_per_gpu = 0;      ///< layers/pp × ops per layer, + embedding and head ops
  std::int64_t tasks = 0;            ///< all four multiplied, × kTasksPerOp
  std::int64_t gpus_in_topology = 0; ///< tp · pp · dp: the link graph has every GPU used
  std::int64_t bytes = 0;            ///< tasks × kBytesPerTask + GPUs × kTopologyBytesPerGpu
};

/// Engine tasks per op and micro-batch: forward, backward (dgrad + wgrad), and recompute —
/// 2.7 measured with selective recomputation on GPT-175B (1024 GPUs, full and symmetric).
inline constexpr std::int64_t kTasksPerOp = 3;
/// Memory per task while a run is built and executed (program, dependencies, flows, memory
/// effects, results, engine queue): 163-183 B measured on GPT-175B with 0.8M and 4.5M tasks,
/// rounded up for the planners, which keep a baseline run next to the one they build.
inline constexpr std::int64_t kBytesPerTask = 256;

/// CPU time per task (build + execute): 6.9 s for 4.5M tasks on GPT-175B, 1024 GPUs, rounded up.
inline constexpr double kCpuSecondsPerTask = 2e-6;

/// Memory per GPU of the link graph (vertices, links with their names, mirror tables): 2.1 and
/// 2.3 KiB measured with 8192 and 131072 GPUs (tp 8, dp = nodes), rounded up.
inline constexpr std::int64_t kTopologyBytesPerGpu = 2560;

/// The estimate for `sc` (resolved); `one_gpu_per_stage`: the symmetry reduction applies.
WorkEstimate estimate_work(const Scenario& sc, bool one_gpu_per_stage);

/// Memory this process may use: physical memory, or less under an address-space rlimit.
std::uint64_t usable_memory_bytes();

/// Throws lynx::Error, naming the scenario file and sim.max_tasks (or the memory), when the
/// estimate exceeds sc.sim.max_tasks or usable_memory_bytes().
void check_work_bounded(const Scenario& sc, bool one_gpu_per_stage);

}  // namespace lynx::runner
