// `lynxsim validate`: simulate measured training iterations (the vTrain single-node CSV) and
// compare; with --fit, calibrate a few global hardware parameters with a two-fold held-out
// check, then on all rows, and optionally write the fitted hardware profile.
#include "apps/cli.hpp"
#include "common/progress.hpp"
#include "runner/report.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/error.hpp"
#include "validate/fit.hpp"
#include "validate/validation.hpp"
#include "validate/validation_report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

namespace lynx::cli {

int cmd_validate(const std::vector<std::string>& argv);

namespace {

namespace val = lynx::validate;

/// validate/'s progress callback, drawn on `bar` (common/progress.hpp).
val::Progress draw_on(ProgressBar& bar) {
  return [&bar](std::size_t done, std::size_t total) {
    bar.set_total(total);
    bar.update(done);
  };
}

std::vector<val::RowResult> simulate_with_bar(const Scenario& base,
                                              const std::vector<val::MeasuredRun>& runs,
                                              const std::vector<std::size_t>& rows,
                                              const std::string& csv, const std::string& label,
                                              unsigned threads) {
  ProgressBar bar(rows.size(), label);
  auto rows_done = val::simulate_runs(base, runs, rows, csv, draw_on(bar), threads);
  bar.finish();
  return rows_done;
}

std::vector<val::RowResult> subset(const std::vector<val::RowResult>& all,
                                   const std::vector<std::size_t>& rows) {
  std::vector<val::RowResult> out;
  for (std::size_t i : rows) out.push_back(all.at(i));
  return out;
}

std::string fold_name(int fold) { return fold == 0 ? "even" : "odd"; }

std::string every_nth_row(std::size_t stride) {
  return stride == 1 ? "every row" : fmt::format("every {}th row", stride);
}

}  // namespace

int cmd_validate(const std::vector<std::string>& argv) {
  std::string csv;
  std::string profile = "dgx-a100-80gb";
  std::string profile_file;
  std::vector<std::string> overrides;
  std::string format = "table";
  bool fit = false;
  std::vector<std::string> fit_keys;
  std::size_t inner_stride = 4;
  int sweeps = 3;
  int golden_steps = 12;
  std::string write_profile;
  std::string fitted_name = "dgx-a100-80gb-vtrain-fit";
  std::size_t worst = 10;
  bool no_rows = false;
  bool skip_folds = false;
  unsigned threads = 2;

  po::options_description desc("validate options");
  desc.add_options()("csv", po::value(&csv), "measured runs (vTrain CSV: 11 columns per row)")(
      "profile", po::value(&profile), "built-in hardware profile (default dgx-a100-80gb)")(
      "profile-file", po::value(&profile_file), "hardware profile YAML (instead of --profile)")(
      "set", po::value(&overrides)->composing(),
      "override a scenario field for every row: --set key.path=value (repeatable; the row's "
      "shape and layout win)")("format", po::value(&format), "table | csv (default table)")(
      "fit", po::bool_switch(&fit),
      "fit hardware parameters: two-fold held-out check, then on all rows")(
      "fit-param", po::value(&fit_keys)->composing(),
      "a parameter to fit (repeatable, at most 5; default: the five of VALIDATION.md)")(
      "inner-stride", po::value(&inner_stride),
      "the optimiser scores every N-th training row (default 4)")(
      "sweeps", po::value(&sweeps), "coordinate-descent sweeps (default 3)")(
      "golden-steps", po::value(&golden_steps), "golden-section steps per coordinate (default 12)")(
      "write-profile", po::value(&write_profile),
      "with --fit: write the profile fitted on all rows to this YAML file")(
      "fitted-name", po::value(&fitted_name), "name of the written profile")(
      "worst", po::value(&worst), "rows in the worst-rows list (default 10)")(
      "no-rows", po::bool_switch(&no_rows), "omit the per-row lines")(
      "skip-folds", po::bool_switch(&skip_folds),
      "with --fit: fit on all rows only, without the two-fold held-out check")(
      "threads", po::value(&threads),
      "simulation threads (default 2; results do not depend on it)")("help,h", "show this help");
  if (!parse_options(argv, desc, {"csv"},
                     "usage: lynxsim validate CSV [--profile NAME | --profile-file PATH] "
                     "[--set k=v]... [--fit [--fit-param KEY]... [--write-profile OUT.yaml]] "
                     "[--format table|csv]"))
    return 0;
  if (csv.empty()) fail("validate: give the measurements CSV (e.g. validate/data/vtrain_single_node.csv)");
  if (threads < 1) fail("--threads must be >= 1");
  if (!write_profile.empty() && !fit) fail("--write-profile needs --fit");
  if (!write_profile.empty() && skip_folds)
    fail("--write-profile needs the held-out check: drop --skip-folds");

  val::ReportOptions report;
  report.format = val::parse_validation_format(format);
  report.per_row = !no_rows;
  report.worst_count = worst;
  const auto runs = val::load_measured_runs(csv);
  const Scenario base = val::validation_base_scenario({profile, profile_file, overrides});
  const std::string profile_label =
      base.hardware.profile_file.empty() ? base.hardware.profile : base.hardware.profile_file;
  const auto all = val::all_rows(runs.size());

  if (!fit) {
    const auto rows = simulate_with_bar(base, runs, all, csv, "simulating", threads);
    report.title = fmt::format("lynxsim {} validate: {} ({} rows) on {}", lynxsim_version(), csv,
                               runs.size(), profile_label);
    val::write_validation_report(std::cout, rows, report);
    return 0;
  }

  val::FitOptions fit_options;
  if (!fit_keys.empty()) fit_options.keys = fit_keys;
  fit_options.inner_stride = inner_stride;
  fit_options.sweeps = sweeps;
  fit_options.golden_steps = golden_steps;
  fit_options.threads = threads;
  // The fit report goes to stdout as it is made: '#' comment lines in CSV mode.
  const char* c = report.format == val::ValidationFormat::kCsv ? "# " : "";
  std::ostringstream fit_text;
  auto flush_fit_text = [&] {
    std::istringstream lines(fit_text.str());
    for (std::string line; std::getline(lines, line);) fmt::print("{}{}\n", line.empty() ? "" : c, line);
    std::cout.flush();
    fit_text.str("");
  };
  fmt::print(fit_text,
             "lynxsim {} validate --fit: {} ({} rows), start profile {}\n"
             "objective: mean |ln(predicted / measured)| over the training rows (the optimiser "
             "scores {} of them); cyclic coordinate descent, {} sweeps, golden section of {} steps per "
             "coordinate over a fixed interval\n",
             lynxsim_version(), csv, runs.size(), profile_label, every_nth_row(inner_stride), sweeps,
             golden_steps);
  flush_fit_text();

  const auto start_rows = simulate_with_bar(base, runs, all, csv, "start profile", threads);
  std::vector<val::Summary> held_out;
  for (int fold = 0; fold < (skip_folds ? 0 : 2); ++fold) {
    const auto train = val::fold_rows(runs.size(), fold);
    const auto test = val::fold_rows(runs.size(), 1 - fold);
    const val::FitResult result = [&] {
      ProgressBar bar(0, fmt::format("fit on {} rows", fold_name(fold)));
      auto fitted_result = val::fit_hardware(base, runs, train, csv, fit_options, draw_on(bar));
      bar.finish();
      return fitted_result;
    }();
    Scenario fitted = base;
    fitted.hardware = result.hardware;
    const auto test_rows = simulate_with_bar(fitted, runs, test, csv, "held-out rows", threads);
    held_out.push_back(val::summarize(test_rows));
    fmt::print(fit_text,
               "\nfold {}: fit on the {} {} rows (optimiser scored {}, {} evaluations); "
               "objective {:.4f} -> {:.4f}\n",
               fold, train.size(), fold_name(fold), result.inner_rows, result.evaluations,
               result.start_objective, result.objective);
    val::write_fit_parameters(fit_text, result, "  ");
    fmt::print(fit_text, "  held-out {} rows, start profile: {}\n", fold_name(1 - fold),
               val::summary_line(val::summarize(subset(start_rows, test))));
    fmt::print(fit_text, "  held-out {} rows, fitted:        {}\n", fold_name(1 - fold),
               val::summary_line(held_out.back()));
    flush_fit_text();
  }

  const val::FitResult final_fit = [&] {
    ProgressBar bar(0, "fit on all rows");
    auto fitted_result = val::fit_hardware(base, runs, all, csv, fit_options, draw_on(bar));
    bar.finish();
    return fitted_result;
  }();
  Scenario fitted = base;
  fitted.hardware = final_fit.hardware;
  const auto fitted_rows = simulate_with_bar(fitted, runs, all, csv, "fitted profile", threads);
  const val::Summary start_summary = val::summarize(start_rows);
  const val::Summary fitted_summary = val::summarize(fitted_rows);
  fmt::print(fit_text, "\nfit on all {} rows ({} evaluations); objective {:.4f} -> {:.4f}\n",
             runs.size(), final_fit.evaluations, final_fit.start_objective, final_fit.objective);
  val::write_fit_parameters(fit_text, final_fit, "  ");
  fmt::print(fit_text, "  all rows, start profile: {}\n", val::summary_line(start_summary));
  fmt::print(fit_text, "  all rows, fitted:        {}\n", val::summary_line(fitted_summary));

  if (!write_profile.empty()) {
    HardwareSpec hw = final_fit.hardware;
    hw.profile = fitted_name;
    hw.profile_file.clear();
    std::string fitted_list;
    for (std::size_t i = 0; i < final_fit.keys.size(); ++i) {
      const val::FitParameter& p = val::fittable_parameter(final_fit.keys[i]);
      fitted_list += fmt::format("{}{} = {:.4g}{}{}", i ? ", " : "", p.key, final_fit.values[i],
                                 p.unit.empty() ? "" : " ", p.unit);
    }
    hw.source = fmt::format(
        "Fitted by `lynxsim validate {} --fit` (lynxsim {}) to {} measured Megatron-DeepSpeed GPT "
        "iterations on one 8x A100 node (vTrain, Bang et al., MICRO 2024, "
        "data/ground_truth_single.csv): {}. Objective: mean |ln(predicted/measured)| over all "
        "rows (optimiser scoring {}), cyclic coordinate descent with golden section "
        "({} sweeps, {} steps). Two-fold held-out check (fit on even rows, test on odd; and the "
        "reverse): MAPE {:.2f}% / {:.2f}%, Kendall tau-b {:.3f} / {:.3f}; all rows: MAPE {:.2f}%, "
        "tau-b {:.3f}. Every other number is {}'s (citations there). See VALIDATION.md.",
        csv, lynxsim_version(), runs.size(), fitted_list, every_nth_row(inner_stride), sweeps,
        golden_steps,
        held_out[0].mape_percent, held_out[1].mape_percent, held_out[0].kendall_tau_b,
        held_out[1].kendall_tau_b, fitted_summary.mape_percent, fitted_summary.kendall_tau_b,
        base.hardware.profile);
    std::ofstream out(write_profile);
    if (!out) fail("--write-profile: cannot write '{}'", write_profile);
    out << "# Generated by `lynxsim validate --fit --write-profile`; do not edit by hand: rerun it\n"
        << "# (VALIDATION.md). `source` below says how it was made.\n"
        << hardware_profile_to_yaml(hw);
    if (!out) fail("--write-profile: error writing '{}'", write_profile);
    fmt::print(fit_text, "  profile written to {}\n", write_profile);
  }

  flush_fit_text();
  fmt::print("\n");
  report.title = fmt::format("validation with the profile fitted on all rows ({})",
                             fmt::join(final_fit.keys, ", "));
  val::write_validation_report(std::cout, fitted_rows, report);
  return 0;
}

}  // namespace lynx::cli
