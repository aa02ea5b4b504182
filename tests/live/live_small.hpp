#pragma once
// Shared by the live-mode tests: tests/live/live-small.yaml with overrides, simulated, and the
// plan file `lynxsim plan` would write for it.
#include "model/resolved_scenario.hpp"
#include "runner/plan_file.hpp"
#include "runner/simulate.hpp"
#include "strategies/plan_yaml.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace lynx::live::test {

inline const std::string kSmallScenario = std::string(LYNXSIM_SOURCE_DIR) + "/tests/live/live-small.yaml";

/// live-small.yaml with `strategy`, tp x pp x dp (global batch 4 per replica) and `extra` overrides.
inline model::ResolvedScenario small_scenario(const std::string& strategy, int tp = 2, int pp = 2, int dp = 1,
                                              std::vector<std::string> extra = {}) {
  extra.push_back("recompute.strategy=" + strategy);
  extra.push_back(fmt::format("parallel.tp={}", tp));
  extra.push_back(fmt::format("parallel.pp={}", pp));
  extra.push_back(fmt::format("parallel.dp={}", dp));
  extra.push_back(fmt::format("parallel.global_batch={}", 4 * dp));
  return model::load_scenario_file(kSmallScenario, extra);
}

/// Simulates `resolved`, keeping the program and result.
inline runner::SimRun simulate_kept(const model::ResolvedScenario& resolved) {
  runner::SimOptions options;
  options.keep_trace_data = true;
  return runner::simulate(resolved, options);
}

/// The plan file of the run, written and read back as `lynxsim plan` and `lynxsim live` would.
inline strategies::PlanFile plan_of(const runner::SimRun& run) {
  return strategies::read_plan_text(strategies::plan_to_yaml(runner::plan_file_of(run)), "plan.yaml");
}

}  // namespace lynx::live::test
