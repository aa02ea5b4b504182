#pragma once
/// A recomputation plan: for every layer of every virtual pipeline stage, what happens to each
/// op group's saved activations — kept, recomputed on demand before the layer's backward, or
/// recomputed overlapped on the recompute stream inside a communication window.
#include "model/gpt.hpp"
#include "scenarios/scenario.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace lynx::strategy {

inline constexpr int kNumOpGroups = 5;  ///< model::OpGroup values

enum class Action : std::uint8_t {
  kKeep,       ///< stored in forward, freed by its backward consumer
  kRecompute,  ///< dropped in forward, recomputed on the compute stream just before backward
  kOverlap,    ///< dropped in forward, recomputed on the recompute stream in `window`
};

/// Communication windows a recompute can hide in (strategies/overlap_windows.hpp finds them).
enum class Window : std::uint8_t {
  kNone,
  kBwdTpComm,    ///< the TP collectives of the backward pass of the layer above
  kPpRecvWait,   ///< waiting for the gradient of this micro-batch from the next stage
};

struct LayerDecision {
  std::array<Action, kNumOpGroups> group{};  ///< indexed by model::OpGroup
  /// Re-run the whole layer forward including its TP collectives (Megatron's full
  /// recomputation); group actions are then all kRecompute.
  bool whole_layer = false;
  Window window = Window::kNone;  ///< where kOverlap groups run

  Action action(model::OpGroup g) const { return group[static_cast<size_t>(g)]; }
  bool keeps_everything() const;
};

/// Layers of one virtual pipeline stage (model chunk) and their decisions.
struct StagePlan {
  int first_layer = 0;
  std::vector<LayerDecision> layers;
};

struct RecomputePlan {
  std::string strategy;            ///< "none", "full", "selective", ...
  std::vector<StagePlan> stages;   ///< per virtual stage: chunk c of GPU k is c·pp + k
};

/// Uniform layer split over pp·v virtual stages (layers must divide evenly: checked earlier).
std::vector<int> uniform_partition(int layers, int virtual_stages);

/// Plans for the strategies that need no search: none, full (uniform / block with
/// recompute.num_layers), selective. Throws for strategies that need a planner.
RecomputePlan plan_fixed_strategy(const ModelSpec& model, const ParallelSpec& parallel,
                                  const RecomputeSpec& recompute,
                                  const std::vector<int>& layers_per_stage);

std::string to_string(RecomputeKind kind);

}  // namespace lynx::strategy
