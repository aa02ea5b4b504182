#pragma once
/// The paper experiment behind `lynxsim figures`: every paper scenario (CLUSTER-MODEL.yaml)
/// under each recomputation strategy, one simulation per pair, written as one CSV whose
/// columns are the result-field table's plus the experiment's own (paper_columns()).
#include "runner/result_fields.hpp"
#include "runner/simulate.hpp"

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace lynx::runner {

/// Which part of the experiment to run; empty lists keep everything.
struct PaperSelection {
  std::string scenario_dir;             ///< folder of CLUSTER-MODEL.yaml files
  std::vector<std::string> strategies;  ///< subset of paper_strategies(), in the order to run
  std::vector<std::string> models;      ///< model presets to keep
  std::vector<std::string> clusters;    ///< clusters (file-name prefixes) to keep
  /// `KEY=VALUE` overrides applied to every scenario (`figures --global-batch`: the paper set
  /// at a production batch, same layouts).
  std::vector<std::string> overrides;
};

/// One simulation to run: a paper scenario with the strategy to request.
struct PaperRun {
  std::string cluster;  ///< the file name's prefix (nvlink, pcie)
  model::ResolvedScenario scenario;  ///< recompute.strategy set to `strategy`
  std::string strategy;
};

/// One finished run of the experiment.
struct PaperRow {
  std::string cluster;
  SimResult result;
  /// tokens/s ÷ those of full recomputation of the same cluster and model; empty when full
  /// was not run or does not fit.
  std::optional<double> throughput_vs_full;
};

/// A column of the experiment's CSV that is not a result field (it needs the other rows).
struct PaperColumn {
  const char* name;
  const char* unit;
  const char* description;
  FieldValue (*value)(const PaperRow& row);
};

/// none, full, selective, checkmate, lynx-heu, lynx-opt: the order of the paper's bars.
const std::vector<std::string>& paper_strategies();

/// The experiment's own columns, written before the result fields.
const std::vector<PaperColumn>& paper_columns();

/// The simulations `selection` asks for: clusters by name, models smallest first, strategies
/// in the order asked. lynx::Error for a missing folder, a file not named CLUSTER-MODEL.yaml,
/// an unknown strategy or a selection that matches no scenario.
std::vector<PaperRun> paper_runs(const PaperSelection& selection);

/// Runs every simulation; `before_each(done, run)` is called before each one (progress).
std::vector<PaperRow> run_paper_experiment(
    const std::vector<PaperRun>& runs,
    const std::function<void(std::size_t done, const PaperRun& next)>& before_each = {});

/// The CSV: `#` comment lines, a header, one row per run. Stage fields are those of the
/// run's slowest stage (most compute-stream work); its index is the `stage` column.
/// `overrides` (the selection's) are named in a comment line.
void write_paper_csv(std::ostream& out, const std::vector<PaperRow>& rows,
                     const std::vector<std::string>& overrides = {});

/// paper_columns() as Markdown (docs/results.md holds it between GENERATED markers).
std::string paper_columns_markdown();

}  // namespace lynx::runner
