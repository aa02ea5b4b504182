#pragma once
/// `lynxsim validate --fit` as a workflow: score the start profile on every row, fit on each
/// half and test on the other (the two-fold held-out check), fit on all rows, score the fitted
/// profile, and describe the fitted profile (its `source` says how it was made). The CLI
/// parses options and prints; everything it reports is computed here.
#include "scenarios/scenario.hpp"
#include "validate/fit.hpp"
#include "validate/measured_runs.hpp"
#include "validate/validation.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace lynx::validate {

/// What the workflow fits, on which rows, with which options.
struct FitWorkflowInput {
  Scenario base;                        ///< validation_base_scenario: the start profile
  std::vector<MeasuredRun> runs;        ///< every measured row
  std::string file_label;               ///< the CSV, for messages and the profile's source
  std::vector<std::string> overrides;   ///< the --set values held fixed, for the profile's source
  FitOptions fit;                       ///< keys, sweeps, steps, inner stride, threads
  bool folds = true;                    ///< false: fit on all rows only (no held-out check)
};

/// One half of the held-out check.
struct FoldResult {
  int fold = 0;                     ///< 0: fit on the even rows, test on the odd; 1: reverse
  std::size_t train_rows = 0;
  FitResult fit;
  Summary start_held_out;           ///< the start profile on the held-out rows
  Summary fitted_held_out;          ///< the fold's fitted profile on the held-out rows
};

/// Everything the workflow computed.
struct FitWorkflowResult {
  std::vector<RowResult> start_rows;   ///< every row, start profile
  std::vector<FoldResult> folds;       ///< two, or none without the held-out check
  FitResult final_fit;                 ///< on all rows
  std::vector<RowResult> fitted_rows;  ///< every row, the profile fitted on all rows
  Summary start_summary;
  Summary fitted_summary;
};

/// How the workflow reports progress: each stage (simulating rows, one fit) is begun with a
/// label, updated with (done, total), and ended. Any member may be empty.
struct StageProgress {
  std::function<void(const std::string& label)> begin;
  Progress update;
  std::function<void()> end;
};

/// simulate_runs of `rows` as one progress stage named `label`.
std::vector<RowResult> simulate_stage(const Scenario& scenario, const std::vector<MeasuredRun>& runs,
                                      const std::vector<std::size_t>& rows,
                                      const std::string& file_label, unsigned threads,
                                      const std::string& label, const StageProgress& progress);

/// "even" for fold 0, "odd" for fold 1.
std::string fold_name(int fold);
/// "every row" or "every Nth row" (how many training rows the optimiser scores).
std::string every_nth_row(std::size_t stride);

/// Runs the workflow. `on_fold` (optional) is called as each fold finishes, so its report can
/// be printed while the next fit runs. Throws lynx::Error as fit_hardware and simulate_runs do.
FitWorkflowResult run_fit_workflow(const FitWorkflowInput& input, const StageProgress& progress = {},
                                   const std::function<void(const FoldResult&)>& on_fold = {});

/// The profile fitted on all rows, named `name`, with a `source` that says how it was made
/// (command, data, fitted values, optimiser, held-out and all-row scores). Needs the held-out
/// check (throws lynx::Error without folds).
HardwareSpec fitted_profile(const FitWorkflowInput& input, const FitWorkflowResult& result,
                            const std::string& name);

/// The fitted profile as a profile file: a "generated, do not edit" header, then the YAML.
std::string fitted_profile_file_text(const HardwareSpec& profile);

}  // namespace lynx::validate
