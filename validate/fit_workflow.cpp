#include "validate/fit_workflow.hpp"

#include "common/error.hpp"
#include "runner/report.hpp"
#include "scenarios/scenario_loader.hpp"

#include <fmt/format.h>

namespace lynx::validate {
namespace {

/// simulate_stage on the input's runs.
std::vector<RowResult> simulate_input_rows(const Scenario& scenario, const FitWorkflowInput& input,
                                           const std::vector<std::size_t>& rows,
                                           const std::string& label, const StageProgress& progress) {
  return simulate_stage(scenario, input.runs, rows, input.file_label, input.fit.threads, label,
                        progress);
}

/// fit_hardware on `train` as one progress stage.
FitResult fit_stage(const FitWorkflowInput& input, const std::vector<std::size_t>& train,
                    const std::string& label, const StageProgress& progress) {
  if (progress.begin) progress.begin(label);
  FitResult result =
      fit_hardware(input.base, input.runs, train, input.file_label, input.fit, progress.update);
  if (progress.end) progress.end();
  return result;
}

std::vector<RowResult> subset(const std::vector<RowResult>& all,
                              const std::vector<std::size_t>& rows) {
  std::vector<RowResult> out;
  for (std::size_t i : rows) out.push_back(all.at(i));
  return out;
}

Scenario with_hardware(const Scenario& base, const HardwareSpec& hardware) {
  Scenario s = base;
  s.hardware = hardware;
  return s;
}

}  // namespace

std::vector<RowResult> simulate_stage(const Scenario& scenario, const std::vector<MeasuredRun>& runs,
                                      const std::vector<std::size_t>& rows,
                                      const std::string& file_label, unsigned threads,
                                      const std::string& label, const StageProgress& progress) {
  if (progress.begin) progress.begin(label);
  auto results = simulate_runs(scenario, runs, rows, file_label, progress.update, threads);
  if (progress.end) progress.end();
  return results;
}

std::string fold_name(int fold) { return fold == 0 ? "even" : "odd"; }

std::string every_nth_row(std::size_t stride) {
  return stride == 1 ? "every row" : fmt::format("every {}th row", stride);
}

FitWorkflowResult run_fit_workflow(const FitWorkflowInput& input, const StageProgress& progress,
                                   const std::function<void(const FoldResult&)>& on_fold) {
  const std::size_t n = input.runs.size();
  // Refused before any simulation: each summary (per held-out fold, all rows) needs 2 rows.
  const std::size_t least = input.folds ? 4 : 2;
  if (n < least)
    fail(ErrorCode::kInsufficientData, "{}: {} needs at least {} rows, got {}{}", input.file_label,
         input.folds ? "a fit with its two-fold held-out check" : "a fit", least, n,
         input.folds ? " (2 held out per fold); give more rows, or --skip-folds" : "");
  const std::vector<std::size_t> all = all_rows(n);
  FitWorkflowResult out;
  out.start_rows = simulate_input_rows(input.base, input, all, "start profile", progress);
  for (int fold = 0; fold < (input.folds ? 2 : 0); ++fold) {
    const std::vector<std::size_t> train = fold_rows(n, fold);
    const std::vector<std::size_t> test = fold_rows(n, 1 - fold);
    FoldResult f;
    f.fold = fold;
    f.train_rows = train.size();
    f.fit = fit_stage(input, train, fmt::format("fit on {} rows", fold_name(fold)), progress);
    const Scenario fitted = with_hardware(input.base, f.fit.hardware);
    const std::string held_out = fmt::format("{}, the {} rows held out by fold {}", input.file_label,
                                             fold_name(1 - fold), fold);
    f.fitted_held_out =
        summarize(simulate_input_rows(fitted, input, test, "held-out rows", progress), held_out);
    f.start_held_out = summarize(subset(out.start_rows, test), held_out);
    out.folds.push_back(f);
    if (on_fold) on_fold(out.folds.back());
  }
  out.final_fit = fit_stage(input, all, "fit on all rows", progress);
  const Scenario fitted = with_hardware(input.base, out.final_fit.hardware);
  out.fitted_rows = simulate_input_rows(fitted, input, all, "fitted profile", progress);
  out.start_summary = summarize(out.start_rows, input.file_label);
  out.fitted_summary = summarize(out.fitted_rows, input.file_label);
  return out;
}

HardwareSpec fitted_profile(const FitWorkflowInput& input, const FitWorkflowResult& result,
                            const std::string& name) {
  if (result.folds.size() != 2)
    fail(ErrorCode::kConflictingOptions, "the fitted profile's source reports the held-out check: run it (no --skip-folds)");
  const FitResult& fit = result.final_fit;
  HardwareSpec hw = fit.hardware;
  hw.profile = name;
  hw.profile_file.clear();
  std::string fitted_list;
  for (std::size_t i = 0; i < fit.keys.size(); ++i) {
    const FitParameter& p = fittable_parameter(fit.keys[i]);
    fitted_list += fmt::format("{}{} = {:.4g}{}{}", i ? ", " : "", p.key, fit.values[i],
                               p.unit.empty() ? "" : " ", p.unit);
  }
  std::string held_fixed;  // `--set k=v` values in the command, each held at its value
  for (const std::string& o : input.overrides) held_fixed += fmt::format(" --set {}", o);
  // The command reproduces the fit only with its parameter list when that is not the default.
  std::string fit_params;
  if (fit.keys != default_fit_keys())
    for (const std::string& k : fit.keys) fit_params += fmt::format(" --fit-param {}", k);
  const Summary& fold0 = result.folds[0].fitted_held_out;
  const Summary& fold1 = result.folds[1].fitted_held_out;
  hw.source = fmt::format(
      "Fitted by `lynxsim validate {} --fit{}{}` (lynxsim {}) to {} measured Megatron-DeepSpeed GPT "
      "iterations on one 8x A100 node (vTrain, Bang et al., MICRO 2024, "
      "data/ground_truth_single.csv): {}. Objective: mean |ln(predicted/measured)| over all "
      "rows (optimiser scoring {}), cyclic coordinate descent with golden section "
      "({} sweeps, {} steps). Two-fold held-out check (fit on even rows, test on odd; and the "
      "reverse): MAPE {:.2f}% / {:.2f}%, Kendall tau-b {:.3f} / {:.3f}; all rows: MAPE {:.2f}%, "
      "tau-b {:.3f}. Every other number is {}'s (citations there){}. See VALIDATION.md.",
      input.file_label, held_fixed, fit_params, runner::lynxsim_version(), input.runs.size(), fitted_list,
      every_nth_row(input.fit.inner_stride), input.fit.sweeps, input.fit.golden_steps,
      fold0.mape_percent, fold1.mape_percent, fold0.kendall_tau_b, fold1.kendall_tau_b,
      result.fitted_summary.mape_percent, result.fitted_summary.kendall_tau_b,
      input.base.hardware.profile, held_fixed.empty() ? "" : " or the --set values above");
  return hw;
}

std::string fitted_profile_file_text(const HardwareSpec& profile) {
  return "# Generated by `lynxsim validate --fit --write-profile`; do not edit by hand: rerun it\n"
         "# (VALIDATION.md). `source` below says how it was made.\n" +
         hardware_profile_to_yaml(profile);
}

}  // namespace lynx::validate
