#include "runner/paper_experiment.hpp"

#include "common/error.hpp"
#include "model/gpt.hpp"
#include "runner/report.hpp"
#include "runner/result_fields.hpp"
#include "scenarios/scenario_loader.hpp"
#include "strategies/recompute_plan.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <set>

namespace lynx::runner {
namespace {

namespace fs = std::filesystem;

bool wanted(const std::vector<std::string>& filter, const std::string& name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

/// Every name in `filter` must match something in `seen`: a typo must not shrink the sweep.
void check_matched(const std::vector<std::string>& filter, const std::set<std::string>& seen,
                   const char* option, const std::string& dir) {
  for (const auto& name : filter)
    if (!seen.count(name))
      fail(ErrorCode::kInvalidOption, "{}: '{}' matches no paper scenario in '{}' (there are: {})", option, name, dir,
           fmt::join(seen, ", "));
}

/// The stage with the most work on its compute stream: the one that sets the pace.
const StageBreakdown& slowest_stage(const SimResult& r) {
  return *std::max_element(r.stages.begin(), r.stages.end(), [](const auto& a, const auto& b) {
    return a.compute_s + a.recompute_s < b.compute_s + b.recompute_s;
  });
}

}  // namespace

const std::vector<std::string>& paper_strategies() {
  static const std::vector<std::string> names(kRecomputeKindNames.begin(), kRecomputeKindNames.end());
  return names;
}

const std::vector<PaperColumn>& paper_columns() {
  static const std::vector<PaperColumn> columns = {
      {"cluster", "", "the paper scenario file's prefix (`nvlink`, `pcie`): one figure per cluster",
       [](const PaperRow& row) { return FieldValue::of_text(row.cluster); }},
      {"throughput_vs_full", "",
       "tokens_per_s ÷ that of full recomputation (same cluster and model); empty when full was "
       "not run or does not fit",
       [](const PaperRow& row) {
         return row.throughput_vs_full ? FieldValue::of_real(*row.throughput_vs_full) : FieldValue::null();
       }},
  };
  return columns;
}

std::vector<PaperRun> paper_runs(const PaperSelection& selection) {
  const auto& known = paper_strategies();
  for (const auto& s : selection.strategies)
    if (!wanted(known, s))
      fail(ErrorCode::kInvalidOption, "--strategies: unknown strategy '{}' (expected some of: {})", s, fmt::join(known, ", "));
  const auto& strategies = selection.strategies.empty() ? known : selection.strategies;
  const std::string& dir = selection.scenario_dir;
  if (!fs::is_directory(dir)) fail(ErrorCode::kInvalidOption, "--scenarios: '{}' is not a folder", dir);

  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, Scenario>> scenarios;  // (cluster, scenario)
  std::set<std::string> seen_clusters, seen_models;
  for (const auto& file : files) {
    const std::string stem = file.stem().string();
    const auto dash = stem.find('-');
    if (dash == std::string::npos) fail(ErrorCode::kInvalidOption, "{}: paper scenario names are CLUSTER-MODEL.yaml", file.string());
    const std::string cluster = stem.substr(0, dash);
    const Scenario sc = model::load_scenario_file(file.string(), selection.overrides).scenario();
    seen_clusters.insert(cluster);
    seen_models.insert(sc.model.preset);
    if (!wanted(selection.clusters, cluster) || !wanted(selection.models, sc.model.preset)) continue;
    scenarios.emplace_back(cluster, sc);
  }
  check_matched(selection.clusters, seen_clusters, "--clusters", dir);
  check_matched(selection.models, seen_models, "--models", dir);
  if (scenarios.empty()) fail(ErrorCode::kInvalidOption, "no paper scenario in '{}' matches --models / --clusters", dir);
  // Smallest model first, within each cluster.
  std::stable_sort(scenarios.begin(), scenarios.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return model::parameter_count(a.second.model) < model::parameter_count(b.second.model);
  });

  std::vector<PaperRun> runs;
  for (const auto& [cluster, base] : scenarios)
    for (const auto& strategy : strategies)
      runs.push_back({cluster,
                      model::load_scenario_text(scenario_to_yaml(base), base.source_file,
                                                {"recompute.strategy=" + strategy}),
                      strategy});
  return runs;
}

std::vector<PaperRow> run_paper_experiment(
    const std::vector<PaperRun>& runs,
    const std::function<void(std::size_t, const PaperRun&)>& before_each) {
  std::vector<PaperRow> rows;
  for (const PaperRun& run : runs) {
    if (before_each) before_each(rows.size(), run);
    rows.push_back({run.cluster, simulate(run.scenario).result, std::nullopt});
  }
  // Normalise to full recomputation of the same cluster and model, when it fits.
  std::map<std::pair<std::string, std::string>, double> full_tokens_per_s;
  for (const PaperRow& row : rows)
    if (row.result.strategy_requested == "full" && !row.result.oom)
      full_tokens_per_s[{row.cluster, row.result.scenario.model.preset}] = row.result.tokens_per_s;
  for (PaperRow& row : rows) {
    const auto full = full_tokens_per_s.find({row.cluster, row.result.scenario.model.preset});
    if (full != full_tokens_per_s.end()) row.throughput_vs_full = row.result.tokens_per_s / full->second;
  }
  return rows;
}

void write_paper_csv(std::ostream& out, const std::vector<PaperRow>& rows,
                     const std::vector<std::string>& overrides) {
  fmt::print(out,
             "# lynxsim {} — `lynxsim figures`: scenarios/paper/*.yaml × strategies; times are "
             "simulated, not measured (the *_seconds columns are this program's wall time)\n",
             lynxsim_version());
  if (!overrides.empty()) fmt::print(out, "# every scenario with {}\n", fmt::join(overrides, " "));
  fmt::print(out, "# stage fields (stage .. stage_oom) are those of each run's slowest stage\n");
  const auto run = fields_of(FieldLevel::kRun, true);
  const auto stage = fields_of(FieldLevel::kStage, true);
  std::string own;
  for (const PaperColumn& c : paper_columns()) own += std::string(c.name) + ",";
  fmt::print(out, "{}{},{}\n", own, csv_names(run), csv_names(stage));
  for (const PaperRow& row : rows) {
    std::string cells;
    for (const PaperColumn& c : paper_columns()) cells += csv_cell(c.value(row)) + ",";
    const StageBreakdown& slow = slowest_stage(row.result);
    fmt::print(out, "{}{},{}\n", cells, csv_cells(run, row.result, slow), csv_cells(stage, row.result, slow));
  }
}

std::string paper_columns_markdown() {
  std::string out = "| column | unit | meaning |\n|---|---|---|\n";
  for (const PaperColumn& c : paper_columns())
    out += fmt::format("| `{}` | {} | {} |\n", c.name, *c.unit ? c.unit : "-", c.description);
  return out;
}

}  // namespace lynx::runner
