#include "apps/megatron_options.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "megatron/megatron_launch.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <iostream>

namespace lynx::apps {

void add_megatron_options(po::options_description& desc, MegatronCliArgs& args) {
  desc.add_options()("megatron-args", po::value(&args.text),
                     "a Megatron-LM launch line (its arguments) instead of FILE (docs/megatron.md)")(
      "megatron-args-file", po::value(&args.file), "a Megatron-LM launch script instead of FILE")(
      "megatron-env", po::value(&args.env)->composing(),
      "NAME=VALUE for a shell variable the launch arguments use (repeatable)")(
      "profile", po::value(&args.profile), "with --megatron-args: built-in hardware profile")(
      "profile-file", po::value(&args.profile_file), "with --megatron-args: hardware profile file")(
      "gpus", po::value(&args.gpus),
      "with --megatron-args: GPUs (world size); data parallel = GPUs / (tp x pp); default tp x pp");
}

bool megatron_given(const MegatronCliArgs& m) {
  return !m.text.empty() || !m.file.empty();
}

model::ResolvedScenario load_scenario(const ScenarioArgs& args, const MegatronCliArgs& m) {
  if (!megatron_given(m)) {
    if (!m.env.empty() || !m.profile.empty() || !m.profile_file.empty() || m.gpus != 0)
      fail(ErrorCode::kConflictingOptions, "--megatron-env, --profile, --profile-file and --gpus go with --megatron-args or "
           "--megatron-args-file (a scenario FILE names its hardware and layout itself)");
    return load_scenario(args);
  }
  if (!m.text.empty() && !m.file.empty())
    fail(ErrorCode::kConflictingOptions, "give --megatron-args or --megatron-args-file, not both");
  if (!args.file.empty())
    fail(ErrorCode::kConflictingOptions, "{}: give a scenario FILE or Megatron-LM arguments, not both", args.file);
  if (m.gpus < 0) fail(ErrorCode::kInvalidOption, "--gpus {}: expected a positive GPU count", m.gpus);
  megatron::MegatronRequest request;
  request.text = m.file.empty() ? m.text : read_text_file(m.file, "Megatron-LM launch script");
  request.label = m.file.empty() ? "--megatron-args" : m.file;
  request.env = megatron::parse_megatron_env(m.env);
  request.profile = m.profile;
  request.profile_file = m.profile_file;
  request.gpus = m.gpus;
  request.overrides = args.overrides;
  megatron::MegatronScenario loaded = megatron::load_megatron_scenario(request);
  for (const std::string& warning : loaded.warnings)
    fmt::print(std::cerr, "lynxsim: warning: {}\n", warning);
  return loaded.scenario;
}

}  // namespace lynx::apps
