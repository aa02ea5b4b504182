// The planners on a model mixing dense and MoE layers (model.moe.first_dense_layers): each kind
// of layer gets the options of its own op groups (a dense layer has no moe_act), lynx-heu,
// lynx-opt and checkmate solve such stages, the engine confirms their plans, and plan files
// may name only groups the layer has.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "strategies/lynx_planner.hpp"
#include "strategies/milp_planner.hpp"
#include "strategies/plan_check.hpp"
#include "strategies/plan_yaml.hpp"

#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::strategies;
using model::OpGroup;

namespace {

/// Four layers, layer 0 dense, 1–3 MoE (8 experts of 1024, top 2), tp 2 with SP, pp 2, ep 2:
/// stage 0 holds the dense layer under an MoE layer. At 4.55 GiB per GPU keeping every
/// activation does not fit (about 4.72 GiB on stage 0), full recomputation does (4.49 GiB).
const char* kMixedScenario =
    "name: mixed\n"
    "model: {layers: 4, hidden: 1024, heads: 16, ffn_hidden: 4096, seq_len: 2048, vocab: 8192,\n"
    "        mlp: swiglu, flash_attention: true,\n"
    "        moe: {num_experts: 8, router_topk: 2, expert_ffn_hidden: 1024, first_dense_layers: 1}}\n"
    "parallel: {tp: 2, pp: 2, dp: 2, ep: 2, sequence_parallel: true, micro_batch: 2, global_batch: 32}\n"
    "hardware: {profile: dgx-h100-80gb, gpu: {memory: 4.55GiB}}\n";

model::ResolvedScenario mixed(const std::string& strategy) {
  return model::load_scenario_text(kMixedScenario, "mixed.yaml", {"recompute.strategy=" + strategy});
}

bool drops(const LayerDecision& d, OpGroup g) { return d.action(g) != Action::kKeep; }

bool some_option_drops(const std::vector<LayerOption>& options, OpGroup g) {
  return std::any_of(options.begin(), options.end(), [&](const LayerOption& o) { return drops(o.decision, g); });
}

/// The decision of global layer `layer` in `plan`.
const LayerDecision& decision_of(const RecomputePlan& plan, int layer) {
  for (const StagePlan& sp : plan.stages)
    if (layer >= sp.first_layer && layer < sp.first_layer + static_cast<int>(sp.layers.size()))
      return sp.layers[static_cast<size_t>(layer - sp.first_layer)];
  FAIL("layer " << layer << " is in no stage");
  return plan.stages.front().layers.front();
}

}  // namespace

TEST_CASE("mixed dense and MoE layers: each kind of layer gets the options of its own op groups") {
  const model::ResolvedScenario resolved = mixed("lynx-heu");
  const Scenario& sc = resolved.scenario();
  const hw_models::Topology topo(sc.hardware, gpus_used(sc.parallel));
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  REQUIRE(w.is_dense_layer(0));
  REQUIRE_FALSE(w.is_dense_layer(1));
  const std::vector<LayerOption> moe = layer_options(sc, topo, w.layer, true);
  const std::vector<LayerOption> dense = layer_options(sc, topo, w.dense_layer, true);
  auto on_demand = [](const std::vector<LayerOption>& options) {
    return std::count_if(options.begin(), options.end(), [](const LayerOption& o) { return !o.overlapped; });
  };
  CHECK(some_option_drops(moe, OpGroup::kMoeAct));
  CHECK_FALSE(some_option_drops(dense, OpGroup::kMoeAct));
  CHECK(on_demand(moe) == 32);  // five droppable groups
  CHECK(on_demand(dense) == 16);  // four
  CHECK(moe[0].decision.keeps_everything());
  CHECK(dense[0].decision.keeps_everything());
  // The planner's stage problems: stage 0 holds the dense layer 0 (set 1) and the MoE layer 1.
  const runner::SimRun r = runner::simulate(resolved);
  REQUIRE(r.planner.problems.size() == 2);
  const StageProblem& first = r.planner.problems[0];
  REQUIRE(first.option_sets.size() == 2);
  CHECK(first.set_of_layer == std::vector<int>{1, 0});
  CHECK(r.planner.problems[1].set_of_layer == std::vector<int>{0, 0});
  CHECK(first.option_sets[0].size() == moe.size());
  CHECK(first.option_sets[1].size() == dense.size());
}

TEST_CASE("mixed dense and MoE layers: lynx-heu, lynx-opt and checkmate plan within memory, confirmed by the engine") {
  REQUIRE(runner::simulate(mixed("none")).result.oom);  // the planners must recompute
  for (const std::string strategy : {"lynx-heu", "lynx-opt", "checkmate"}) {
    CAPTURE(strategy);
    const model::ResolvedScenario resolved = mixed(strategy);
    const Scenario& sc = resolved.scenario();
    const runner::SimRun r = runner::simulate(resolved);
    // The planner's own plan ran (not Megatron's full or selective) and fits on the engine.
    CHECK(r.result.strategy == strategy);
    CHECK_FALSE(r.result.oom);
    for (const runner::StageBreakdown& stage : r.result.stages)
      CHECK(stage.peak_memory_bytes <= static_cast<std::int64_t>(sc.hardware.memory_bytes));
    const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
    CHECK_FALSE(find_plan_problem(r.plan, sc, w).has_value());
    bool recomputes = false;
    for (size_t k = 0; k < r.planner.problems.size(); ++k) {
      const StageProblem& p = r.planner.problems[k];
      const StageSolution& s = r.planner.solutions[k];
      CHECK(s.feasible);
      CHECK(s.activation_bytes <= p.budget_bytes);
      CHECK(s.activation_bytes == evaluate(p, s.option_of_layer).activation_bytes);
    }
    for (int l = 0; l < sc.model.layers; ++l) {
      CAPTURE(l);
      const LayerDecision& d = decision_of(r.plan, l);
      recomputes = recomputes || !d.keeps_everything();
      if (w.is_dense_layer(l)) CHECK_FALSE(drops(d, OpGroup::kMoeAct));
      if (strategy == "checkmate") CHECK_FALSE(d.overlapped());
      // Every dropped group is one the layer's ops have.
      for (size_t g = 0; g < kNumOpGroups; ++g)
        if (drops(d, static_cast<OpGroup>(g))) {
          const auto& ops = w.ops_of_layer(l);
          CHECK(std::any_of(ops.begin(), ops.end(), [&](const model::Op& op) { return op.group == static_cast<OpGroup>(g); }));
        }
    }
    CHECK(recomputes);
  }
}

TEST_CASE("mixed dense and MoE layers: lynx-heu exposes no more recompute than full recomputation") {
  const runner::SimRun heu = runner::simulate(mixed("lynx-heu"));
  const runner::SimRun full = runner::simulate(mixed("full"));
  REQUIRE_FALSE(heu.result.oom);
  REQUIRE_FALSE(full.result.oom);
  REQUIRE(heu.result.strategy == "lynx-heu");
  double heu_exposed_s = 0, full_exposed_s = 0;
  for (const auto& stage : heu.result.stages) heu_exposed_s += stage.recompute_s;
  for (const auto& stage : full.result.stages) full_exposed_s += stage.recompute_s;
  CHECK(full_exposed_s > 0);
  CHECK(heu_exposed_s <= full_exposed_s);
  CHECK(heu.result.iteration_time_s <= full.result.iteration_time_s);
}

TEST_CASE("plan files for a mixed model: a dense layer drops only its own groups, unless it recomputes whole") {
  const model::ResolvedScenario resolved = mixed("lynx-heu");
  const Scenario& sc = resolved.scenario();
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  PlanFile file;
  file.scenario = sc;
  file.plan = runner::simulate(resolved).plan;
  REQUIRE(file.plan.strategy == "lynx-heu");
  CHECK(same_decisions(read_plan_text(plan_to_yaml(file), "plan.yaml").plan, file.plan));
  // Layer 0 is dense: dropping moe_act there names a group it does not have.
  LayerDecision& dense = file.plan.stages[0].layers[0];
  REQUIRE_FALSE(dense.overlapped());
  dense.group[static_cast<size_t>(OpGroup::kMoeAct)] = Action::kRecompute;
  const auto problem = find_plan_problem(file.plan, sc, w);
  REQUIRE(problem.has_value());
  CHECK(plan_key(*problem) == "stages[0].layers[0].drop");
  const std::string message = test::error_of([&] { read_plan_text(plan_to_yaml(file), "plan.yaml"); });
  CAPTURE(message);
  CHECK(message.find("plan.yaml:") == 0);
  CHECK(message.find("key 'stages[0].layers[0].drop': layer 0 drops group 'moe_act', which it does not have") !=
        std::string::npos);
  // The same group on MoE layer 1 is fine.
  file.plan.stages[0].layers[0].group[static_cast<size_t>(OpGroup::kMoeAct)] = Action::kKeep;
  file.plan.stages[0].layers[1] = dense;
  file.plan.stages[0].layers[1].group[static_cast<size_t>(OpGroup::kMoeAct)] = Action::kRecompute;
  file.plan.stages[0].layers[0] = LayerDecision{};
  CHECK_FALSE(find_plan_problem(file.plan, sc, w).has_value());
  // Megatron's full recomputation lists every group on every layer: a whole-layer recompute.
  const RecomputePlan full = runner::simulate(mixed("full")).plan;
  REQUIRE(drops(decision_of(full, 0), OpGroup::kMoeAct));
  CHECK_FALSE(find_plan_problem(full, sc, w).has_value());
}
