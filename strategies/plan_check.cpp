#include "strategies/plan_check.hpp"

#include "common/error.hpp"
#include "common/text.hpp"
#include "model/gpt.hpp"
#include "scenarios/fields.hpp"
#include "scenarios/scenario_loader.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lynx::strategies {
namespace {

using model::OpGroup;

/// How a message names a layer op's collective.
const char* collective_kind(const model::Op& op) {
  switch (op.comm_group) {
    case model::CommGroup::kEp: return "an expert-parallel all-to-all";
    case model::CommGroup::kEtp: return "an expert tensor-parallel collective";
    case model::CommGroup::kTp: break;
  }
  return "a TP collective";
}

/// Why an overlapped decision cannot be overlapped (it re-runs a collective), or "".
std::string overlap_communication(const std::vector<model::Op>& ops, const LayerDecision& d,
                                  const ParallelSpec& p, int layer) {
  const int collective = first_recompute_collective(ops, d, p);
  if (collective < 0) return "";
  const std::string& op_name = ops[static_cast<size_t>(collective)].name;
  // Name the dropped group that needs the collective on its own, when one does.
  std::string dropped;
  for (size_t g = 0; g < kNumOpGroups; ++g) {
    if (d.group[g] == Action::kKeep) continue;
    dropped += fmt::format("{}'{}'", dropped.empty() ? "" : ", ", model::kOpGroupNames[g]);
    LayerDecision alone;
    alone.group[g] = Action::kRecompute;
    alone.rerun_whole_groups = d.rerun_whole_groups;
    const int c = first_recompute_collective(ops, alone, p);
    if (c >= 0)
      return fmt::format(
          "layer {}: overlapped recompute of group '{}' re-runs '{}', {}; only "
          "communication-free recomputes can be overlapped (keep '{}', or use mode demand)",
          layer, model::kOpGroupNames[g], ops[static_cast<size_t>(c)].name, collective_kind(ops[static_cast<size_t>(c)]),
          model::kOpGroupNames[g]);
  }
  return fmt::format(
      "layer {}: overlapped recompute of groups {} together re-runs '{}', {}; only "
      "communication-free recomputes can be overlapped (use mode demand)",
      layer, dropped, op_name, collective_kind(ops[static_cast<size_t>(collective)]));
}

/// Whether `d` recomputes its whole layer on demand: every group but possibly the input that
/// some op of the layer belongs to is dropped (a dense layer has no moe_act op, so plans for
/// dense models need not list it).
bool whole_layer_on_demand(const LayerDecision& d, const std::vector<model::Op>& ops) {
  return std::all_of(ops.begin(), ops.end(), [&](const model::Op& op) {
    return op.group == OpGroup::kLayerInput || d.action(op.group) == Action::kRecompute;
  });
}

/// `below`: the decision of the layer below in the same virtual stage (null for its first).
std::optional<PlanProblem> layer_problem(const LayerDecision& d, const LayerDecision* below,
                                         const Scenario& sc, const std::vector<model::Op>& ops,
                                         int layer, bool top, bool last_chunk) {
  auto problem = [](const std::string& field, std::string what) {
    return PlanProblem{-1, -1, field, std::move(what)};
  };
  // Dropping the input: a layer of a recompute chunk (Megatron's full uniform recompute with
  // num_layers > 1), whose input comes back from the whole-layer recompute of the layer below.
  if (d.action(OpGroup::kLayerInput) != Action::kKeep &&
      (below == nullptr || !whole_layer_on_demand(d, ops) || !whole_layer_on_demand(*below, ops)))
    return problem("drop", fmt::format("layer {} drops group 'input' (the layer input): only a layer "
                                       "of a recompute chunk may, dropping every group on demand "
                                       "above a layer below it in the same virtual stage that does "
                                       "the same (its whole recompute brings this input back); "
                                       "other plans keep it, the recompute starts from it "
                                       "(droppable groups: {})", layer, droppable_group_names()));
  // A whole-layer recompute (Megatron's full) may name every group; otherwise a dropped group
  // must be one of this layer's (a dense layer of a mixed model has no moe_act).
  if (!whole_layer_on_demand(d, ops))
    for (size_t g = 0; g < kNumOpGroups; ++g) {
      const auto group = static_cast<OpGroup>(g);
      if (d.group[g] == Action::kKeep || group == OpGroup::kLayerInput) continue;
      if (std::none_of(ops.begin(), ops.end(), [&](const model::Op& op) { return op.group == group; }))
        return problem("drop", fmt::format("layer {} drops group '{}', which it does not have (a dense "
                                           "layer has no moe_act); drop only groups of its own",
                                           layer, model::kOpGroupNames[g]));
    }
  if (d.keeps_everything() && d.rerun_whole_groups)
    return problem("rerun_whole_groups",
                   fmt::format("layer {} drops nothing, so there is no group to re-run whole "
                               "(rerun_whole_groups goes with dropped groups)", layer));
  const bool demand = std::count(d.group.begin(), d.group.end(), Action::kRecompute) > 0;
  if (demand && d.overlapped())
    return problem("drop", fmt::format("layer {} brings some dropped groups back on demand and others "
                                       "overlapped; one recompute pass brings them all back one way",
                                       layer));
  if (!d.overlapped()) {
    if (d.window != Window::kNone)
      return problem("window", fmt::format("layer {}: window {} goes only with mode overlap", layer,
                                           window_name(d.window)));
    return std::nullopt;
  }
  switch (d.window) {
    case Window::kNone:
      return problem("window", fmt::format("layer {}: mode overlap needs a window (bwd-tp, pp-wait or fwd-tp)", layer));
    case Window::kPpRecvWait:
      if (!top)
        return problem("window", fmt::format("layer {}: window pp-wait (the wait for the next stage's "
                                             "gradient) belongs to a virtual stage's top layer; use "
                                             "bwd-tp or fwd-tp", layer));
      if (last_chunk)
        return problem("window", fmt::format("layer {}: window pp-wait: the last virtual stage receives "
                                             "no gradient from a next stage; use bwd-tp (the LM head's "
                                             "backward) or fwd-tp", layer));
      break;
    case Window::kBwdTpComm:
      if (top && !last_chunk)
        return problem("window", fmt::format("layer {}: window bwd-tp (the backward of the layer above) "
                                             "does not exist for a virtual stage's top layer; use "
                                             "pp-wait or fwd-tp", layer));
      break;
    case Window::kFwdTpComm: break;  // the builder falls back to the backward's start
  }
  std::string comm = overlap_communication(ops, d, sc.parallel, layer);
  if (!comm.empty()) return problem("drop", std::move(comm));
  return std::nullopt;
}

}  // namespace

int first_recompute_collective(const std::vector<model::Op>& ops, const LayerDecision& d, const ParallelSpec& p) {
  for (int i : recompute_ops(ops, d))
    if (model::communicates(ops[static_cast<size_t>(i)], p)) return i;
  return -1;
}

std::string plan_key(const PlanProblem& p) {
  if (p.virtual_stage < 0) return p.field;
  if (p.index < 0) return fmt::format("stages[{}].{}", p.virtual_stage, p.field);
  return fmt::format("stages[{}].layers[{}].{}", p.virtual_stage, p.index, p.field);
}

std::optional<PlanProblem> find_plan_problem(const RecomputePlan& plan, const Scenario& sc,
                                             const model::Workload& workload) {
  const ParallelSpec& p = sc.parallel;
  const int virtual_stages = p.pp * p.virtual_stages;
  if (static_cast<int>(plan.stages.size()) != virtual_stages)
    return PlanProblem{-1, -1, "stages",
                       fmt::format("the plan has {} virtual stages, the scenario's layout has {} "
                                   "(pp {} × virtual_stages {})",
                                   plan.stages.size(), virtual_stages, p.pp, p.virtual_stages)};
  int next_layer = 0;
  for (int vs = 0; vs < virtual_stages; ++vs) {
    const StagePlan& sp = plan.stages[static_cast<size_t>(vs)];
    if (sp.first_layer != next_layer)
      return PlanProblem{vs, -1, "first_layer",
                         fmt::format("is {}, expected {} (stages hold consecutive layers from 0)",
                                     sp.first_layer, next_layer)};
    if (sp.layers.empty())
      return PlanProblem{vs, -1, "layers", "is empty (every virtual stage holds a layer)"};
    next_layer += static_cast<int>(sp.layers.size());
  }
  if (next_layer != sc.model.layers)
    return PlanProblem{-1, -1, "stages",
                       fmt::format("hold {} layers, the model has {}", next_layer, sc.model.layers)};
  for (int vs = 0; vs < virtual_stages; ++vs) {
    const StagePlan& sp = plan.stages[static_cast<size_t>(vs)];
    const int n = static_cast<int>(sp.layers.size());
    for (int i = 0; i < n; ++i) {
      const int layer = sp.first_layer + i;
      auto problem = layer_problem(sp.layers[static_cast<size_t>(i)],
                                   i > 0 ? &sp.layers[static_cast<size_t>(i - 1)] : nullptr, sc,
                                   workload.ops_of_layer(layer), layer, i == n - 1, vs == virtual_stages - 1);
      if (problem) {
        problem->virtual_stage = vs;
        problem->index = i;
        return problem;
      }
    }
  }
  return std::nullopt;
}

void validate_plan(const RecomputePlan& plan, const Scenario& sc, const model::Workload& workload,
                   const std::string& plan_label) {
  if (const auto problem = find_plan_problem(plan, sc, workload))
    fail(ErrorCode::kPlanUnbuildable, "{}: key '{}': {}", plan_label, plan_key(*problem), problem->what);
}

const std::vector<std::string>& plan_scenario_keys() {
  static const std::vector<std::string> keys = {
      "model.layers",         "model.hidden",
      "model.heads",          "model.ffn_hidden",
      "model.seq_len",        "model.vocab",
      "model.flash_attention", "model.moe.num_experts",
      "model.moe.router_topk", "model.moe.expert_ffn_hidden",
      "model.moe.shared_ffn_hidden", "parallel.tp",
      "parallel.pp",          "parallel.dp",          "parallel.cp",
      "parallel.ep",          "parallel.etp",
      "parallel.sequence_parallel", "parallel.micro_batch",
      "parallel.global_batch", "parallel.schedule",
      "parallel.virtual_stages", "parallel.distributed_optimizer",
      "parallel.sharding",    "parallel.shard_group",
      // What the plan's memory budget was cut from: capacity minus reserve and static bytes.
      "hardware.gpu.memory",  "hardware.gpu.reserve",
  };
  return keys;
}

void check_plan_scenario(const PlanFile& plan, const std::string& plan_label,
                         const model::ResolvedScenario& scenario, const std::string& scenario_label) {
  const Scenario& a = plan.scenario;
  const Scenario& b = scenario.scenario();
  const std::vector<FieldDesc>& table = scenario_field_table();
  for (const std::string& key : plan_scenario_keys()) {
    const auto field = std::find_if(table.begin(), table.end(), [&](const FieldDesc& f) {
      return f.in_scenario() && f.scenario_key() == key;
    });
    LYNX_CHECK(field != table.end(), "plan key '{}' is not a scenario field", key);
    const std::string va = field->get(a);
    const std::string vb = field->get(b);
    if (va == vb) continue;
    // etp 0 means tp: a plan made with one spelling fits the other.
    if (key == "parallel.etp" && expert_tp(a.parallel) == expert_tp(b.parallel)) continue;
    // The plan file's line of the key (its section's for a hand-written plan that leaves it out).
    std::string at = plan.scenario_origins.origin_of(key);
    if (at.empty()) at = plan_label;  // a plan made in memory
    fail(ErrorCode::kPlanMismatch, "{}: key 'scenario.{}': made for {}, {} has {} ({})", at, key, va,
         scenario_label, vb, model::value_origin(scenario.origins(), b.model.preset, key));
  }
}

model::ResolvedScenario scenario_for_plan(const PlanFile& file, const std::string& plan_label,
                           const std::string& scenario_file,
                           const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) {
    const std::string_view key = trim(std::string_view(o).substr(0, o.find('=')));
    if (key == "recompute" || key.starts_with("recompute."))
      fail(ErrorCode::kConflictingOptions, "--set {}: not allowed with --plan: {} fixes every recompute decision (a {} plan); drop "
           "--plan to plan again, or drop this --set to run the plan",
           o, plan_label, file.plan.strategy);
  }
  // The embedded scenario was resolved when the plan was read; a file or --set is resolved here.
  if (scenario_file.empty() && overrides.empty()) return model::resolve_scenario(file.scenario, plan_label);
  const bool embedded = scenario_file.empty();
  model::ResolvedScenario resolved =
      embedded ? model::load_scenario_text(scenario_to_yaml(file.scenario), plan_label, overrides)
               : model::load_scenario_file(scenario_file, overrides);
  const std::string label = embedded ? "its scenario with --set"
                            : overrides.empty() ? scenario_file : scenario_file + " with --set";
  const Scenario& sc = resolved.scenario();
  check_plan_scenario(file, plan_label, resolved, label);
  validate_plan(file.plan, sc, model::gpt_workload(sc.model, sc.parallel), plan_label);
  return resolved;
}

}  // namespace lynx::strategies
