// `lynxsim plan`: plan a scenario's recomputation and write the plan file.
#include "apps/cli.hpp"
#include "apps/megatron_options.hpp"
#include "common/files.hpp"
#include "runner/plan_file.hpp"
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

int cmd_plan(const std::vector<std::string>& argv) {
  ScenarioArgs args;
  std::string output_path;
  MegatronCliArgs megatron;
  po::options_description desc("plan options");
  add_scenario_options(desc, args);
  add_megatron_options(desc, megatron);
  desc.add_options()("output,o", po::value(&output_path), "write the plan here (default: stdout)");
  if (!parse_options(argv, desc, {"file"},
                     "usage: lynxsim plan [FILE] [--set k=v]... [-o plan.yaml]\n"
                     "Plans recompute.strategy (any strategy; lynx-heu, lynx-opt and checkmate "
                     "search), confirms it with the engine, and writes the plan YAML that "
                     "`lynxsim run --plan` reads: every layer's decisions, the resolved scenario "
                     "they were made for, and how they were made."))
    return 0;
  const model::ResolvedScenario resolved = load_scenario(args, megatron);
  runner::SimOptions options;
  options.progress = true;  // a single run: bars on stderr for long searches and engine runs
  const runner::SimRun run = runner::simulate(resolved, options);
  const std::string yaml = strategies::plan_to_yaml(runner::plan_file_of(run));
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
