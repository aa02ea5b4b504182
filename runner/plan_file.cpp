#include "runner/plan_file.hpp"

#include "runner/report.hpp"

namespace lynx::runner {
namespace {

/// How the run's plan was made, for the plan file (informational).
strategies::PlanProvenance provenance(const SimRun& run) {
  strategies::PlanProvenance p;
  p.lynxsim_version = lynxsim_version();
  p.strategy_requested = run.result.strategy_requested;
  p.strategy_won = run.planner.fallback.empty() ? run.result.strategy : run.planner.fallback;
  p.search_seconds = run.result.search_seconds;
  p.baseline_seconds = run.result.baseline_seconds;
  p.confirm_rounds = run.planner.confirm_rounds;
  p.solver_limit_bound = run.result.solver_limit_bound;
  p.solver_gap = run.result.solver_gap;
  for (size_t k = 0; k < run.planner.solutions.size(); ++k) {
    const auto& s = run.planner.solutions[k];
    p.stages.push_back({static_cast<int>(k), s.status.empty() ? "unknown" : s.status, s.feasible,
                        ps_to_us(s.exposed_ps), s.activation_bytes,
                        run.planner.problems[k].budget_bytes, s.gap, s.limit_bound});
  }
  for (size_t vs = 0; vs < run.planner.windows.size(); ++vs)
    p.windows.push_back({static_cast<int>(vs), ps_to_us(run.planner.windows[vs].inner_ps),
                         ps_to_us(run.planner.windows[vs].top_ps)});
  return p;
}

}  // namespace

strategies::PlanFile plan_file_of(const SimRun& run) {
  return {run.plan, run.result.scenario, provenance(run)};
}

}  // namespace lynx::runner
