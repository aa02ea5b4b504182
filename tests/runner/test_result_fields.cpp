// The one table of result fields: every writer (table, CSV, JSON, the paper experiment's CSV)
// has every field, names agree with the table, docs/results.md is generated from it, and the
// table header says in words what ran.
#include "runner/paper_experiment.hpp"
#include "runner/report.hpp"
#include "runner/result_fields.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

using namespace lynx;
using namespace lynx::runner;

namespace {

const SimResult& default_result() {
  static const SimResult result = simulate(model::default_scenario()).result;
  return result;
}

std::string report(const SimResult& r, ReportFormat format) {
  std::ostringstream out;
  write_report(out, r, format);
  return out.str();
}

std::vector<std::string> names(const std::vector<const ResultField*>& fields) {
  std::vector<std::string> out;
  for (const ResultField* f : fields) out.emplace_back(f->name);
  return out;
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
  return out;
}

/// The non-comment lines of a CSV text.
std::vector<std::string> csv_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

/// Keys of the JSON object on lines starting with `indent` (the writer puts one top-level key
/// per line and each stage object on one line).
std::vector<std::string> json_keys(const std::string& text, const std::string& indent) {
  static const std::regex key("\"([a-z_]+)\": ");
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(indent, 0) != 0 || line.size() <= indent.size() || line[indent.size()] == ' ') continue;
    if (indent.size() == 2) {  // top level: the first key of the line only
      std::smatch m;
      if (std::regex_search(line, m, key)) out.push_back(m[1]);
      continue;
    }
    for (std::sregex_iterator it(line.begin(), line.end(), key), end; it != end; ++it)
      out.push_back((*it)[1]);
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("result fields: unique names, each described, configuration and planning present") {
  std::set<std::string> seen;
  for (const ResultField& f : result_fields()) {
    CHECK_MESSAGE(seen.insert(f.name).second, f.name);
    CHECK(std::string(f.description).size() > 10);
    CHECK(static_cast<bool>(f.value));
  }
  for (const char* name : {"scenario", "profile", "gpus", "tp", "pp", "dp", "micro_batch",
                           "global_batch", "strategy_requested", "strategy", "engine_runs",
                           "search_seconds", "baseline_seconds", "confirm_seconds",
                           "event_fingerprint", "contention_s", "recompute_overlapped_s"})
    CHECK_MESSAGE(seen.count(name) == 1, name);
  for (const PaperColumn& c : paper_columns()) CHECK_MESSAGE(seen.count(c.name) == 0, c.name);
}

TEST_CASE("CSV header equals the table's names, every row has every field") {
  const SimResult& r = default_result();
  const auto lines = csv_lines(report(r, ReportFormat::kCsv));
  REQUIRE(lines.size() == 1 + r.stages.size());
  std::vector<std::string> expected = names(fields_of(FieldLevel::kRun, true));
  for (const auto& n : names(fields_of(FieldLevel::kStage, true))) expected.push_back(n);
  CHECK(split_commas(lines[0]) == expected);
  for (size_t i = 1; i < lines.size(); ++i) CHECK(split_commas(lines[i]).size() == expected.size());
  // The configuration is in every row, so concatenated files stay readable.
  CHECK(lines[1].find(",default,gpt-1.3b,") != std::string::npos);
  // The multi-line scenario is in the comments instead.
  CHECK(report(r, ReportFormat::kCsv).find("# name: default") != std::string::npos);
}

TEST_CASE("JSON keys equal the table's names, at the top level and per stage") {
  const SimResult& r = default_result();
  const std::string json = report(r, ReportFormat::kJson);
  std::vector<std::string> top = names(fields_of(FieldLevel::kRun));
  top.push_back("stages");
  CHECK(json_keys(json, "  ") == top);
  const auto stage_keys = json_keys(json, "    ");
  const auto stage_names = names(fields_of(FieldLevel::kStage));
  REQUIRE(stage_keys.size() == stage_names.size() * r.stages.size());
  CHECK(std::vector<std::string>(stage_keys.begin(), stage_keys.begin() + static_cast<long>(stage_names.size())) == stage_names);
}

TEST_CASE("JSON stays valid when the MILP gap is infinite, CSV quotes text with commas") {
  SimResult r = default_result();
  r.solver_gap = std::numeric_limits<double>::infinity();
  r.scenario.name = "gpt, \"small\"";
  const std::string json = report(r, ReportFormat::kJson);
  CHECK(json.find("\"solver_gap\": null,") != std::string::npos);
  CHECK(json.find("inf") == std::string::npos);
  const auto lines = csv_lines(report(r, ReportFormat::kCsv));
  CHECK(lines[1].find(",\"gpt, \"\"small\"\"\",") != std::string::npos);
  CHECK(csv_cell(FieldValue::of_real(std::numeric_limits<double>::infinity())) == "inf");
  CHECK(csv_cell(FieldValue::null()).empty());
  CHECK(json_literal(FieldValue::of_list({12, 12})) == "[12, 12]");
  CHECK(csv_cell(FieldValue::of_list({12, 12})) == "12 12");
}

TEST_CASE("the human table shows every field it has a label for, and explains its columns") {
  SimResult r = default_result();
  // Planning fields are hidden when zero: give them values so every line must appear.
  r.search_seconds = 0.25;
  r.baseline_seconds = 0.5;
  r.confirm_seconds = 0.75;
  r.solver_gap = 0.01;
  const std::string table = report(r, ReportFormat::kTable);
  for (const ResultField& f : result_fields())
    if (f.table.label) CHECK_MESSAGE(table.find(f.table.label) != std::string::npos, f.table.label);
  CHECK(table.find("recomp-stream s") != std::string::npos);
  CHECK(table.find("hidden s") == std::string::npos);
  CHECK(table.find("contention s: compute-stream kernel time beyond solo time") != std::string::npos);
  CHECK(table.find("planner search       0.250000 s wall") != std::string::npos);
  CHECK(table.find("baseline run         0.500000 s wall") != std::string::npos);
  CHECK(table.find("confirm runs         0.750000 s wall") != std::string::npos);
  // A fixed strategy's zero planning time is not shown.
  const std::string plain = report(default_result(), ReportFormat::kTable);
  CHECK(plain.find("planner search") == std::string::npos);
}

TEST_CASE("the table header says which strategy ran, which was requested, and if nothing was recomputed") {
  SimResult r = default_result();
  REQUIRE(r.strategy == "none");
  CHECK(strategy_sentence(r) == "recompute none");
  r.strategy_requested = r.strategy = "lynx-heu";  // a recomputing plan that recomputed nothing
  CHECK(strategy_sentence(r) == "recompute lynx-heu; nothing recomputed: all activations fit");
  r.strategy = "no-overlap";
  const std::string fallback = strategy_sentence(r);
  CHECK(fallback.rfind("recompute lynx-heu (requested) → ran no-overlap: the engine found the "
                       "narrower plan faster", 0) == 0);
  CHECK(report(r, ReportFormat::kTable).find(fallback) != std::string::npos);
  r.strategy = "selective";
  r.stages[0].recompute_s = 0.1;
  CHECK(strategy_sentence(r).find("nothing recomputed") == std::string::npos);
  CHECK(strategy_sentence(r).find("ran selective") != std::string::npos);
  r.stages[0].recompute_s = 0;
  r.strategy = "lynx-opt";
  r.strategy_requested = "lynx-opt";
  r.oom = true;
  r.oom_stage = 1;
  CHECK(strategy_sentence(r) == "recompute lynx-opt; nothing recomputed, yet stage 1 does not fit");
}

TEST_CASE("docs/results.md contains the current field tables") {
  const std::string docs = read_file(std::string(LYNXSIM_SOURCE_DIR) + "/docs/results.md");
  for (const auto& [name, current] : {std::pair{"result_fields.md", result_fields_markdown()},
                                      std::pair{"paper_columns.md", paper_columns_markdown()}}) {
    const bool up_to_date = docs.find(current) != std::string::npos;
    if (!up_to_date) std::ofstream(std::string(LYNXSIM_BINARY_DIR) + "/" + name) << current;
    CHECK_MESSAGE(up_to_date, "docs/results.md is out of date: paste " LYNXSIM_BINARY_DIR "/"
                                  << std::string(name) << " between its GENERATED markers");
  }
}

TEST_CASE("paper experiment: selection, normalisation to full, CSV columns by the tables") {
  PaperSelection sel;
  sel.scenario_dir = std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper";
  sel.models = {"gpt-1.3b"};
  sel.clusters = {"nvlink"};
  sel.strategies = {"full", "none"};
  const auto runs = paper_runs(sel);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].strategy == "full");
  CHECK(runs[0].scenario->recompute.strategy == RecomputeKind::kFull);
  CHECK(runs[1].scenario->recompute.strategy == RecomputeKind::kNone);
  size_t calls = 0;
  const auto rows = run_paper_experiment(runs, [&](size_t done, const PaperRun&) { CHECK(done == calls++); });
  CHECK(calls == 2);
  REQUIRE(rows.size() == 2);
  REQUIRE(rows[0].throughput_vs_full.has_value());
  CHECK(*rows[0].throughput_vs_full == 1.0);
  CHECK(*rows[1].throughput_vs_full == doctest::Approx(rows[1].result.tokens_per_s / rows[0].result.tokens_per_s));

  std::ostringstream out;
  write_paper_csv(out, rows);
  const auto lines = csv_lines(out.str());
  REQUIRE(lines.size() == 3);
  std::vector<std::string> expected;
  for (const PaperColumn& c : paper_columns()) expected.emplace_back(c.name);
  for (const auto& n : names(fields_of(FieldLevel::kRun, true))) expected.push_back(n);
  for (const auto& n : names(fields_of(FieldLevel::kStage, true))) expected.push_back(n);
  CHECK(split_commas(lines[0]) == expected);
  CHECK(split_commas(lines[1]).size() == expected.size());
  CHECK(lines[1].rfind("nvlink,1,", 0) == 0);
  CHECK(out.str().find("simulated, not measured") != std::string::npos);

  // Without full there is nothing to normalise to: the cell is empty, not 0.
  sel.strategies = {"none"};
  const auto alone = run_paper_experiment(paper_runs(sel));
  CHECK_FALSE(alone[0].throughput_vs_full.has_value());
}

TEST_CASE("paper experiment: a typo in the selection is an error, not a smaller sweep") {
  PaperSelection sel;
  sel.scenario_dir = std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper";
  sel.strategies = {"lynx"};
  CHECK_THROWS_WITH_AS(paper_runs(sel), doctest::Contains("--strategies: unknown strategy 'lynx'"), Error);
  sel.strategies = {};
  sel.models = {"gpt-1.3b", "gpt-99b"};
  CHECK_THROWS_WITH_AS(paper_runs(sel), doctest::Contains("--models: 'gpt-99b' matches no paper scenario"), Error);
  sel.models = {};
  sel.clusters = {"nvlnk"};
  CHECK_THROWS_WITH_AS(paper_runs(sel), doctest::Contains("--clusters: 'nvlnk'"), Error);
  sel.clusters = {};
  sel.scenario_dir = std::string(LYNXSIM_SOURCE_DIR) + "/no-such-folder";
  CHECK_THROWS_WITH_AS(paper_runs(sel), doctest::Contains("is not a folder"), Error);
}

TEST_CASE("the committed results/paper*/paper_results.csv have the current columns") {
  // `lynxsim figures --update-committed` (and `--global-batch 512|1536 --update-committed`)
  // regenerate them; a field added to the table without regenerating leaves the committed
  // results behind, and this fails.
  std::vector<std::string> expected;
  for (const PaperColumn& c : paper_columns()) expected.emplace_back(c.name);
  for (const auto& n : names(fields_of(FieldLevel::kRun, true))) expected.push_back(n);
  for (const auto& n : names(fields_of(FieldLevel::kStage, true))) expected.push_back(n);
  for (const auto& [dir, option] : {std::pair{"paper", ""}, {"paper-gb512", " --global-batch 512"},
                                    {"paper-gb1536", " --global-batch 1536"}}) {
    CAPTURE(dir);
    const std::string text = read_file(std::string(LYNXSIM_SOURCE_DIR) + "/results/" + dir + "/paper_results.csv");
    const auto lines = csv_lines(text);
    REQUIRE(lines.size() > 1);
    CHECK_MESSAGE(split_commas(lines[0]) == expected,
                  "results/" << dir << "/ is out of date: run `build/lynxsim figures" << option << " --update-committed`");
  }
}

TEST_CASE("paper experiment: overrides move every scenario to a production batch, same layouts") {
  PaperSelection sel;
  sel.scenario_dir = std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper";
  sel.clusters = {"pcie"};
  sel.strategies = {"full"};
  const auto plain = paper_runs(sel);
  sel.overrides = {"parallel.global_batch=512"};
  const auto big = paper_runs(sel);
  REQUIRE(big.size() == plain.size());
  for (std::size_t i = 0; i < big.size(); ++i) {
    CHECK(big[i].scenario->parallel.global_batch == 512);
    CHECK(plain[i].scenario->parallel.global_batch != 512);
    CHECK(big[i].scenario->parallel.tp == plain[i].scenario->parallel.tp);
    CHECK(big[i].scenario->parallel.micro_batch == plain[i].scenario->parallel.micro_batch);
    CHECK(big[i].scenario->recompute.strategy == RecomputeKind::kFull);
  }
}
