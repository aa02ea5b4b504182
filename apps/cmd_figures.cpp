// `lynxsim figures`: the paper experiment (runner/paper_experiment.hpp) as one CSV and
// paper-style PNG figures (results/plot_paper.py). By default into results/out/paper/, which
// git ignores; --update-committed regenerates the committed set in results/paper/.
// `--global-batch N` runs the same experiment at global batch N (results/paper-gbN/);
// `--maps` draws the maps of results/maps/maps.yaml instead (maps/, results/plot_maps.py).
#include "apps/cli.hpp"
#include "common/files.hpp"
#include "common/error.hpp"
#include "common/progress.hpp"
#include "common/text.hpp"
#include "maps/map_experiment.hpp"
#include "runner/paper_experiment.hpp"
#include "sweep/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

namespace lynx::apps {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view item : split(text, ','))
    if (!trim(item).empty()) out.emplace_back(trim(item));
  return out;
}

/// Runs `script CSV DIR`; lynx::Error when it fails.
void plot(const std::string& script, const std::string& csv_path, const std::string& out_dir) {
  const std::string command = fmt::format("/usr/bin/python3 '{}' '{}' '{}'", script, csv_path, out_dir);
  std::cout.flush();
  const int status = std::system(command.c_str());
  if (status != 0)
    fail(ErrorCode::kSystemFailure, "plotting failed ({}): is python3-matplotlib installed (tools/setup.sh installs it)?", command);
}

/// What `--maps` was asked.
struct MapsOptions {
  std::string map_file;
  std::string names_text;
  std::string out_dir;
  std::string plot_script;
  int threads = 0;
  bool confirm = true;
  bool no_plot = false;
};

int figures_maps(const MapsOptions& options) {
  const maps::MapFile file = maps::select_maps(maps::read_map_file(options.map_file), split_list(options.names_text));
  maps::MapRequest request;
  request.threads = options.threads;
  request.confirm = options.confirm;
  ProgressBar bar(0, "maps");
  request.progress = [&](std::size_t done, std::size_t total, const std::string& what) {
    bar.set_total(total);
    bar.update(done, what);
  };
  maps::MapSummary summary;
  const std::vector<maps::MapCell> cells = maps::run_maps(file, request, &summary);
  bar.finish();

  fs::create_directories(options.out_dir);
  const std::string csv_path = (fs::path(options.out_dir) / "maps.csv").string();
  OutputFile csv(csv_path, "maps CSV");
  maps::write_map_csv(csv.stream(), file, cells);
  csv.close();
  const std::string confirmations = maps::confirmation_text(file, cells);
  const std::string confirm_path = (fs::path(options.out_dir) / "confirmations.txt").string();
  write_text_file(confirm_path,
                  "# lynx-heu's speedup in fast mode against exact mode at each map's best and worst cells "
                  "(`lynxsim figures --maps`)\n" + confirmations,
                  "maps confirmations");
  std::map<std::string, std::size_t> reasons;
  for (const maps::MapCell& cell : cells)
    if (!cell.invalid_reason.empty()) ++reasons[cell.invalid_reason];
  fmt::print("wrote {} ({} cells, {} invalid; {} fast + {} exact runs in {:.1f} s on {} threads)\n", csv_path,
             summary.cells, summary.invalid, summary.fast_runs, summary.exact_runs, summary.seconds, summary.threads);
  for (const auto& [reason, count] : reasons) fmt::print("  invalid: {} cells: {}\n", count, reason);
  fmt::print("fast against exact mode ({}):\n{}", confirm_path, confirmations);
  if (!options.no_plot) plot(options.plot_script, csv_path, options.out_dir);
  return 0;
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
  bool no_plot = false, update_committed = false, maps_mode = false, no_confirm = false;
  int global_batch = 0;
  MapsOptions maps_options;
  maps_options.map_file = source + "/results/maps/maps.yaml";
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
      "plot-script", po::value(&plot_script), "matplotlib script (default results/plot_paper.py, with --maps results/plot_maps.py)")(
      "global-batch", po::value(&global_batch),
      "run the paper scenarios at this global batch (sequences) instead of their own; output results/out/paper-gbN "
      "(committed: results/paper-gbN)")(
      "maps", po::bool_switch(&maps_mode),
      "draw the maps of lynx-heu's speedup (results/maps/maps.yaml) instead: output results/out/maps (committed: results/maps)")(
      "map-file", po::value(&maps_options.map_file), "--maps: the map file (default results/maps/maps.yaml)")(
      "map-names", po::value(&maps_options.names_text), "--maps: comma-separated maps of the file to run")(
      "threads", po::value(&maps_options.threads), "--maps: simulation threads (default: the machine's cores)")(
      "no-confirm", po::bool_switch(&no_confirm), "--maps: skip the exact-mode runs of each map's best and worst cells");
  if (!parse_options(argv, desc, {},
                     "usage: lynxsim figures [--out DIR | --update-committed] [--global-batch N] [--strategies ..] "
                     "[--models ..] [--clusters ..]\n       lynxsim figures --maps [--out DIR | --update-committed] "
                     "[--map-file FILE] [--map-names ..] [--threads N] [--no-confirm]"))
    return 0;
  const bool out_given = !out_dir.empty() && out_dir != "results/out/paper";
  if (maps_mode) {
    // The paper experiment's selection means nothing to the maps.
    for (const auto& [flag, used] :
         {std::pair{"--strategies", !strategies_text.empty()},
          {"--models", !models_text.empty()},
          {"--clusters", !clusters_text.empty()},
          {"--scenarios", selection.scenario_dir != source + "/scenarios/paper"},
          {"--global-batch", global_batch != 0}})
      if (used) fail(ErrorCode::kConflictingOptions, "--maps draws the maps of its map file: drop {}", flag);
    if (maps_options.threads < 0) fail(ErrorCode::kInvalidOption, "--threads {}: expected a number >= 0", maps_options.threads);
    maps_options.out_dir = out_given ? out_dir : "results/out/maps";
    maps_options.plot_script = plot_script == source + "/results/plot_paper.py" ? source + "/results/plot_maps.py" : plot_script;
    maps_options.confirm = !no_confirm;
    maps_options.no_plot = no_plot;
    if (update_committed) {
      for (const auto& [flag, used] :
           {std::pair{"--out", out_given},
            {"--map-file", maps_options.map_file != source + "/results/maps/maps.yaml"},
            {"--map-names", !maps_options.names_text.empty()},
            {"--no-confirm", no_confirm},
            {"--no-plot", no_plot}})
        if (used) fail(ErrorCode::kConflictingOptions, "--update-committed regenerates the whole committed set in {}/results/maps: drop {}", source, flag);
      maps_options.out_dir = source + "/results/maps";
    }
    return figures_maps(maps_options);
  }
  for (const auto& [flag, used] : {std::pair{"--map-file", maps_options.map_file != source + "/results/maps/maps.yaml"},
                                   {"--map-names", !maps_options.names_text.empty()},
                                   {"--threads", maps_options.threads != 0},
                                   {"--no-confirm", no_confirm}})
    if (used) fail(ErrorCode::kConflictingOptions, "{} is an option of --maps", flag);
  std::string committed = committed_dir;
  if (global_batch != 0) {
    if (global_batch < 1) fail(ErrorCode::kInvalidOption, "--global-batch {}: expected a number of sequences >= 1", global_batch);
    selection.overrides = {fmt::format("parallel.global_batch={}", global_batch)};
    committed = fmt::format("{}-gb{}", committed_dir, global_batch);
    if (!out_given) out_dir = fmt::format("results/out/paper-gb{}", global_batch);
  }
  selection.strategies = split_list(strategies_text);
  selection.models = split_list(models_text);
  selection.clusters = split_list(clusters_text);
  if (update_committed) {
    // The committed set is the whole experiment with its figures, from the paper scenarios.
    for (const auto& [flag, used] :
         {std::pair{"--out", out_given},
          {"--strategies", !selection.strategies.empty()},
          {"--models", !selection.models.empty()},
          {"--clusters", !selection.clusters.empty()},
          {"--scenarios", selection.scenario_dir != source + "/scenarios/paper"},
          {"--no-plot", no_plot}})
      if (used) fail(ErrorCode::kConflictingOptions, "--update-committed regenerates the whole committed set in {}: drop {}", committed, flag);
    out_dir = committed;
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
  runner::write_paper_csv(csv.stream(), rows, selection.overrides);
  csv.close();
  fmt::print("wrote {} ({} runs)\n", csv_path, rows.size());
  if (!no_plot) plot(plot_script, csv_path, out_dir);
  return 0;
}

}  // namespace lynx::apps
