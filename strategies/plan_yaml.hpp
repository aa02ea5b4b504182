#pragma once
/// Plan files: a recomputation plan as YAML (`lynxsim plan FILE -o plan.yaml`), read back by
/// `lynxsim run --plan` and by live mode. Per virtual stage: its layers and, per layer, the
/// dropped op groups, how they come back (on demand / overlapped) and in which window.
#include "strategies/lynx_planner.hpp"
#include "strategies/recompute_plan.hpp"

#include <string>

namespace lynx::strategy {

/// The plan as YAML; `planner` (may be null) adds the search statistics and windows.
std::string plan_to_yaml(const RecomputePlan& plan, const std::string& scenario_name,
                         const PlannerOutput* planner);

/// Reads a plan file; errors name the file, line and key. Checks the plan against the layout:
/// `virtual_stages` = pp·v stages, `layers` layers in total, contiguous.
RecomputePlan load_plan_file(const std::string& path, int virtual_stages, int layers);
RecomputePlan load_plan_text(const std::string& yaml_text, const std::string& file_label,
                             int virtual_stages, int layers);

}  // namespace lynx::strategy
