// `lynxsim figures`: the paper experiment — every scenario of scenarios/paper/ under none, full,
// selective, checkmate, lynx-heu and lynx-opt — as one CSV and paper-style PNG figures.
#include "apps/cli.hpp"
#include "common/bytes.hpp"
#include "common/progress.hpp"
#include "model/gpt.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/error.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace lynx::cli {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kAllStrategies = {"none",      "full",     "selective",
                                                 "checkmate", "lynx-heu", "lynx-opt"};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool wanted(const std::vector<std::string>& filter, const std::string& name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

std::string opt_double(double v, bool present) { return present ? fmt::format("{:.9g}", v) : ""; }

}  // namespace

int cmd_figures(const std::vector<std::string>& argv) {
  std::string scenario_dir = std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper";
  std::string out_dir = "results/paper";
  std::string plot_script = std::string(LYNXSIM_SOURCE_DIR) + "/results/plot_paper.py";
  std::string strategies_text, models_text, clusters_text;
  bool no_plot = false;
  po::options_description desc("figures options");
  desc.add_options()("help,h", "show this help")(
      "scenarios", po::value(&scenario_dir), "folder of paper scenarios CLUSTER-MODEL.yaml")(
      "out,o", po::value(&out_dir), "output folder for paper_results.csv and the PNGs (default results/paper)")(
      "strategies", po::value(&strategies_text), "comma-separated subset of none,full,selective,checkmate,lynx-heu,lynx-opt")(
      "models", po::value(&models_text), "comma-separated model presets to keep (e.g. gpt-1.3b,gpt-13b)")(
      "clusters", po::value(&clusters_text), "comma-separated clusters to keep (nvlink,pcie)")(
      "no-plot", po::bool_switch(&no_plot), "write the CSV only")(
      "plot-script", po::value(&plot_script), "matplotlib script (default results/plot_paper.py)");
  if (!parse_options(argv, desc, {},
                     "usage: lynxsim figures [--out DIR] [--strategies ..] [--models ..] [--clusters ..]"))
    return 0;
  const auto strategies = strategies_text.empty() ? kAllStrategies : split_list(strategies_text);
  for (const auto& s : strategies)
    if (!wanted(kAllStrategies, s)) fail("--strategies: unknown strategy '{}' (expected some of: {})", s, fmt::join(kAllStrategies, ", "));
  const auto models = split_list(models_text);
  const auto clusters = split_list(clusters_text);

  if (!fs::is_directory(scenario_dir)) fail("--scenarios: '{}' is not a folder", scenario_dir);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(scenario_dir))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, Scenario>> runs;  // (cluster, scenario)
  for (const auto& file : files) {
    const std::string stem = file.stem().string();
    const auto dash = stem.find('-');
    if (dash == std::string::npos) fail("{}: paper scenario names are CLUSTER-MODEL.yaml", file.string());
    const std::string cluster = stem.substr(0, dash);
    const Scenario sc = model::load_scenario_file(file.string()).scenario();
    if (!wanted(clusters, cluster) || !wanted(models, sc.model.preset)) continue;
    runs.emplace_back(cluster, sc);
  }
  if (runs.empty()) fail("no paper scenario in '{}' matches --models / --clusters", scenario_dir);
  // Smallest model first, within each cluster.
  std::stable_sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return model::parameter_count(a.second.model) < model::parameter_count(b.second.model);
  });

  struct Row {
    std::string cluster;
    SimResult r;
  };
  std::vector<Row> rows;
  const size_t total = runs.size() * strategies.size();
  ProgressBar bar(total, "figures");
  for (const auto& [cluster, base] : runs) {
    for (const auto& strategy : strategies) {
      bar.update(rows.size(), fmt::format("{} {} {}", cluster, base.model.preset, strategy));
      const auto sc = model::load_scenario_text(scenario_to_yaml(base), base.source_file,
                                                {"recompute.strategy=" + strategy});
      rows.push_back({cluster, simulate(sc).result});
    }
  }
  bar.finish();

  fs::create_directories(out_dir);
  const std::string csv_path = (fs::path(out_dir) / "paper_results.csv").string();
  std::ofstream csv(csv_path);
  if (!csv) fail("cannot write '{}'", csv_path);
  fmt::print(csv, "# lynxsim {} — `lynxsim figures`: scenarios/paper/*.yaml × strategies; times are "
                  "simulated, not measured\n", LYNXSIM_VERSION_TEXT);
  fmt::print(csv, "cluster,cluster_label,model,params_b,gpus,tp,pp,dp,micro_batch,global_batch,strategy,"
                  "oom,oom_stage,iteration_time_s,tokens_per_s,throughput_vs_full,mfu,hfu,"
                  "peak_memory_gib,memory_capacity_gib,compute_s,recompute_s,recompute_overlapped_s,"
                  "tp_exposed_s,pp_exposed_s,dp_exposed_s,bubble_s,search_seconds,solver_gap\n");
  std::map<std::pair<std::string, std::string>, const SimResult*> full_of;
  for (const Row& row : rows)
    if (row.r.strategy == "full" && !row.r.oom) full_of[{row.cluster, row.r.scenario.model.preset}] = &row.r;
  for (const Row& row : rows) {
    const SimResult& r = row.r;
    const auto& sc = r.scenario;
    const auto full = full_of.find({row.cluster, sc.model.preset});
    // The slowest stage: the one with the most work on its compute stream.
    const StageBreakdown* slow = &r.stages.front();
    std::int64_t peak = 0;
    for (const auto& st : r.stages) {
      if (st.compute_s + st.recompute_s > slow->compute_s + slow->recompute_s) slow = &st;
      peak = std::max(peak, st.peak_memory_bytes);
    }
    fmt::print(csv, "{},{} ({}),{},{:.4f},{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{},{:.6f},{:.6f},"
                    "{:.3f},{:.3f},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.6f},{:.6f}\n",
               row.cluster, sc.hardware.gpu_name, to_string(sc.hardware.intra_node), sc.model.preset,
               model::parameter_count(sc.model) / 1e9, r.gpus, sc.parallel.tp, sc.parallel.pp,
               sc.parallel.dp, sc.parallel.micro_batch, sc.parallel.global_batch, r.strategy,
               r.oom ? "true" : "false", r.oom ? std::to_string(r.oom_stage) : "",
               r.iteration_time_s, r.tokens_per_s,
               opt_double(full != full_of.end() ? r.tokens_per_s / full->second->tokens_per_s : 0,
                          full != full_of.end()),
               r.mfu, r.hfu, static_cast<double>(peak) / kGiB,
               static_cast<double>(sc.hardware.memory_bytes) / kGiB, slow->compute_s,
               slow->recompute_s, slow->recompute_overlapped_s, slow->tp_exposed_s,
               slow->pp_exposed_s, slow->dp_exposed_s, slow->bubble_s, r.search_seconds,
               r.solver_gap);
  }
  csv.close();
  fmt::print("wrote {} ({} runs)\n", csv_path, rows.size());
  if (no_plot) return 0;
  const std::string command = fmt::format("/usr/bin/python3 '{}' '{}' '{}'", plot_script, csv_path, out_dir);
  std::cout.flush();
  const int status = std::system(command.c_str());
  if (status != 0)
    fail("plotting failed ({}): is python3-matplotlib installed (tools/setup.sh installs it)?", command);
  return 0;
}

}  // namespace lynx::cli
