#pragma once
/// The plan-and-confirm loop of lynx-heu, lynx-opt and checkmate, the engine side of planning
/// (strategies/ decides, runner/ simulates): a keep-everything baseline measures the windows;
/// the planner searches; the engine confirms (a stage that overflows in simulation has its
/// budget cut by the overflow and the search runs again, at most 3 rounds); then the engine
/// compares the plan with the planner's narrower alternatives and keeps the fastest that fits.
#include "hw_models/topology.hpp"
#include "model/workload.hpp"
#include "runner/engine_runs.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/lynx_planner.hpp"

#include <cstddef>

namespace lynx::runner {

/// What planning chose and what it cost.
struct PlanningResult {
  strategies::PlannerOutput planner;  ///< plan = the winner, named by what it is (see fallback)
  std::size_t winner = 0;           ///< its run in the EngineRuns used
  std::size_t baseline = 0;         ///< the baseline's run there
  double search_seconds = 0;        ///< wall time of the planner's decisions (all rounds, alternatives)
  double baseline_seconds = 0;      ///< the baseline run and the window measurement
  double confirm_seconds = 0;       ///< every other engine run (confirmations, alternatives, the winner's)
};

/// Plans sc.recompute.strategy (lynx-heu, lynx-opt or checkmate; `sc` resolved) with every
/// engine run made through `runs` (fresh: its runs are all counted as this planning's). Candidates identical to a plan already run reuse its run;
/// ties keep the earlier candidate (the searched plan first). `show_progress`: a bar per
/// search's stage solves when they take more than a second.
PlanningResult plan_and_confirm(const Scenario& sc, const hw_models::Topology& topo,
                                const model::Workload& workload, EngineRuns& runs,
                                bool show_progress);

}  // namespace lynx::runner
