// `lynxsim validate`: simulate measured training iterations (the vTrain single-node CSV, or
// any headed CSV) and compare; with --report, a markdown report of every data set of a
// manifest on each of its profiles; with --fit, calibrate a few global hardware parameters
// with a two-fold held-out check, then on all rows, and optionally write the fitted hardware
// profile. The workflow is
// validate/fit_workflow.hpp; this file parses options and prints.
#include "apps/cli.hpp"
#include "common/files.hpp"
#include "common/progress.hpp"
#include "runner/report.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/error.hpp"
#include "validate/components.hpp"
#include "validate/fit.hpp"
#include "validate/fit_workflow.hpp"
#include "validate/markdown_report.hpp"
#include "validate/validation.hpp"
#include "validate/validation_report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

namespace lynx::apps {

int cmd_validate(const std::vector<std::string>& argv);

namespace {

namespace val = lynx::validate;

/// The workflow's stages drawn as one progress bar each.
class StageBars {
 public:
  val::StageProgress progress() {
    return {[this](const std::string& label) { bar_.emplace(0, label); },
            [this](std::size_t done, std::size_t total) {
              bar_->set_total(total);
              bar_->update(done);
            },
            [this] {
              bar_->finish();
              bar_.reset();
            }};
  }

 private:
  std::optional<ProgressBar> bar_;
};

/// `validate --report MANIFEST`: every data set of the manifest on each of its profiles, as
/// markdown on stdout.
int write_report(const std::string& manifest, const std::vector<std::string>& overrides,
                 unsigned threads, std::size_t worst) {
  std::vector<val::DatasetResults> results;
  for (const val::Dataset& d : val::load_dataset_manifest(manifest)) {
    val::DatasetResults& out = results.emplace_back();
    out.dataset = d;
    const auto runs = val::load_measured_runs(d.file);
    // A file of per-layer times (no iteration time) is scored per layer.
    const bool per_layer = !runs.empty() && !(runs.front().iteration_ms > 0);
    if (!per_layer) val::require_iteration_times(runs, d.file);
    for (const std::string& profile : d.profiles) {
      val::BaseOptions base_options;
      base_options.profile = val::is_profile_file(profile) ? "" : profile;
      base_options.profile_file = val::is_profile_file(profile) ? profile : "";
      base_options.overrides = d.overrides;
      for (const std::string& o : overrides) base_options.overrides.push_back(o);
      base_options.recompute = d.recompute;
      if (per_layer) {
        out.layer_profiles.push_back(
            {profile, val::simulate_components(val::validation_base_scenario(base_options), runs, d.file)});
        continue;
      }
      StageBars bars;
      out.profiles.push_back(
          {profile, val::simulate_stage(val::validation_base_scenario(base_options), runs,
                                        val::all_rows(runs.size()), d.file, threads,
                                        d.name + " on " + profile, bars.progress())});
    }
  }
  val::MarkdownOptions options;
  options.command = "lynxsim validate --report " + manifest;
  options.version = runner::lynxsim_version();
  options.worst_count = worst;
  val::write_markdown_report(std::cout, results, options);
  return 0;
}

}  // namespace

int cmd_validate(const std::vector<std::string>& argv) {
  std::string csv;
  std::string profile;  // dgx-a100-80gb unless --profile-file is given
  std::string profile_file;
  std::vector<std::string> overrides;
  std::string format = "table";
  bool fit = false;
  std::vector<std::string> fit_keys;
  int inner_stride = 4;  // signed, so "-1" is refused instead of wrapping
  int sweeps = 3;
  int golden_steps = 12;
  std::string write_profile;
  std::string fitted_name = "dgx-a100-80gb-vtrain-fit";
  int worst = 10;
  bool no_rows = false;
  bool skip_folds = false;
  int threads = 2;
  std::string recompute;
  std::string report_manifest;
  bool components = false;

  po::options_description desc("validate options");
  desc.add_options()("csv", po::value(&csv), "measured runs (vTrain CSV, or a CSV with a header line: VALIDATION.md)")(
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
      "simulation threads (default 2; results do not depend on it)")(
      "recompute", po::value(&recompute),
      "recompute.strategy of rows without a recompute column (default none)")(
      "report", po::value(&report_manifest),
      "markdown report of every data set of this manifest on each of its profiles "
      "(validate/data/datasets.yaml; VALIDATION.md's results), instead of CSV")(
      "components", po::bool_switch(&components),
      "score per-layer measurements (columns layer_forward_ms, layer_backward_ms: Korthikanti et al. 2022 "
      "Table 4 style) against the simulated middle layer")(
      "help,h", "show this help");
  if (!parse_options(argv, desc, {"csv"},
                     "usage: lynxsim validate CSV [--profile NAME | --profile-file PATH] "
                     "[--recompute STRATEGY] [--set k=v]... [--fit [--fit-param KEY]... "
                     "[--write-profile OUT.yaml]] [--format table|csv]\n"
                     "       lynxsim validate CSV --components [--profile NAME | --profile-file PATH] [--set k=v]...\n"
                     "       lynxsim validate --report MANIFEST.yaml [--set k=v]... [--worst N]"))
    return 0;
  // A thread per core is what helps; the cap keeps a typo from asking the OS for millions.
  if (threads < 1 || threads > 256) fail(ErrorCode::kInvalidOption, "--threads: {} is not between 1 and 256", threads);
  if (worst < 0) fail(ErrorCode::kInvalidOption, "--worst: {} is negative", worst);
  if (!report_manifest.empty()) {
    for (const auto& [given, option] :
         {std::pair{!csv.empty(), "a CSV"}, std::pair{!profile.empty(), "--profile"},
          std::pair{!profile_file.empty(), "--profile-file"},
          std::pair{!recompute.empty(), "--recompute"}, std::pair{fit, "--fit"},
          std::pair{format != "table", "--format"}, std::pair{no_rows, "--no-rows"},
          std::pair{!write_profile.empty(), "--write-profile"},
          std::pair{!fit_keys.empty(), "--fit-param"}, std::pair{skip_folds, "--skip-folds"},
          std::pair{components, "--components"}})
      if (given)
        fail(ErrorCode::kConflictingOptions, "--report {}: {} does not go with --report (the manifest names each data set's "
             "file, profiles and recompute setting; the report is markdown)",
             report_manifest, option);
    return write_report(report_manifest, overrides, static_cast<unsigned>(threads),
                        static_cast<std::size_t>(worst));
  }
  if (csv.empty())
    fail(ErrorCode::kMissingArgument, "validate: give the measurements CSV (e.g. validate/data/vtrain_single_node.csv)");
  if (inner_stride < 1) fail(ErrorCode::kInvalidOption, "--inner-stride: {} is not >= 1", inner_stride);
  if (!profile.empty() && !profile_file.empty())
    fail(ErrorCode::kConflictingOptions, "--profile {} and --profile-file {}: give one of them", profile, profile_file);
  if (profile.empty() && profile_file.empty()) profile = "dgx-a100-80gb";
  if (!write_profile.empty() && !fit) fail(ErrorCode::kConflictingOptions, "--write-profile needs --fit");
  if (!write_profile.empty() && skip_folds)
    fail(ErrorCode::kConflictingOptions, "--write-profile needs the held-out check: drop --skip-folds");

  val::ReportOptions report;
  report.format = val::parse_validation_format(format);
  report.per_row = !no_rows;
  report.worst_count = static_cast<std::size_t>(worst);
  report.csv = csv;
  const auto runs = val::load_measured_runs(csv);
  const Scenario base = val::validation_base_scenario({profile, profile_file, overrides, recompute});
  const std::string profile_label =
      base.hardware.profile_file.empty() ? base.hardware.profile : base.hardware.profile_file;
  if (components) {
    if (fit || format != "table")
      fail(ErrorCode::kConflictingOptions, "--components: {} does not go with it (a per-layer table)",
           fit ? "--fit" : "--format");
    val::write_components_report(std::cout, val::simulate_components(base, runs, csv),
                                 fmt::format("lynxsim {} validate --components: {} ({} rows) on {}",
                                             runner::lynxsim_version(), csv, runs.size(), profile_label));
    return 0;
  }
  val::require_iteration_times(runs, csv);
  const auto all = val::all_rows(runs.size());

  if (!fit) {
    StageBars bars;
    const auto rows =
        val::simulate_stage(base, runs, all, csv, static_cast<unsigned>(threads), "simulating", bars.progress());
    report.title = fmt::format("lynxsim {} validate: {} ({} rows) on {}", runner::lynxsim_version(), csv,
                               runs.size(), profile_label);
    val::write_validation_report(std::cout, rows, report);
    return 0;
  }

  val::FitWorkflowInput input;
  input.base = base;
  input.runs = runs;
  input.file_label = csv;
  input.overrides = overrides;
  if (!fit_keys.empty()) input.fit.keys = fit_keys;
  input.fit.inner_stride = static_cast<std::size_t>(inner_stride);
  input.fit.sweeps = sweeps;
  input.fit.golden_steps = golden_steps;
  input.fit.threads = static_cast<unsigned>(threads);
  input.folds = !skip_folds;
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
             runner::lynxsim_version(), csv, runs.size(), profile_label, val::every_nth_row(static_cast<std::size_t>(inner_stride)),
             sweeps, golden_steps);
  flush_fit_text();

  StageBars bars;
  const val::FitWorkflowResult result =
      val::run_fit_workflow(input, bars.progress(), [&](const val::FoldResult& fold) {
        fmt::print(fit_text,
                   "\nfold {}: fit on the {} {} rows (optimiser scored {}, {} evaluations); "
                   "objective {:.4f} -> {:.4f}\n",
                   fold.fold, fold.train_rows, val::fold_name(fold.fold), fold.fit.inner_rows,
                   fold.fit.evaluations, fold.fit.start_objective, fold.fit.objective);
        val::write_fit_parameters(fit_text, fold.fit, "  ");
        const std::string held_out = val::fold_name(1 - fold.fold);
        fmt::print(fit_text, "  held-out {} rows, start profile: {}\n", held_out,
                   val::summary_line(fold.start_held_out));
        fmt::print(fit_text, "  held-out {} rows, fitted:        {}\n", held_out,
                   val::summary_line(fold.fitted_held_out));
        flush_fit_text();
      });
  const val::FitResult& final_fit = result.final_fit;
  fmt::print(fit_text, "\nfit on all {} rows ({} evaluations); objective {:.4f} -> {:.4f}\n",
             runs.size(), final_fit.evaluations, final_fit.start_objective, final_fit.objective);
  val::write_fit_parameters(fit_text, final_fit, "  ");
  fmt::print(fit_text, "  all rows, start profile: {}\n", val::summary_line(result.start_summary));
  fmt::print(fit_text, "  all rows, fitted:        {}\n", val::summary_line(result.fitted_summary));

  if (!write_profile.empty()) {
    const std::string text =
        val::fitted_profile_file_text(val::fitted_profile(input, result, fitted_name));
    write_text_file(write_profile, text, "--write-profile");
    fmt::print(fit_text, "  profile written to {}\n", write_profile);
  }

  flush_fit_text();
  fmt::print("\n");
  report.title = fmt::format("validation with the profile fitted on all rows ({})",
                             fmt::join(final_fit.keys, ", "));
  val::write_validation_report(std::cout, result.fitted_rows, report);
  return 0;
}

}  // namespace lynx::apps
