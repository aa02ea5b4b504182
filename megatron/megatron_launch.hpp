#pragma once
/// Megatron-LM launch arguments in: the options of a launch line or script mapped onto
/// scenario keys as `--set`-style overrides, applied by the one scenario loader
/// (model::load_scenario_text). docs/megatron.md lists every argument, what it maps to and what
/// is refused as not modelled.
#include "megatron/launch_words.hpp"
#include "model/resolved_scenario.hpp"

#include <map>
#include <string>
#include <vector>

namespace lynx::megatron {

/// What a launch line says, as scenario overrides.
struct MegatronArgs {
  std::vector<std::string> overrides;  ///< "model.layers=96", one per scenario key
  /// For each override, the argument it came from ("launch.sh:3:5: --num-layers 96").
  std::map<std::string, std::string> sources;
  std::vector<std::string> ignored;  ///< options that do not change the simulated iteration
  std::vector<std::string> notes;    ///< what was assumed, one line each
  int tp = 1;
  int pp = 1;
  int cp = 1;  ///< --context-parallel-size (a model replica is tp · cp · pp GPUs)
  int micro_batch = 1;
  bool global_batch_given = false;  ///< else Megatron's default, micro-batch × dp
  std::string layout_source;        ///< the tp and pp arguments, for messages
};

/// Maps the arguments (after launch_words) onto overrides. Throws lynx::Error naming the
/// argument and where it was given for a bad value, a contradiction (the same option twice with
/// different values, two options that disagree, what Megatron-LM itself refuses), an
/// unresolved shell variable, and for an argument whose value lynxsim does not model.
MegatronArgs map_megatron_args(const std::vector<LaunchWord>& words, const std::string& label);

/// Everything `lynxsim run --megatron-args` is given.
struct MegatronRequest {
  std::string text;   ///< the launch line, or the launch script's contents
  std::string label;  ///< "--megatron-args", or the script's path (messages, scenario name)
  std::map<std::string, std::string> env;  ///< --megatron-env NAME=VALUE
  std::string profile;                     ///< built-in hardware profile (or:)
  std::string profile_file;                ///< a hardware profile file
  int gpus = 0;                            ///< world size; 0 = tp × pp (dp 1)
  std::vector<std::string> overrides;      ///< --set on top of the launch arguments
};

/// The resolved scenario a launch line describes, and the warnings to print.
struct MegatronScenario {
  model::ResolvedScenario scenario;
  std::vector<std::string> warnings;  ///< one line each, without a "warning:" prefix
};

/// Reads the launch text, maps it, picks dp = gpus / (tp × pp) and the node count from the
/// profile's GPUs per node, and loads the scenario through the one loader. A layout error names
/// the Megatron argument behind the key (or the --set override, or --gpus).
MegatronScenario load_megatron_scenario(const MegatronRequest& request);

/// Reads a --megatron-env NAME=VALUE list; throws lynx::Error for an entry without '='.
std::map<std::string, std::string> parse_megatron_env(const std::vector<std::string>& entries);

}  // namespace lynx::megatron
