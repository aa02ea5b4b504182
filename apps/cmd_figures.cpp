// `lynxsim figures`: the paper experiment (runner/paper_experiment.hpp) as one CSV and
// paper-style PNG figures (results/plot_paper.py). By default into results/out/paper/, which
// git ignores; --update-committed regenerates the committed set in results/paper/.
#include "apps/cli.hpp"
#include "common/files.hpp"
#include "common/error.hpp"
#include "common/progress.hpp"
#include "common/text.hpp"
#include "runner/paper_experiment.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace lynx::apps {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view item : split(text, ','))
    if (!trim(item).empty()) out.emplace_back(trim(item));
  return out;
}

}  // namespace

int cmd_figures(const std::vector<std::string>& argv) {
  const std::string source = LYNXSIM_SOURCE_DIR;
  const std::string committed_dir = source + "/results/paper";
  runner::PaperSelection selection;
  selection.scenario_dir = source + "/scenarios/paper";
  std::string out_dir = "results/out/paper";
  std::string plot_script = source + "/results/plot_paper.py";
  std::string strategies_text, models_text, clusters_text;
  bool no_plot = false, update_committed = false;
  po::options_description desc("figures options");
  desc.add_options()("help,h", "show this help")(
      "scenarios", po::value(&selection.scenario_dir), "folder of paper scenarios CLUSTER-MODEL.yaml")(
      "out,o", po::value(&out_dir),
      "output folder for paper_results.csv and the PNGs (default results/out/paper, git-ignored)")(
      "update-committed", po::bool_switch(&update_committed),
      "regenerate the committed results in the source tree's results/paper/ (the whole experiment)")(
      "strategies", po::value(&strategies_text), "comma-separated subset of none,full,selective,checkmate,lynx-heu,lynx-opt")(
      "models", po::value(&models_text), "comma-separated model presets to keep (e.g. gpt-1.3b,gpt-13b)")(
      "clusters", po::value(&clusters_text), "comma-separated clusters to keep (nvlink,pcie)")(
      "no-plot", po::bool_switch(&no_plot), "write the CSV only")(
      "plot-script", po::value(&plot_script), "matplotlib script (default results/plot_paper.py)");
  if (!parse_options(argv, desc, {},
                     "usage: lynxsim figures [--out DIR | --update-committed] [--strategies ..] "
                     "[--models ..] [--clusters ..]"))
    return 0;
  selection.strategies = split_list(strategies_text);
  selection.models = split_list(models_text);
  selection.clusters = split_list(clusters_text);
  if (update_committed) {
    // The committed set is the whole experiment with its figures, from the paper scenarios.
    for (const auto& [flag, used] :
         {std::pair{"--out", out_dir != "results/out/paper"},
          {"--strategies", !selection.strategies.empty()},
          {"--models", !selection.models.empty()},
          {"--clusters", !selection.clusters.empty()},
          {"--scenarios", selection.scenario_dir != source + "/scenarios/paper"},
          {"--no-plot", no_plot}})
      if (used) fail(ErrorCode::kConflictingOptions, "--update-committed regenerates the whole committed set in {}: drop {}", committed_dir, flag);
    out_dir = committed_dir;
  }

  const std::vector<runner::PaperRun> runs = runner::paper_runs(selection);
  ProgressBar bar(runs.size(), "figures");
  const std::vector<runner::PaperRow> rows = runner::run_paper_experiment(runs, [&](std::size_t done, const runner::PaperRun& next) {
    bar.update(done, fmt::format("{} {} {}", next.cluster, next.scenario->model.preset, next.strategy));
  });
  bar.finish();

  fs::create_directories(out_dir);
  const std::string csv_path = (fs::path(out_dir) / "paper_results.csv").string();
  OutputFile csv(csv_path, "figures CSV");
  runner::write_paper_csv(csv.stream(), rows);
  csv.close();
  fmt::print("wrote {} ({} runs)\n", csv_path, rows.size());
  if (no_plot) return 0;
  const std::string command = fmt::format("/usr/bin/python3 '{}' '{}' '{}'", plot_script, csv_path, out_dir);
  std::cout.flush();
  const int status = std::system(command.c_str());
  if (status != 0)
    fail(ErrorCode::kSystemFailure, "plotting failed ({}): is python3-matplotlib installed (tools/setup.sh installs it)?", command);
  return 0;
}

}  // namespace lynx::apps
