#include "strategies/recompute_plan.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace lynx::strategies {

std::string droppable_group_names() {
  std::string out;
  for (size_t g = 0; g < static_cast<size_t>(kNumOpGroups); ++g) {
    if (g == static_cast<size_t>(model::OpGroup::kLayerInput)) continue;
    if (!out.empty()) out += ", ";
    out += model::kOpGroupNames[g];
  }
  return out;
}

bool LayerDecision::keeps_everything() const {
  return std::all_of(group.begin(), group.end(), [](Action a) { return a == Action::kKeep; });
}

bool LayerDecision::overlapped() const {
  return std::any_of(group.begin(), group.end(), [](Action a) { return a == Action::kOverlap; });
}

std::vector<int> recompute_ops(const std::vector<model::Op>& ops, const LayerDecision& d) {
  const int n = static_cast<int>(ops.size());
  auto kept = [&](int i) { return d.action(ops[static_cast<size_t>(i)].group) == Action::kKeep; };
  auto saves = [&](int i, bool output) {
    const model::Op& op = ops[static_cast<size_t>(i)];
    if (op.saved_bytes == 0) return false;
    return op.saves == model::Saves::kInputAndOutput ||
           op.saves == (output ? model::Saves::kOutput : model::Saves::kInput);
  };
  // Is the output of op k (the input of op k+1) in memory without re-running anything?
  auto available = [&](int k) {
    if (k < 0) return true;  // the layer input is always kept
    return (kept(k) && saves(k, true)) || (k + 1 < n && kept(k + 1) && saves(k + 1, false));
  };
  std::vector<bool> rerun(static_cast<size_t>(n), false);
  auto need = [&](int j) {
    for (; j >= 0 && !rerun[static_cast<size_t>(j)]; --j) {
      rerun[static_cast<size_t>(j)] = true;
      if (available(j - 1)) break;
    }
  };
  for (int i = 0; i < n; ++i) {
    if (kept(i)) continue;
    if (d.rerun_whole_groups || saves(i, true)) need(i);
    if (saves(i, false) && !available(i - 1)) need(i - 1);
  }
  std::vector<int> order;
  for (int i = 0; i < n; ++i)
    if (rerun[static_cast<size_t>(i)]) order.push_back(i);
  return order;
}

bool overlaps_recompute(const RecomputePlan& plan) {
  return std::any_of(plan.stages.begin(), plan.stages.end(), [](const StagePlan& st) {
    return std::any_of(st.layers.begin(), st.layers.end(), [](const LayerDecision& d) { return d.overlapped(); });
  });
}

bool same_decisions(const RecomputePlan& a, const RecomputePlan& b) { return a.stages == b.stages; }

std::vector<int> uniform_partition(int layers, int virtual_stages) {
  LYNX_CHECK(virtual_stages > 0 && layers % virtual_stages == 0, "{} layers over {} stages",
             layers, virtual_stages);
  return std::vector<int>(static_cast<size_t>(virtual_stages), layers / virtual_stages);
}

std::vector<int> per_virtual_stage(const std::vector<int>& per_gpu, int virtual_stages) {
  const auto pp = per_gpu.size();
  std::vector<int> per_vs(pp * static_cast<size_t>(virtual_stages), 0);
  for (size_t c = 0; c < static_cast<size_t>(virtual_stages); ++c)
    for (size_t k = 0; k < pp; ++k) per_vs[c * pp + k] = per_gpu[k];
  return per_vs;
}

std::vector<int> stage_partition(int layers, const ParallelSpec& p) {
  std::vector<int> per_gpu = model::pipeline_stage_layers(layers, p);
  for (int& n : per_gpu) n /= p.virtual_stages;
  return per_virtual_stage(per_gpu, p.virtual_stages);
}

namespace {

LayerDecision keep_all() { return LayerDecision{}; }

/// Megatron's full recomputation: only the layer input stays; the whole layer forward,
/// TP collectives included, runs again before its backward.
LayerDecision whole_layer_recompute() {
  LayerDecision d;
  d.group.fill(Action::kRecompute);
  d.group[static_cast<size_t>(model::OpGroup::kLayerInput)] = Action::kKeep;
  d.rerun_whole_groups = true;
  return d;
}

/// Megatron's selective recomputation: the core attention (QK^T, softmax, dropout, ·V).
LayerDecision attention_core_recompute() {
  LayerDecision d;
  d.group[static_cast<size_t>(model::OpGroup::kAttnCore)] = Action::kRecompute;
  d.rerun_whole_groups = true;
  return d;
}

}  // namespace

RecomputePlan plan_fixed_strategy(const RecomputeSpec& recompute,
                                  const std::vector<int>& layers_per_stage) {
  RecomputePlan plan;
  plan.strategy = recompute_kind_name(recompute.strategy);
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
          // Megatron (TransformerBlock._checkpointed_forward): `block` recomputes only the
          // first num_layers layers of each virtual stage and keeps the rest; `uniform` cuts the
          // virtual stage's layers into chunks of num_layers from its first (the last chunk may
          // be shorter) and checkpoints each chunk as one function (tensor_parallel.checkpoint):
          // only the chunk's input is kept, and before the backward of its top layer the whole
          // chunk's forward runs again, bottom-up (schedule/program_builder.cpp), after which
          // its layers' backwards consume the recomputed activations. Here the chunk's upper
          // layers drop their input too, which the recompute of the layer below brings back.
          //
          // Memory (one micro-batch, a virtual stage of L layers in chunks of N dividing L; A:
          // a layer's saved bytes without recomputation, I: its input): L/N · I kept, and while
          // the top chunk is recomputed N · A − I more (its N layers' activations, less the
          // kept chunk input). A GPU holding f micro-batches peaks at the top chunk of the
          // oldest: static + f · (extras + L/N · I) + N · A − I, so N = L versus N = 1 differs
          // by (L − 1) · (A − f · I). Recompute FLOPs do not depend on N: every layer's forward
          // runs once more either way.
          const bool recomputed =
              recompute.method == FullMethod::kUniform || i < recompute.num_layers;
          LayerDecision d = recomputed ? whole_layer_recompute() : keep_all();
          if (recompute.method == FullMethod::kUniform && i % recompute.num_layers != 0)
            d.group[static_cast<size_t>(model::OpGroup::kLayerInput)] = Action::kRecompute;
          stage.layers.push_back(d);
          break;
        }
        default:
          fail(ErrorCode::kNotInBuild, "recompute.strategy '{}' needs a planner (not available in this build)",
               recompute_kind_name(recompute.strategy));
      }
    }
    plan.stages.push_back(std::move(stage));
  }
  return plan;
}

}  // namespace lynx::strategies
