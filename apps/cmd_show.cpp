// `lynxsim show`: the resolved scenario, every field with units, and derived sizes.
#include "apps/cli.hpp"
#include "model/gpt.hpp"
#include "scenarios/scenario_loader.hpp"

#include <fmt/format.h>

#include <iostream>

namespace lynx::apps {

int cmd_show(const std::vector<std::string>& argv) {
  ScenarioArgs args;
  po::options_description desc("show options");
  add_scenario_options(desc, args);
  if (!parse_options(argv, desc, {"file"}, "usage: lynxsim show [FILE] [--set k=v]...")) return 0;
  const model::ResolvedScenario resolved = load_scenario(args);
  const Scenario& scenario = resolved.scenario();
  std::cout << scenario_to_yaml(scenario);
  const auto& m = scenario.model;
  const auto& p = scenario.parallel;
  fmt::print("# derived:\n");
  fmt::print("#   parameters: {:.4g} ({:.3f} B; Narayanan et al. 2021 Eq. 2)\n",
             model::parameter_count(m), model::parameter_count(m) / 1e9);
  fmt::print("#   GPUs used: {} of {} (tp {} × pp {} × dp {})\n", gpus_used(p),
             checked_product("hardware.nodes x hardware.gpus_per_node",
                             {scenario.hardware.nodes, scenario.hardware.gpus_per_node}),
             p.tp, p.pp, p.dp);
  fmt::print("#   micro-batches per pipeline: {}\n", micro_batches_per_pipeline(p));
  fmt::print("#   model FLOPs per iteration: {:.4g} (every op forward + backward; Korthikanti et al. 2022 Eq. 7 when f = 4h)\n",
             model::model_flops_per_iteration(m, p.global_batch));
  return 0;
}

}  // namespace lynx::apps
