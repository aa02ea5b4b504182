#pragma once
/// Megatron-LM launch arguments out: what `lynxsim show --as-megatron-args` prints, so a plan
/// found here can be launched there. Reading the printed arguments back
/// (load_megatron_scenario with the same profile and GPU count) gives the same scenario, except
/// for the fields the comment lines name as having no Megatron-LM argument.
#include "scenarios/scenario.hpp"

#include <string>

namespace lynx::megatron {

/// The arguments for a resolved scenario, one option per line with ` \` continuations, after
/// `#` comment lines: the GPU count to launch on, the fields with no Megatron-LM argument, and
/// for a recomputation strategy or schedule Megatron-LM does not have, the closest it has.
std::string scenario_to_megatron_args(const Scenario& scenario);

}  // namespace lynx::megatron
