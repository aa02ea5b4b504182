#pragma once
/// The planners of recomputation decisions: lynx-heu (one policy per layer structure, fast
/// analytic search), lynx-opt (a MILP over every layer's decision) and checkmate (the same
/// MILP without overlap), all on windows measured from a simulated baseline, plus the
/// recomputation-aware stage partition. DESIGN.md "Lynx as this project defines it".
#include "hw_models/topology.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/planning_problem.hpp"
#include "strategies/program_builder.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lynx::strategy {

/// Every way to treat one layer: keep everything (index 0), or drop a non-empty subset of the
/// op groups {post-collective tensors, attention projections, attention core, MLP} and bring it
/// back on demand or — when the recompute needs no communication and `allow_overlap` — on the
/// recompute stream in a window. Costs from the compute model and idle-network collectives.
std::vector<LayerOption> layer_options(const Scenario& sc, const hw::Topology& topo,
                                       const Workload& workload, bool allow_overlap);

/// lynx-heu for one stage: identical layers share one policy. Inner layers (window: the
/// layer above's backward) take policy A — or A on j of them and A' on the rest, to use the
/// memory budget exactly — and each chunk's top layer (window: the pipeline wait) policy B;
/// all (B, A, A', j) are scanned with O(1) evaluations.
StageSolution solve_stage_heuristic(const StageProblem& problem);

/// A stage time that marks a split as impossible (the stage does not fit in memory).
inline constexpr TimePs kInfeasiblePs = INT64_MAX / 4;

/// The contiguous split of `layers` over `stages` (each ≥ 1 layer) minimising the largest
/// stage_time(stage, layers_on_it), by dynamic programming; ties keep the split closer to
/// uniform. Empty when every split has an infeasible stage.
std::vector<int> min_max_partition(int layers, int stages,
                                   const std::function<TimePs(int stage, int layers)>& stage_time);

/// Windows measured on the baseline, per virtual stage: inner layers and top layer.
struct StageWindows {
  TimePs inner_ps = 0;
  TimePs top_ps = 0;
  TimePs forward_ps = 0;  ///< TP-gated idle in one layer's forward (median)
};

struct PlannerOutput {
  RecomputePlan plan;
  std::vector<StageProblem> problems;    ///< per pipeline stage (GPU), as finally solved
  std::vector<StageSolution> solutions;  ///< per pipeline stage
  std::vector<StageWindows> windows;     ///< per virtual stage, from the baseline
  double search_seconds = 0;             ///< solver / heuristic time, summed over stages
  double baseline_seconds = 0;           ///< the window-measuring simulation
  int confirm_rounds = 0;                ///< engine confirmations (budget tightened on OOM)
  /// "" when the searched plan won; else what the engine found faster and was kept instead:
  /// "no-forward-windows" / "no-overlap" (the same search with fewer options), "selective" or
  /// "full".
  std::string fallback;
};

/// Plans sc.recompute.strategy (lynx-heu, lynx-opt or checkmate) for a resolved scenario:
/// measures windows on a keep-everything baseline, builds one StageProblem per pipeline stage,
/// solves, partitions layers (sc.recompute.partition), and confirms with the engine: a stage
/// that overflows in simulation has its budget cut by the overflow and is planned again
/// (at most 3 rounds). Finally the engine compares the plan with Megatron's selective and
/// full recomputation and keeps the fastest that fits.
PlannerOutput plan_recompute(const Scenario& sc, const hw::Topology& topo, const Workload& workload);

}  // namespace lynx::strategy
