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

namespace lynx::strategies {

inline constexpr int kNumOpGroups = static_cast<int>(model::kOpGroupNames.size());  ///< model::OpGroup values

/// The plan-file names of the groups a plan may drop, for messages: "post, proj, …" (every
/// group but the layer input, which only a layer of a full-recompute chunk drops).
std::string droppable_group_names();

enum class Action : std::uint8_t {
  kKeep,       ///< stored in forward, freed by its backward consumer
  kRecompute,  ///< dropped in forward, recomputed on the compute stream just before backward
  kOverlap,    ///< dropped in forward, recomputed on the recompute stream in `window`
};

/// Communication windows a recompute can hide in (schedule/overlap_windows.hpp finds them).
/// Communication windows an overlapped recompute can hide in: intervals in which the compute
/// stream would idle waiting on communication (found from the simulated schedule; see
/// schedule/overlap_windows.hpp).
enum class Window : std::uint8_t {
  kNone,
  kBwdTpComm,   ///< the exposed TP collectives in the backward pass of the layer above
  kPpRecvWait,  ///< the wait for this micro-batch's gradient from the next stage (top layer)
  /// The exposed TP collectives of the same layer in the forward step that precedes this
  /// backward step on the GPU (1F1B steady state); falls back to the backward's start.
  kFwdTpComm,
};

/// What happens to one layer's saved activations. Dropped groups are brought back by one
/// recompute pass that re-runs the ops recompute_ops() names, either on the compute stream
/// right before the layer's backward (all dropped groups kRecompute) or on the recompute stream
/// from the start of `window` (all dropped groups kOverlap).
struct LayerDecision {
  std::array<Action, kNumOpGroups> group{};  ///< indexed by model::OpGroup
  Window window = Window::kNone;             ///< where kOverlap groups run
  /// Re-run every op of a dropped group, as Megatron's checkpointed functions do (selective
  /// re-runs the whole core attention including ·V; full re-runs the whole layer). Lynx plans
  /// re-run only what is needed to bring the dropped tensors back.
  bool rerun_whole_groups = false;

  Action action(model::OpGroup g) const { return group[static_cast<size_t>(g)]; }
  bool keeps_everything() const;
  bool overlapped() const;  ///< any group kOverlap
  bool operator==(const LayerDecision&) const = default;
};

/// Indices (into `layer_ops`) of the forward ops a layer's recompute pass re-runs, in order:
/// the ops whose saved tensors are dropped and, recursively, the producers of inputs that are
/// neither kept nor re-run (ops form a chain: op i reads op i−1's output).
std::vector<int> recompute_ops(const std::vector<model::Op>& layer_ops, const LayerDecision& d);

/// Layers of one virtual pipeline stage (model chunk) and their decisions.
struct StagePlan {
  int first_layer = 0;
  std::vector<LayerDecision> layers;
  bool operator==(const StagePlan&) const = default;
};

struct RecomputePlan {
  std::string strategy;            ///< "none", "full", "selective", ...
  std::vector<StagePlan> stages;   ///< per virtual stage: chunk c of GPU k is c·pp + k
};

/// Whether two plans make the same decisions for every layer (their names aside): the program
/// builder then builds the same programs, so one engine run stands for both.
bool same_decisions(const RecomputePlan& a, const RecomputePlan& b);

/// Whether any layer of `plan` recomputes overlapped (Lynx): its allocation times then depend
/// on the timeline, so fast mode's peak memory is within a bound rather than exact.
bool overlaps_recompute(const RecomputePlan& plan);

/// Uniform layer split over pp·v virtual stages (layers must divide evenly: checked earlier).
std::vector<int> uniform_partition(int layers, int virtual_stages);
/// The scenario's layer split over its pp·v virtual stages (chunk c of GPU k: c·pp + k): uniform,
/// or parallel.first_stage_layers / last_stage_layers (model::pipeline_stage_layers), each chunk
/// of GPU k holding its layers / v. Checked when the scenario was resolved.
std::vector<int> stage_partition(int layers, const ParallelSpec& p);
/// The same from per-GPU counts (size pp): chunk c of GPU k holds per_gpu[k] layers.
std::vector<int> per_virtual_stage(const std::vector<int>& per_gpu, int virtual_stages);

/// Plans for the strategies that need no search: none, full (uniform / block with
/// recompute.num_layers), selective. Throws for strategies that need a planner.
RecomputePlan plan_fixed_strategy(const RecomputeSpec& recompute,
                                  const std::vector<int>& layers_per_stage);

}  // namespace lynx::strategies
