#pragma once
/// One simulated training iteration of a scenario: builds the workload, the recomputation plan
/// and the per-GPU programs, runs them on the event engine, and derives the metrics users read.
#include "model/resolved_scenario.hpp"
#include "scenarios/scenario.hpp"
#include "sim/executor.hpp"
#include "strategies/lynx_planner.hpp"
#include "schedule/program_builder.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lynx::runner {

/// Where one pipeline stage's iteration time went (seconds, from its compute stream).
struct StageBreakdown {
  int stage = 0;
  double compute_s = 0;          ///< forward + backward kernels (and optimizer)
  double recompute_s = 0;        ///< recompute on the compute stream (exposed)
  double recompute_overlapped_s = 0;  ///< recompute on the recompute stream (hidden or not)
  double tp_exposed_s = 0;       ///< compute stream idle waiting on TP collectives
  double pp_exposed_s = 0;       ///< ... waiting on pipeline transfers (their transfer time)
  double dp_exposed_s = 0;       ///< ... waiting on gradient all-reduce before the optimizer
  double bubble_s = 0;           ///< the rest of the idle time (pipeline fill/drain, imbalance)
  /// Part of compute_s + recompute_s that the compute stream's kernels spent beyond their solo
  /// time: SM sharing with communication kernels and overlapped recompute (the cost of overlap).
  double contention_s = 0;
  std::int64_t peak_memory_bytes = 0;
  std::int64_t static_memory_bytes = 0;
  bool oom = false;
};

struct SimResult {
  Scenario scenario;                  ///< as resolved (model preset filled in)
  /// The plan that ran: recompute.strategy (or the --plan file's name) when its plan ran, else
  /// the planner's fallback that the engine found faster: "no-forward-windows", "no-overlap",
  /// "selective" or "full".
  std::string strategy;
  std::string strategy_requested;      ///< recompute.strategy as asked (or the --plan file's)
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double model_flops = 0;             ///< per iteration, model::model_flops_per_iteration
  double executed_flops = 0;          ///< per iteration, from the simulated kernels
  double tflops_per_gpu = 0;          ///< model FLOPs / time / GPUs / 1e12
  double mfu = 0;
  double hfu = 0;
  bool oom = false;
  int oom_stage = -1;                 ///< first stage whose peak exceeds the GPU memory
  int gpus = 0;
  int micro_batches = 0;              ///< per pipeline (global batch / micro batch / dp)
  bool symmetric = false;             ///< reduced simulation used
  std::vector<int> layers_per_stage;  ///< per virtual stage (partition)
  // Wall times. Every engine run (build + execute) is counted once, in baseline_seconds or
  // confirm_seconds; planning time = search_seconds + baseline_seconds + confirm_seconds.
  double search_seconds = 0;    ///< planner decisions: options, every search round, alternatives
  double solver_gap = 0;        ///< largest relative MILP gap over stages (0 = optimal)
  bool solver_limit_bound = false;  ///< the MILP node limit stopped some stage's search
  /// The run reported here alone (for planned strategies also part of confirm_seconds, or of
  /// baseline_seconds when the keep-everything baseline's run was the winner's).
  double simulate_seconds = 0;
  double baseline_seconds = 0;  ///< the keep-everything baseline run and its window measurement
  /// Every other engine run of planning: each confirmation round, each alternative that was not
  /// identical to a plan already run, and so the reported run (it is not run again).
  double confirm_seconds = 0;
  /// sim::execute calls made for this result: 1 for fixed strategies and --plan; planners:
  /// baseline + confirmation rounds + alternatives whose decisions differ from every earlier run.
  int engine_runs = 0;
  /// Planners' alternatives that fast mode showed cannot win (sim.fast_screening): not run.
  int fast_screened_runs = 0;
  std::uint64_t events = 0;
  std::uint64_t tasks = 0;
  std::uint64_t event_fingerprint = 0;  ///< of the final run's event stream (sim/fingerprint.hpp)
  std::vector<StageBreakdown> stages;
};

struct SimOptions {
  bool keep_trace_data = false;  ///< keep the program and timelines for write_trace
  /// Also keep the order of task starts and ends (sim::ExecOptions::record_event_order).
  bool record_event_order = false;
  /// Progress bars on stderr for planner searches and engine runs longer than a second, when
  /// stderr is a terminal (single runs from the command line; off for tests and batches).
  bool progress = false;
  /// Run this plan instead of planning (`lynxsim run --plan`); its strategy name is reported.
  const strategies::RecomputePlan* plan = nullptr;
};

/// One engine run made for a result, in the order they ran.
struct EngineRunSummary {
  std::string plan;                ///< its plan's strategy ("none" for a planner's baseline)
  std::uint64_t fingerprint = 0;   ///< of its event stream
  TimePs makespan_ps = 0;
  bool oom = false;
  double seconds = 0;              ///< build + execute wall time
};

/// Everything a run produced, when the caller wants the trace too.
struct SimRun {
  SimResult result;
  strategies::RecomputePlan plan;     ///< the plan reported (result.strategy is its name)
  strategies::PlannerOutput planner;  ///< filled for planned strategies
  schedule::BuiltProgram built;     ///< the reported run's (emptied unless keep_trace_data)
  sim::ExecResult exec;
  std::vector<EngineRunSummary> engine_runs;  ///< every engine run; size = result.engine_runs
  std::size_t reported_run = 0;               ///< the one whose result is reported
};

/// Plans, builds and executes a resolved scenario. An out-of-memory plan is a result
/// (oom = true), not an error.
SimRun simulate(const model::ResolvedScenario& resolved, const SimOptions& options = {});

/// The overlap windows of a kept run, as trace annotations.
std::vector<sim::TraceSpan> trace_annotations(const SimRun& run);

}  // namespace lynx::runner
