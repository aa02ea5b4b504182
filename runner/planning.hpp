#pragma once
/// The plan-and-confirm loop of lynx-heu, lynx-opt and checkmate, the engine side of planning
/// (strategies/ decides, runner/ simulates): a keep-everything baseline measures the windows;
/// the planner searches; the engine confirms (a stage that overflows in simulation has its
/// budget cut by the overflow and the search runs again, at most 3 rounds); then the engine
/// compares the plan with the planner's narrower alternatives and keeps the fastest that fits.
/// With sim.fast_screening (exact mode), the searched plan and its alternatives are first
/// simulated in fast mode: a searched plan fast mode shows fitting is not confirmed separately,
/// fast mode's winner runs in the engine (the final run, reported as it is), and every other
/// candidate runs only when fast mode's error bound leaves it a chance to beat it. So a plan
/// costs two engine runs (baseline, final) plus one per candidate within the bound (plus one per
/// round whose memory fast mode cannot vouch for). In fast mode every run is a fast-mode run.
#include "fast/compose.hpp"
#include "hw_models/topology.hpp"
#include "model/workload.hpp"
#include "runner/engine_runs.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/lynx_planner.hpp"

#include <cstddef>
#include <cstdint>

namespace lynx::runner {

/// What planning chose and what it cost.
struct PlanningResult {
  strategies::PlannerOutput planner;  ///< plan = the winner, named by what it is (see fallback)
  std::size_t winner = 0;           ///< its run in the EngineRuns used
  std::size_t baseline = 0;         ///< the baseline's run there
  double search_seconds = 0;        ///< wall time of the planner's decisions (all rounds, alternatives)
  double baseline_seconds = 0;      ///< the baseline run and the window measurement
  double confirm_seconds = 0;       ///< every other engine run (confirmations, alternatives, the winner's)
  int fast_screened = 0;            ///< candidates fast mode showed cannot win (never run exactly)
};

/// Fast mode's iteration time is within this fraction of exact mode's: the bound
/// tests/fast/test_agreement.cpp holds on every configuration of both committed agreement sets
/// (it fails above it; the PCIe set it holds at 0.75%). Measured there: worst 0.57% (PCIe,
/// gpt-22b tp2 pp16 dp2 gpipe selective, -0.566%), NVLink 0.37% (BENCHMARKS.md, "Fast mode:
/// agreement with exact mode"); eight PCIe layouts drawn outside the set reached 0.96%, so the
/// margin under this bound is thinner off the set.
inline constexpr double kFastModeErrorBound = 0.01;

/// Fast mode's peak memory of a plan with overlapped (lynx) recomputation is within this
/// fraction of exact mode's (its allocation times depend on the timeline); without overlapped
/// recomputation it is equal. tests/fast/test_agreement.cpp checks it on the agreement sets:
/// measured, the two were equal (error below 1e-8) on all 69 lynx-heu configurations there
/// (build/bench/fast_bench --agreement). Planned lynx plans fill memory to within ~0.3% of capacity
/// (nvlink-gpt-13b: 0.26%), so a bound looser than that could never vouch that one fits.
inline constexpr double kFastModeMemoryBound = 0.001;

/// Whether exact mode's peak memory of `plan` fits `memory_bytes` (0: unlimited) on every stage,
/// given fast mode's result `f` for it and kFastModeMemoryBound.
bool surely_fits(const fast::FastResult& f, const strategies::RecomputePlan& plan, std::uint64_t memory_bytes);

/// Whether an alternative whose fast-mode result is (`fast_makespan_ps`, `fast_oom`) can be
/// skipped against the best exact run (`best_makespan_ps`, `best_oom`): it is slower than the
/// best by more than the error bound, or fast mode shows it out of memory while `memory_exact`
/// (fast mode's peak equals exact mode's for plans without overlapped recomputation).
bool cannot_win(TimePs fast_makespan_ps, bool fast_oom, bool memory_exact, TimePs best_makespan_ps,
                bool best_oom);

/// Plans sc.recompute.strategy (lynx-heu, lynx-opt or checkmate; `sc` resolved) with every
/// engine run made through `runs` (fresh: its runs are all counted as this planning's). Candidates identical to a plan already run reuse its run;
/// ties keep the earlier candidate (the searched plan first). `show_progress`: a bar per
/// search's stage solves when they take more than a second.
PlanningResult plan_and_confirm(const Scenario& sc, const hw_models::Topology& topo,
                                const model::Workload& workload, EngineRuns& runs,
                                bool show_progress);

}  // namespace lynx::runner
