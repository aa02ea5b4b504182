#pragma once
/// The Megatron-LM options of `lynxsim run`, `show` and `plan`: a launch line or script instead
/// of a scenario file (megatron/, docs/megatron.md).
#include "apps/cli.hpp"

#include <string>
#include <vector>

namespace lynx::apps {

/// --megatron-args, --megatron-args-file, --megatron-env, --profile, --profile-file, --gpus.
struct MegatronCliArgs {
  std::string text;
  std::string file;
  std::vector<std::string> env;
  std::string profile;
  std::string profile_file;
  int gpus = 0;
};

/// Adds the Megatron-LM options to `desc`.
void add_megatron_options(po::options_description& desc, MegatronCliArgs& args);
/// The scenario of the launch arguments when given (FILE is then refused; --set applies on
/// top), else load_scenario(args). Prints the mapping's warnings on stderr.
model::ResolvedScenario load_scenario(const ScenarioArgs& args, const MegatronCliArgs& megatron);
/// Whether any Megatron-LM option was given.
bool megatron_given(const MegatronCliArgs& megatron);

}  // namespace lynx::apps
