#pragma once
/// The per-stage recomputation planning problem that lynx-heu, lynx-opt and checkmate solve:
/// choose for every layer of one pipeline-stage GPU one option (which op groups to drop and
/// whether their recompute runs on demand or overlapped in a window) so that the stage's
/// exposed recompute time is minimal and its activation memory fits the budget. Numbers come
/// from the workload, the compute model and windows measured on a simulated baseline
/// (strategies/lynx_planner.cpp, from numbers runner/planning.cpp measures); every plan is
/// confirmed by the engine afterwards (runner/).
#include "sim/time.hpp"
#include "sim/window_cost.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::strategies {

/// One way to treat one layer.
struct LayerOption {
  LayerDecision decision;            ///< groups dropped, on demand or overlapped (+ window)
  std::int64_t kept_bytes = 0;       ///< activation bytes the layer keeps per micro-batch
  std::int64_t transient_bytes = 0;  ///< extra bytes alive while its recompute is consumed
  TimePs recompute_ps = 0;           ///< on demand: time on the critical path
  /// Overlapped: time the recompute needs on the recompute stream (slowed by contention with
  /// the communication it hides behind). Only the part beyond the window is exposed.
  TimePs overlapped_ps = 0;
  /// Overlapped: solo kernel time of the recompute (what sim::window_cost_ps is given).
  TimePs overlapped_work_ps = 0;
  bool overlapped = false;
  /// Bytes held for a whole pipeline step (forward-window recomputes: the tensors come back
  /// in the forward before the backward). Planners fold them into kept_bytes per stage as
  /// ceil(held / in_flight), so memory stays in_flight · Σ kept + max transient.
  std::int64_t held_bytes = 0;
  std::string label;                 ///< e.g. "drop{core,mlp}@bwd-tp"
};

/// One pipeline-stage GPU's problem.
struct StageProblem {
  int stage = 0;
  int layers = 0;                    ///< layers on this GPU (all model chunks)
  int in_flight = 1;                 ///< micro-batches whose activations are alive at once
  std::int64_t budget_bytes = 0;     ///< for activations: capacity − static − reserve − extras
  /// Every way to treat a layer, per kind of layer (a model mixing dense and MoE layers has
  /// two: their op groups differ); option_sets[s][0] keeps everything.
  std::vector<std::vector<LayerOption>> option_sets;
  /// Per layer (size = layers, or empty: every layer takes set 0): its index into option_sets.
  std::vector<int> set_of_layer;
  /// Window capacity (ps) available to layer i's overlapped recompute (size = layers): the
  /// exposed communication in the backward of the layer above, or the pipeline wait for the
  /// top layer.
  std::vector<TimePs> window_ps;
  /// Forward-window capacity (ps) per layer, for options with window kFwdTpComm (empty: 0).
  std::vector<TimePs> fwd_window_ps;
  /// Per layer (size = layers, or empty): the window's timeline. When given, an overlapped
  /// option costs sim::window_cost_ps (SM sharing included) instead of its overflow of window_ps.
  std::vector<sim::WindowProfile> window_profile;
  /// Per layer (size = layers, or empty): the same for the forward window.
  std::vector<sim::WindowProfile> fwd_window_profile;
  /// Per layer (size = layers, or empty: every step): of the stage's micro_batches backward
  /// steps, those that follow a forward step of the same chunk and so have a forward window;
  /// in the others (1F1B's cool-down) a forward-window recompute starts at its consumer.
  std::vector<int> fwd_window_steps;
  int micro_batches = 0;  ///< backward steps per chunk (with fwd_window_steps)

  int set_of(int layer) const {
    return set_of_layer.empty() ? 0 : set_of_layer[static_cast<size_t>(layer)];
  }
  const std::vector<LayerOption>& options_of(int layer) const {
    return option_sets[static_cast<size_t>(set_of(layer))];
  }
  /// Option `o` of layer `layer`'s set.
  const LayerOption& option(int layer, int o) const { return options_of(layer)[static_cast<size_t>(o)]; }
};

/// A solution: the option index for every layer.
struct StageSolution {
  std::vector<int> option_of_layer;  ///< into the layer's own set (StageProblem::options_of)
  TimePs exposed_ps = 0;           ///< objective: exposed recompute time per micro-batch
  std::int64_t activation_bytes = 0;  ///< in_flight · Σ kept + max transient
  bool feasible = false;           ///< false: nothing fits (the plan will be OOM)
  double solve_seconds = 0;
  double gap = 0;                  ///< relative optimality gap reported by the solver (0 = optimal)
  /// The MILP's node limit stopped the search: the plan is the best found, `gap` from optimal.
  bool limit_bound = false;
  std::string status;              ///< solver status in words
};

/// Exposed time of `option` at layer `layer` of `p` (on demand: all of it; overlapped: its
/// sim::window_cost_ps when the layer has a window profile, else what does not fit window_ps).
TimePs exposed_ps(const StageProblem& p, int layer, const LayerOption& option);
/// Kernel time `option` spends recomputing wherever it runs (overlapped: slowed by the
/// contention of the communication it hides behind). The planners' tie-break between options
/// of equal exposed time: a recompute the window model prices at 0 still takes SMs from the
/// kernels and collectives beside it, so of two equally exposed plans the one that recomputes
/// less is preferred (tests/strategies/test_milp_planner.cpp).
TimePs recompute_work_ps(const LayerOption& option);
/// Activation bytes of a full assignment: in_flight · Σ kept_bytes + max transient_bytes.
std::int64_t activation_bytes(const StageProblem& p, const std::vector<int>& option_of_layer);
/// Objective and memory of an assignment, filled into a StageSolution.
StageSolution evaluate(const StageProblem& p, const std::vector<int>& option_of_layer);

}  // namespace lynx::strategies
