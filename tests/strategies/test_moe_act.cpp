// The moe_act op group (Megatron-Core's --recompute-modules moe_act): dropping it re-runs the
// experts' activation alone (no all-to-all, no TP collective, no GEMM), so the planners may
// overlap it; dense layers have no such group, and their options and plan checks are as before.
#include "hw_models/compute_model.hpp"
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "schedule/program_builder.hpp"
#include "scenarios/scenario_loader.hpp"
#include "strategies/lynx_planner.hpp"
#include "strategies/plan_check.hpp"
#include "strategies/plan_yaml.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::strategies;
using model::OpGroup;

namespace {

/// An MoE layer over tp 2 (SP) and ep 2 on one node: dispatch, SP gather, experts, scatter,
/// combine.
const char* kMoeScenario =
    "name: moe\n"
    "model: {layers: 2, hidden: 1024, heads: 16, ffn_hidden: 4096, seq_len: 1024, vocab: 32000,\n"
    "        mlp: swiglu, flash_attention: true,\n"
    "        moe: {num_experts: 8, router_topk: 2, expert_ffn_hidden: 1024}}\n"
    "parallel: {tp: 2, pp: 1, dp: 2, ep: 2, sequence_parallel: true, micro_batch: 1, global_batch: 2}\n"
    "hardware: {profile: dgx-h100-80gb}\n";

const char* kDenseScenario =
    "name: dense\n"
    "model: {layers: 2, hidden: 1024, heads: 16, seq_len: 1024, vocab: 32000}\n"
    "parallel: {tp: 2, pp: 1, dp: 1, micro_batch: 1, global_batch: 1}\n"
    "hardware: {profile: dgx-h100-80gb}\n";

Scenario load(const char* text, const std::vector<std::string>& overrides = {}) {
  return model::load_scenario_text(text, "test.yaml", overrides).scenario();
}

LayerDecision dropping(std::initializer_list<OpGroup> groups, Action action = Action::kRecompute) {
  LayerDecision d;
  for (OpGroup g : groups) d.group[static_cast<size_t>(g)] = action;
  return d;
}

std::vector<std::string> names_at(const std::vector<model::Op>& ops, const std::vector<int>& indices) {
  std::vector<std::string> out;
  for (int i : indices) out.push_back(ops[static_cast<size_t>(i)].name);
  return out;
}

/// The same decision for every layer of a one-stage plan.
RecomputePlan uniform_plan(const Scenario& sc, const LayerDecision& d) {
  RecomputePlan plan;
  plan.strategy = "test";
  plan.stages.push_back(StagePlan{0, std::vector<LayerDecision>(static_cast<size_t>(sc.model.layers), d)});
  return plan;
}

/// Full uniform recomputation in a chunk of two layers (recompute.num_layers 2) dropping every
/// group listed but moe_act: the upper layer's input comes back only from a whole-layer
/// recompute of the layer below.
RecomputePlan two_layer_chunk(const Scenario& sc) {
  LayerDecision whole = dropping({OpGroup::kPost, OpGroup::kAttnProjInput, OpGroup::kAttnCore, OpGroup::kMlp});
  whole.rerun_whole_groups = true;
  LayerDecision upper = whole;
  upper.group[static_cast<size_t>(OpGroup::kLayerInput)] = Action::kRecompute;
  RecomputePlan chunk = uniform_plan(sc, whole);
  chunk.stages[0].layers[1] = upper;
  return chunk;
}

}  // namespace

TEST_CASE("dropping moe_act re-runs the experts' activation alone, never a collective") {
  for (const char* mlp : {"swiglu", "gelu"}) {
    CAPTURE(mlp);
    const Scenario sc = load(kMoeScenario, {std::string("model.mlp=") + mlp});
    const std::vector<model::Op> ops = model::layer_ops(sc.model, sc.parallel);
    const std::string activation = std::string("expert_") + mlp;
    const LayerDecision moe_act = dropping({OpGroup::kMoeAct});
    CHECK(names_at(ops, recompute_ops(ops, moe_act)) == std::vector<std::string>{activation});
    CHECK(first_recompute_collective(ops, moe_act, sc.parallel) == -1);
    // Dropping the rest of the MoE MLP needs the tokens dispatched again.
    const std::vector<std::string> mlp_rerun = names_at(ops, recompute_ops(ops, dropping({OpGroup::kMlp})));
    CHECK(std::count(mlp_rerun.begin(), mlp_rerun.end(), "ep_dispatch") == 1);
    // Both together: still one activation re-run, and FC2's input is not re-derived twice.
    const std::vector<std::string> both = names_at(ops, recompute_ops(ops, dropping({OpGroup::kMlp, OpGroup::kMoeAct})));
    CHECK(std::count(both.begin(), both.end(), activation) == 1);
  }
}

TEST_CASE("the planners' options: moe_act alone costs the activation kernel and may be overlapped") {
  const Scenario sc = load(kMoeScenario);
  const hw_models::Topology topo(sc.hardware, gpus_used(sc.parallel));
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  const model::Op* fc2 = nullptr;
  const model::Op* swiglu = nullptr;
  for (const model::Op& op : w.layer) {
    if (op.name == "expert_fc2_gemm") fc2 = &op;
    if (op.name == "expert_swiglu") swiglu = &op;
  }
  REQUIRE(fc2 != nullptr);
  REQUIRE(swiglu != nullptr);
  const std::vector<LayerOption> options = layer_options(sc, topo, w.layer, true);
  const LayerDecision alone = dropping({OpGroup::kMoeAct});
  bool demand = false, overlap = false;
  for (const LayerOption& o : options) {
    LayerDecision d = o.decision;
    for (auto& a : d.group)
      if (a == Action::kOverlap) a = Action::kRecompute;
    d.window = Window::kNone;
    if (!(d == alone)) continue;
    CAPTURE(o.label);
    CHECK(o.label.find("drop{moe_act}") == 0);
    if (o.overlapped) {
      overlap = true;
      CHECK(o.overlapped_work_ps == hw_models::op_times(sc.hardware, *swiglu).fwd_ps);
    } else {
      demand = true;
      CHECK(o.recompute_ps == hw_models::op_times(sc.hardware, *swiglu).fwd_ps);
      CHECK(o.transient_bytes == static_cast<std::int64_t>(fc2->saved_bytes));
    }
  }
  CHECK(demand);
  CHECK(overlap);
  // Five droppable groups: 32 demand options (keep included).
  CHECK(std::count_if(options.begin(), options.end(), [](const LayerOption& o) { return !o.overlapped; }) == 32);
}

TEST_CASE("dense layers: no option drops moe_act, 16 demand options as with four groups") {
  const Scenario sc = load(kDenseScenario);
  const hw_models::Topology topo(sc.hardware, gpus_used(sc.parallel));
  const std::vector<LayerOption> options = layer_options(sc, topo, model::gpt_workload(sc.model, sc.parallel).layer, true);
  for (const LayerOption& o : options) CHECK(o.decision.action(OpGroup::kMoeAct) == Action::kKeep);
  CHECK(std::count_if(options.begin(), options.end(), [](const LayerOption& o) { return !o.overlapped; }) == 16);
}

TEST_CASE("a program dropping moe_act re-runs only activation kernels and adds no communication") {
  const Scenario sc = load(kMoeScenario);
  const hw_models::Topology topo(sc.hardware, gpus_used(sc.parallel));
  const model::Workload w = model::gpt_workload(sc.model, sc.parallel);
  auto comm_tasks = [](const sim::Program& prog) {
    return std::count_if(prog.tasks.begin(), prog.tasks.end(), [](const sim::Task& t) { return t.kind == sim::TaskKind::kComm; });
  };
  const auto keep = schedule::build_program(sc, uniform_plan(sc, LayerDecision{}), topo, w);
  for (Action action : {Action::kRecompute, Action::kOverlap}) {
    CAPTURE(static_cast<int>(action));
    LayerDecision d = dropping({OpGroup::kMoeAct}, action);
    if (action == Action::kOverlap) d.window = Window::kFwdTpComm;
    const auto built = schedule::build_program(sc, uniform_plan(sc, d), topo, w);
    CHECK(comm_tasks(built.program) == comm_tasks(keep.program));
    // Each recompute pass (its "recompute" start marker) re-runs one kernel, the activation.
    std::set<std::string> rerun;
    std::ptrdiff_t kernels = 0, passes = 0;
    for (const sim::Task& task : built.program.tasks) {
      const std::string& name = built.program.names[task.name];
      if (task.kind == sim::TaskKind::kMarker) {
        passes += name == "recompute" ? 1 : 0;
        continue;
      }
      if (task.category != sim::Category::kRecompute && task.category != sim::Category::kRecomputeOverlapped) continue;
      CHECK(task.kind == sim::TaskKind::kKernel);
      rerun.insert(name);
      ++kernels;
    }
    CAPTURE(fmt::format("{}", fmt::join(rerun, ", ")));
    CHECK(rerun == std::set<std::string>{"re.expert_swiglu"});
    CHECK(passes > 0);
    CHECK(kernels == passes);
  }
}

TEST_CASE("plan files: moe_act round-trips, and full-recompute chunks need only the groups a layer has") {
  SUBCASE("MoE") {
    const Scenario sc = load(kMoeScenario);
    const model::Workload ops = model::gpt_workload(sc.model, sc.parallel);
    PlanFile file;
    file.scenario = sc;
    file.plan = uniform_plan(sc, dropping({OpGroup::kMoeAct}, Action::kOverlap));
    file.plan.stages[0].layers[0].window = Window::kFwdTpComm;
    file.plan.stages[0].layers[1].window = Window::kFwdTpComm;
    const std::string text = plan_to_yaml(file);
    CHECK(text.find("drop: [moe_act]") != std::string::npos);
    CHECK(same_decisions(read_plan_text(text, "plan.yaml").plan, file.plan));
    CHECK_FALSE(find_plan_problem(file.plan, sc, ops).has_value());
    // A two-layer recompute chunk must drop moe_act too on an MoE model.
    RecomputePlan chunk = two_layer_chunk(sc);
    CHECK(find_plan_problem(chunk, sc, ops).has_value());
    for (LayerDecision& d : chunk.stages[0].layers) d.group[static_cast<size_t>(OpGroup::kMoeAct)] = Action::kRecompute;
    CHECK_FALSE(find_plan_problem(chunk, sc, ops).has_value());
  }
  SUBCASE("dense: a chunk that does not list moe_act is whole") {
    const Scenario sc = load(kDenseScenario);
    CHECK_FALSE(find_plan_problem(two_layer_chunk(sc), sc, model::gpt_workload(sc.model, sc.parallel)).has_value());
  }
}
