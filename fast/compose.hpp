#pragma once
/// Fast mode's iteration: the pipeline schedule composed from cached step profiles as a
/// critical path over the schedule's order, with pipeline sends queued on each stage's pp
/// stream (or exchanged as Megatron's blocking _communicate does), the contention their communication adds to the kernels they overlap, the gradient
/// all-reduces and the optimizer step; memory from the steps' effects in schedule order.
#include "fast/step_cache.hpp"

#include <cstdint>
#include <vector>

namespace lynx::fast {

/// One pipeline stage's share of the iteration (ps), as exact mode's per-stage breakdown.
struct FastStage {
  TimePs compute_ps = 0, recompute_ps = 0, recompute_overlapped_ps = 0, contention_ps = 0;
  TimePs tp_exposed_ps = 0, pp_exposed_ps = 0, dp_exposed_ps = 0, bubble_ps = 0;
  std::int64_t peak_memory_bytes = 0;
  std::int64_t static_memory_bytes = 0;
  bool oom = false;
};

/// One step of the composed timeline, for diagnostics (fast_bench --timeline prints them to
/// compare with exact mode's trace): times from the iteration's start (ps).
struct FastStep {
  int micro_batch = 0, chunk = 0;
  bool forward = true;
  TimePs start_ps = 0, compute_end_ps = 0;
  TimePs send_start_ps = -1, send_end_ps = -1;  ///< -1: it sends nothing
  TimePs foreign_ps = 0;  ///< the delay charged for other stages' sends (channel delays)
  TimePs delta_ps = 0;    ///< everything the composition added to the profile's compute end
  bool beside_previous = false;  ///< timed with the profile simulated after its predecessor
};

struct FastResult {
  TimePs makespan_ps = 0;
  std::vector<FastStage> stages;
  double executed_flops = 0;  ///< per iteration, every GPU
  bool symmetric = false;     ///< the step programs used the reduced (one rank per stage) form
  std::size_t steps = 0;      ///< pipeline steps composed
  /// With measure_windows: the lynx planners' window capacities, as
  /// schedule::measure_window_capacity and measure_forward_window_capacity give them on an
  /// exact run (per virtual stage).
  std::vector<std::vector<TimePs>> window_capacity;
  std::vector<TimePs> forward_window_capacity;
  /// With record_timeline: per stage, its composed steps in schedule order (the last pass).
  std::vector<std::vector<FastStep>> timeline;
};

/// Whether fast mode can simulate `p`'s schedule: every schedule but ZB-H1, whose deferred
/// weight-gradient passes are not whole pipeline steps.
inline bool supports_schedule(const ParallelSpec& p) { return p.schedule != ScheduleKind::kZbH1; }

/// Whether fast mode is held to its error bound on `hw` (the planners' screening trusts it):
/// not with gpu.comm_contention > 0, which fast mode models only inside each step's own engine
/// run (a step's flows slowed by its own kernels), not across the composed iteration (a send or
/// gradient all-reduce slowed by the kernels of the step it overlaps); no agreement set checks it.
inline bool within_error_bound(const HardwareSpec& hw) { return hw.comm_contention == 0.0; }

/// Simulates one iteration of `plan` in fast mode; `cache` holds (and receives) step profiles
/// and the cluster topology. `measure_windows`: also the planners' window capacities;
/// `record_timeline`: also the composed steps (FastResult::timeline).
FastResult simulate_fast(const Scenario& sc, const strategies::RecomputePlan& plan,
                         const model::Workload& workload, StepCache& cache, bool measure_windows = false,
                         bool record_timeline = false);

}  // namespace lynx::fast
