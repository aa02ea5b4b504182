#pragma once
/// Checks of a recomputation plan that comes from outside the planner (a plan file, live
/// mode): does it fit the layout, can the program builder build every layer's decision, and
/// was it made for the scenario it is about to run on.
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/plan_yaml.hpp"
#include "strategies/recompute_plan.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lynx::strategies {

/// Where a plan asks for something the program builder cannot build, and why.
struct PlanProblem {
  int virtual_stage = -1;  ///< -1: the plan as a whole (its stage count or layer total)
  int index = -1;          ///< layer within the virtual stage; -1: the stage itself
  std::string field;       ///< what is wrong: "drop", "window", "first_layer", "layers", "stages"
  std::string what;        ///< one-line reason, naming the layer and group where there is one
};

/// Index (into `layer_ops`) of the first collective that `d`'s recompute pass re-runs, or -1
/// (none, or only collectives whose group has one GPU under `p`: model::communicates).
/// Overlapped recomputes must have none.
int first_recompute_collective(const std::vector<model::Op>& layer_ops, const LayerDecision& d,
                               const ParallelSpec& p);

/// The plan-file key of a problem: "stages", "stages[K].FIELD" or "stages[K].layers[I].FIELD".
std::string plan_key(const PlanProblem& problem);

/// The first problem of `plan` for the resolved scenario `sc` (model preset filled in) with
/// workload `workload` (model::gpt_workload of sc; each layer's ops: ops_of_layer), or nothing:
/// pp·v contiguous stages holding every layer; no layer drops its input (group 'input'); a
/// layer drops only groups it has (a dense layer of a mixed model has no moe_act), unless it
/// recomputes whole on demand (Megatron's full names every group); one layer's dropped groups
/// come back all on demand or all overlapped; an overlapped recompute needs a window that its
/// layer has (pp-wait: a non-last chunk's top layer; bwd-tp: any other layer) and re-runs no
/// collective; a window only goes with overlap.
std::optional<PlanProblem> find_plan_problem(const RecomputePlan& plan, const Scenario& sc,
                                             const model::Workload& workload);

/// Throws lynx::Error "PLAN_LABEL: key 'stages[K]...': what" for the first problem found.
void validate_plan(const RecomputePlan& plan, const Scenario& sc, const model::Workload& workload,
                   const std::string& plan_label);

/// Scenario keys a plan depends on: the model shape, the parallel layout and the GPU memory
/// capacity. Every other field (bandwidths, latencies, efficiencies) may differ: a what-if.
const std::vector<std::string>& plan_scenario_keys();

/// Throws "PLAN:LINE:COL: key 'scenario.KEY': made for A, SCENARIO_LABEL has B (WHERE)" for
/// the first of plan_scenario_keys() on which `scenario` differs from the plan's scenario: the
/// plan file's position of the key, and where the scenario got its value (model::value_origin:
/// its file:line:col, the --set override, the preset or profile, or "default").
void check_plan_scenario(const PlanFile& plan, const std::string& plan_label,
                         const model::ResolvedScenario& scenario, const std::string& scenario_label);

/// The scenario `lynxsim run --plan` runs: SCENARIO_FILE if given, else the plan's embedded
/// scenario, with `overrides` applied either way; refuses a `recompute.*` override (the plan
/// fixes every recompute decision), a scenario the plan was not made for
/// (check_plan_scenario) and a plan it cannot build (validate_plan).
model::ResolvedScenario scenario_for_plan(const PlanFile& file, const std::string& plan_label,
                           const std::string& scenario_file,
                           const std::vector<std::string>& overrides);

}  // namespace lynx::strategies
