#pragma once
/// The planners of recomputation decisions: lynx-heu (one policy per layer structure, fast
/// analytic search), lynx-opt (a MILP over every layer's decision) and checkmate (the same
/// MILP without overlap), all on windows measured from a simulated baseline, plus the
/// recomputation-aware stage partition. README "Lynx, as this project defines it".
/// Decisions only: runner/planning.cpp runs the baseline, the confirmations and the
/// comparisons on the engine and hands the measured windows in as plain numbers.
#include "hw_models/topology.hpp"
#include "model/workload.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/planning_problem.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lynx::strategies {

/// Every way to treat one layer with forward ops `layer` (a Workload's `layer` or, of a model
/// mixing dense and MoE layers, its `dense_layer`): keep everything (index 0), or drop a
/// non-empty subset of the op groups some op of it belongs to {post-collective tensors,
/// attention projections, attention core, MLP, and in an MoE layer the experts' activation
/// output (moe_act)} and bring it
/// back on demand or — when the recompute needs no communication (no TP collective, no
/// context-parallel ring) and `allow_overlap` — on the recompute stream in a window. Costs from
/// the compute model and idle-network collectives (and ring transfers).
std::vector<LayerOption> layer_options(const Scenario& sc, const hw_models::Topology& topo,
                                       const std::vector<model::Op>& layer, bool allow_overlap);

/// lynx-heu for one stage: identical layers share one policy. Of the kind of layer the stage
/// holds most of, inner layers (window: the layer above's backward) take policy A — or A on j
/// of them and A' on the rest, to use the memory budget exactly — and each chunk's top layer
/// (window: the pipeline wait) policy B; all (B, A, A', j) are scanned with O(1) evaluations.
/// Every other kind's layers (a mixed model's dense layers) take one policy per kind, each
/// combination of which is scanned with all (B, A, A', j).
StageSolution solve_stage_heuristic(const StageProblem& problem);

/// A stage time that marks a split as impossible (the stage does not fit in memory).
inline constexpr TimePs kInfeasiblePs = INT64_MAX / 4;

/// The contiguous split of `layers` over `stages` (each ≥ 1 layer) minimising the largest
/// stage_time(stage, first_layer_on_it, layers_on_it), by dynamic programming; ties keep the
/// split closer to uniform. Empty when every split has an infeasible stage.
std::vector<int> min_max_partition(int layers, int stages,
                                   const std::function<TimePs(int stage, int first, int layers)>& stage_time);

/// Windows measured on the baseline, per virtual stage: inner layers and top layer.
struct StageWindows {
  TimePs inner_ps = 0;
  TimePs top_ps = 0;
  TimePs forward_ps = 0;  ///< idle on TP communication in one layer's forward (median)
  /// The same windows' timelines (runner/planning.cpp measures them); when `profiled`, the
  /// planners price overlapped recomputes with sim::window_cost_ps on them.
  bool profiled = false;
  sim::WindowProfile inner_profile, top_profile, forward_profile;
};

/// The planners' windows per virtual stage from the baseline's capacities (per virtual stage,
/// per layer: `capacity[vs][i]`; forward: one per virtual stage): the top layer's own, and for
/// the inner layers the median of theirs (the upper one of an even count; the top layer's when
/// it is alone).
std::vector<StageWindows> stage_windows(const std::vector<std::vector<TimePs>>& capacity,
                                        const std::vector<TimePs>& forward, int virtual_stages);

/// What the planners take from the schedule and the simulated baseline, as plain numbers
/// (runner/planning.cpp measures them; strategies/ never runs the engine).
struct PlanningInputs {
  std::vector<StageWindows> windows;  ///< per virtual stage
  /// Per pipeline stage: the most (micro-batch, chunk) activation sets the schedule keeps alive
  /// at once (GPipe m, 1F1B min(p − k, m), interleaved in chunks).
  std::vector<int> in_flight_chunks;
  /// Exposed TP communication per layer and micro-batch on the baseline (the partition's
  /// stage times).
  TimePs tp_exposed_per_layer_ps = 0;
  /// Per virtual stage (or empty): its backward steps that directly follow one of its forward
  /// steps on the GPU (those have a forward window), out of the micro-batches.
  std::vector<int> forward_windowed_steps;
  /// Per pipeline stage (or empty: none): micro-batches whose deferred weight pass (ZB-H1) is
  /// pending at the stage's peak, each holding weight_pass_bytes_per_layer per layer.
  std::vector<int> weight_pending;
  std::int64_t weight_pass_bytes_per_layer = 0;
};

/// One search: every pipeline stage's problem and solution, and the plan they make.
struct SearchResult {
  RecomputePlan plan;                    ///< strategy = the planner's name
  std::vector<StageProblem> problems;    ///< per pipeline stage (GPU)
  std::vector<StageSolution> solutions;  ///< per pipeline stage
};

/// Called after every stage solve with (solves done, solves in this call).
using SolveProgress = std::function<void(int done, int total)>;

/// lynx-heu, lynx-opt or checkmate (sc.recompute.strategy) for one resolved scenario: the
/// per-stage problems from the layer options, the memory budgets and the measured windows;
/// solving, partitioning (sc.recompute.partition) and the narrower alternatives the engine
/// compares the plan with. Pure: it never simulates.
class LynxPlanner {
 public:
  /// Throws lynx::Error when sc.recompute.strategy is not a planner.
  LynxPlanner(const Scenario& sc, const hw_models::Topology& topo, const model::Workload& workload,
              PlanningInputs inputs);

  /// Partitions the layers and solves every stage with its budget cut by cut_bytes[stage]
  /// (bytes the engine found a previous plan to overflow by).
  SearchResult search(const std::vector<std::int64_t>& cut_bytes,
                      const SolveProgress& progress = {}) const;

  /// After the engine ran `searched`: adds to cut_bytes[k] how far each simulated GPU of
  /// stage k overflowed (peak_bytes[g] − capacity) when stage k's solution claimed to fit.
  /// True when a cut grew (search again).
  bool tighten_budgets(const SearchResult& searched, const std::vector<int>& gpu_stage,
                       const std::vector<std::int64_t>& peak_bytes,
                       std::vector<std::int64_t>& cut_bytes) const;

  /// The narrower plans the engine compares `searched` with, in order, each named by its
  /// strategy: "no-forward-windows" and "no-overlap" (the same problems with fewer options;
  /// not for checkmate), then Megatron's "selective" and "full".
  std::vector<RecomputePlan> alternatives(const SearchResult& searched,
                                          const SolveProgress& progress = {}) const;

  const PlanningInputs& inputs() const { return inputs_; }

  /// The recomputation-aware partition's objective for GPU `stage` holding `layers_per_chunk`
  /// layers in each of its chunks, from layer row `first_row` of each chunk's layers (budget
  /// cut by `cut_bytes`): its time per micro-batch — layers, embedding / head, exposed
  /// recompute of lynx-heu's plan under its own memory budget — or kInfeasiblePs when nothing
  /// fits. The balanced split minimises its maximum.
  TimePs partition_stage_time_ps(int stage, int first_row, int layers_per_chunk, std::int64_t cut_bytes) const;

 private:
  int in_flight(int stage) const;
  /// Index into option_sets_ of global layer `global_layer`.
  int option_set_of(int global_layer) const;
  StageProblem problem(int stage, const std::vector<int>& layers_per_vs, const std::vector<int>& first_layer_of_vs,
                       std::int64_t cut) const;
  StageSolution solve(const StageProblem& pr) const;
  std::vector<int> balanced_partition(const std::vector<std::int64_t>& cut) const;
  std::vector<int> per_virtual_stage(const std::vector<int>& per_gpu) const;
  RecomputePlan materialize(const std::vector<int>& layers_per_vs,
                            const std::vector<StageSolution>& solutions) const;
  RecomputePlan solve_restricted(const SearchResult& searched,
                                 const std::function<bool(const LayerOption&)>& allowed,
                                 const SolveProgress& progress) const;

  const Scenario& sc_;
  const ParallelSpec& p_;
  const model::Workload& w_;
  PlanningInputs inputs_;
  int micro_batches_ = 0, chunks_ = 1, virtual_stages_ = 1;
  /// Per kind of layer (0: the workload's `layer`, 1: a mixed model's dense layers): its
  /// options and its forward + backward time.
  std::vector<std::vector<LayerOption>> option_sets_;
  std::vector<TimePs> layer_ps_of_set_;
  std::int64_t embedding_saved_ = 0, head_saved_ = 0;
  TimePs embedding_ps_ = 0, head_ps_ = 0;
};

/// What planning produced, for reports and plan files (runner/planning.cpp fills it).
struct PlannerOutput {
  RecomputePlan plan;                    ///< the plan that ran (a fallback's when one won)
  std::vector<StageProblem> problems;    ///< per pipeline stage (GPU), as finally solved
  std::vector<StageSolution> solutions;  ///< per pipeline stage
  std::vector<StageWindows> windows;     ///< per virtual stage, from the baseline
  double search_seconds = 0;             ///< wall time of every planner decision (all rounds)
  double baseline_seconds = 0;           ///< the window-measuring simulation
  int confirm_rounds = 0;                ///< searches confirmed by the engine (budget tightened on OOM)
  /// "" when the searched plan won; else what the engine found faster and was kept instead:
  /// "no-forward-windows" / "no-overlap" (the same search with fewer options), "selective" or
  /// "full".
  std::string fallback;
};

}  // namespace lynx::strategies
