#include "strategies/recompute_plan.hpp"

#include "sim/error.hpp"

#include <algorithm>

namespace lynx::strategy {

bool LayerDecision::keeps_everything() const {
  return !whole_layer && std::all_of(group.begin(), group.end(),
                                     [](Action a) { return a == Action::kKeep; });
}

std::vector<int> uniform_partition(int layers, int virtual_stages) {
  LYNX_CHECK(virtual_stages > 0 && layers % virtual_stages == 0, "{} layers over {} stages",
             layers, virtual_stages);
  return std::vector<int>(static_cast<size_t>(virtual_stages), layers / virtual_stages);
}

std::string to_string(RecomputeKind kind) {
  switch (kind) {
    case RecomputeKind::kNone: return "none";
    case RecomputeKind::kFull: return "full";
    case RecomputeKind::kSelective: return "selective";
    case RecomputeKind::kLynxHeu: return "lynx-heu";
    case RecomputeKind::kLynxOpt: return "lynx-opt";
    case RecomputeKind::kCheckmate: return "checkmate";
  }
  return "?";
}

namespace {

LayerDecision keep_all() { return LayerDecision{}; }

LayerDecision whole_layer_recompute() {
  LayerDecision d;
  d.whole_layer = true;
  d.group.fill(Action::kRecompute);
  d.group[static_cast<size_t>(model::OpGroup::kLayerInput)] = Action::kKeep;
  return d;
}

LayerDecision attention_core_recompute() {
  LayerDecision d;
  d.group[static_cast<size_t>(model::OpGroup::kAttnCore)] = Action::kRecompute;
  return d;
}

}  // namespace

RecomputePlan plan_fixed_strategy(const ModelSpec& /*model*/, const ParallelSpec& /*parallel*/,
                                  const RecomputeSpec& recompute,
                                  const std::vector<int>& layers_per_stage) {
  RecomputePlan plan;
  plan.strategy = to_string(recompute.strategy);
  int first = 0;
  for (int n : layers_per_stage) {
    StagePlan stage;
    stage.first_layer = first;
    first += n;
    for (int i = 0; i < n; ++i) {
      switch (recompute.strategy) {
        case RecomputeKind::kNone: stage.layers.push_back(keep_all()); break;
        case RecomputeKind::kSelective: stage.layers.push_back(attention_core_recompute()); break;
        case RecomputeKind::kFull: {
          // Megatron: `uniform` checkpoints every layer (in chunks of num_layers, each chunk
          // keeping only its input — we model chunk size 1 exactly and larger chunks as every
          // layer recomputed, which costs the same time); `block` recomputes only the first
          // num_layers layers of each stage and keeps the rest.
          const bool recomputed =
              recompute.method == FullMethod::kUniform || i < recompute.num_layers;
          stage.layers.push_back(recomputed ? whole_layer_recompute() : keep_all());
          break;
        }
        default:
          fail("recompute.strategy '{}' needs a planner (not available in this build)",
               to_string(recompute.strategy));
      }
    }
    plan.stages.push_back(std::move(stage));
  }
  return plan;
}

}  // namespace lynx::strategy
