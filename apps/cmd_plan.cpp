// `lynxsim plan`: plan a scenario's recomputation and write the plan file.
#include "apps/cli.hpp"
#include "runner/simulate.hpp"
#include "common/error.hpp"
#include "strategies/plan_yaml.hpp"
#include "strategies/recompute_plan.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <fstream>
#include <iostream>

namespace lynx::cli {

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
                     "`lynxsim run --plan` reads."))
    return 0;
  const model::ResolvedScenario resolved = load_scenario(args);
  const Scenario& scenario = resolved.scenario();
  const SimRun run = simulate(resolved);
  const std::string yaml = strategy::plan_to_yaml(
      run.plan, scenario.name, run.planner.solutions.empty() ? nullptr : &run.planner);
  if (output_path.empty()) {
    std::cout << yaml;
  } else {
    std::ofstream out(output_path);
    if (!out) fail("-o: cannot write '{}'", output_path);
    out << yaml;
  }
  fmt::print(std::cerr, "{}: {} plan, simulated iteration {:.4f} s, {:.0f} tokens/s{}{}\n",
             scenario.name, run.result.strategy, run.result.iteration_time_s, run.result.tokens_per_s,
             run.result.oom ? fmt::format(", OOM on stage {}", run.result.oom_stage) : "",
             output_path.empty() ? "" : fmt::format("; written to {}", output_path));
  return 0;
}

}  // namespace lynx::cli
