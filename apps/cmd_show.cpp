// `lynxsim show`: the resolved scenario, every field with units, and derived sizes.
#include "apps/cli.hpp"
#include "apps/megatron_options.hpp"
#include "megatron/megatron_export.hpp"
#include "model/gpt.hpp"
#include "scenarios/scenario_loader.hpp"

#include <fmt/format.h>

#include <iostream>

namespace lynx::apps {

int cmd_show(const std::vector<std::string>& argv) {
  ScenarioArgs args;
  MegatronCliArgs megatron;
  bool as_megatron_args = false;
  po::options_description desc("show options");
  add_scenario_options(desc, args);
  add_megatron_options(desc, megatron);
  desc.add_options()("as-megatron-args", po::bool_switch(&as_megatron_args),
                     "print the scenario as Megatron-LM launch arguments (docs/megatron.md)");
  if (!parse_options(argv, desc, {"file"},
                     "usage: lynxsim show [FILE] [--set k=v]... [--as-megatron-args]\n"
                     "       lynxsim show --megatron-args \"...\" | --megatron-args-file F "
                     "--profile NAME [--gpus N] [--as-megatron-args]"))
    return 0;
  const model::ResolvedScenario resolved = load_scenario(args, megatron);
  const Scenario& scenario = resolved.scenario();
  if (as_megatron_args) {
    std::cout << megatron::scenario_to_megatron_args(scenario);
    return 0;
  }
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
