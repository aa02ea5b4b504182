#pragma once
/// Plan files: a recomputation plan as YAML (`lynxsim plan FILE -o plan.yaml`), read back by
/// `lynxsim run --plan` and by live mode. A plan file holds the resolved scenario it was made
/// for (so it needs no other input), how it was made (informational), and per virtual stage
/// its layers and, per layer, the dropped op groups, how they come back (on demand /
/// overlapped) and in which window. Written with yaml-cpp's emitter: any name reads back.
#include "scenarios/key_origins.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::strategies {

/// Version of the plan-file format this lynxsim writes and reads (`lynxsim_plan:`).
inline constexpr int kPlanFormatVersion = 2;

/// The planner's search result for one pipeline stage (informational).
struct PlanStageSearch {
  int stage = 0;
  std::string status;                     ///< "optimal", "heuristic", "node limit (gap …)", ...
  bool feasible = false;
  double exposed_us_per_micro_batch = 0;  ///< planner's estimate of exposed recompute
  std::int64_t activation_bytes = 0;      ///< planned activation memory of the stage
  std::int64_t budget_bytes = 0;          ///< the memory budget it was planned for
  double gap = 0;                         ///< relative MILP gap (0 = optimal)
  bool limit_bound = false;               ///< the MILP node limit stopped the search
};

/// Overlap windows measured on the planner's baseline for one virtual stage (informational).
struct PlanWindows {
  int virtual_stage = 0;
  double inner_us = 0;  ///< window of the inner layers (the layer above's backward)
  double top_us = 0;    ///< window of the chunk's top layer (the pipeline wait)
};

/// How a plan was made: read back, never used to execute it.
struct PlanProvenance {
  std::string lynxsim_version;     ///< of the lynxsim that wrote the plan
  std::string strategy_requested;  ///< recompute.strategy as asked
  std::string strategy_won;        ///< what the planner kept (a fallback, or the strategy asked)
  double search_seconds = 0;       ///< planner search (heuristic / MILP), summed over stages
  double baseline_seconds = 0;     ///< the window-measuring baseline simulation
  int confirm_rounds = 0;          ///< engine confirmations of the searched plan
  /// The MILP node limit (recompute.solver_nodes) stopped some stage's search: the plan is the
  /// best found, up to solver_gap from optimal.
  bool solver_limit_bound = false;
  double solver_gap = 0;           ///< largest relative MILP gap over stages (0 = optimal)
  std::vector<PlanStageSearch> stages;  ///< per pipeline stage; empty for fixed strategies
  std::vector<PlanWindows> windows;     ///< per virtual stage; empty for fixed strategies
};

/// Everything a plan file holds.
struct PlanFile {
  RecomputePlan plan;
  /// The resolved scenario the plan was made for (model preset filled in), as `lynxsim show`
  /// prints it. Read back, its source_file is the plan file.
  Scenario scenario;
  PlanProvenance provenance;
  /// Where the plan file gives each key of `scenario` (the plan file's own positions), so a
  /// mismatch with another scenario names the line; empty for a plan made in memory.
  KeyOrigins scenario_origins{std::string()};
};

/// The plan file as YAML; reading it back gives the same PlanFile (doubles to 6 digits).
std::string plan_to_yaml(const PlanFile& file);

/// Reads a plan file. Every error is one line naming FILE:LINE:COL and the key (errors in the
/// embedded scenario name the plan file's own lines). Checks the plan against its embedded
/// scenario: pp·v stages, contiguous layers, and whatever the program builder could not build
/// (validate_plan in strategies/plan_check.hpp).
PlanFile read_plan_file(const std::string& path);
/// Same, from text; `file_label` is used in messages.
PlanFile read_plan_text(const std::string& yaml_text, const std::string& file_label);

/// Plan-file name of a window: none, bwd-tp, pp-wait, fwd-tp.
const char* window_name(Window window);

}  // namespace lynx::strategies
