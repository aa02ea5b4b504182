// `lynxsim plan`: plan a scenario's recomputation and write the plan file.
#include "apps/cli.hpp"
#include "common/files.hpp"
#include "runner/report.hpp"
#include "runner/simulate.hpp"
#include "common/error.hpp"
#include "strategies/plan_yaml.hpp"
#include "strategies/recompute_plan.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <fstream>
#include <iostream>

namespace lynx::apps {
namespace {

/// How the run's plan was made, for the plan file (informational).
strategies::PlanProvenance provenance(const runner::SimRun& run) {
  strategies::PlanProvenance p;
  p.lynxsim_version = runner::lynxsim_version();
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

int cmd_plan(const std::vector<std::string>& argv) {
  ScenarioArgs args;
  std::string output_path;
  po::options_description desc("plan options");
  add_scenario_options(desc, args);
  desc.add_options()("output,o", po::value(&output_path), "write the plan here (default: stdout)");
  if (!parse_options(argv, desc, {"file"},
                     "usage: lynxsim plan [FILE] [--set k=v]... [-o plan.yaml]\n"
                     "Plans recompute.strategy (any strategy; lynx-heu, lynx-opt and checkmate "
                     "search), confirms it with the engine, and writes the plan YAML that "
                     "`lynxsim run --plan` reads: every layer's decisions, the resolved scenario "
                     "they were made for, and how they were made."))
    return 0;
  const model::ResolvedScenario resolved = load_scenario(args);
  runner::SimOptions options;
  options.progress = true;  // a single run: bars on stderr for long searches and engine runs
  const runner::SimRun run = runner::simulate(resolved, options);
  const std::string yaml = strategies::plan_to_yaml({run.plan, run.result.scenario, provenance(run)});
  if (output_path.empty()) {
    std::cout << yaml;
  } else {
    write_text_file(output_path, yaml, "-o");
  }
  fmt::print(std::cerr, "{}: {} plan, simulated iteration {:.4f} s, {:.0f} tokens/s{}{}\n",
             resolved->name, run.result.strategy, run.result.iteration_time_s, run.result.tokens_per_s,
             run.result.oom ? fmt::format(", OOM on stage {}", run.result.oom_stage) : "",
             output_path.empty() ? "" : fmt::format("; written to {}", output_path));
  return 0;
}

}  // namespace lynx::apps
