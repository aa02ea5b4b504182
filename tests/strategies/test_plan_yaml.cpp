// Plan files: write → read round trip whatever the names, every read error is one line naming
// file, line, column and key, the checks of what the builder can build, and the comparison of
// a plan's embedded scenario with the scenario it runs on.
#include "model/gpt.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "strategies/plan_check.hpp"
#include "strategies/plan_yaml.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>

using namespace lynx;
using namespace lynx::runner;
using namespace lynx::strategies;
using model::OpGroup;

namespace {

// 6 layers over tp 2 × pp 2: small enough to simulate in milliseconds.
const char* kScenario =
    "name: unit\n"
    "model: {layers: 6, hidden: 512, heads: 8, seq_len: 256, vocab: 2048}\n"
    "parallel: {tp: 2, pp: 2, dp: 1, micro_batch: 1, global_batch: 4}\n"
    "hardware: {profile: dgx-a100-80gb}\n";

/// "LINE:COL" (1-based) of the value of `key` ("scenario.model.layers") in block YAML as
/// plan_to_yaml writes it: the expected position of a message, derived from the text so that
/// new scenario keys do not move the tests' line numbers.
std::string value_at(const std::string& text, const std::string& key) {
  std::vector<std::pair<std::size_t, std::string>> sections;  // (indent, name) above the line
  std::size_t line_no = 0, begin = 0;
  while (begin < text.size()) {
    const std::size_t eol = std::min(text.find('\n', begin), text.size());
    const std::string line = text.substr(begin, eol - begin);
    begin = eol + 1;
    ++line_no;
    const std::size_t indent = line.find_first_not_of(' ');
    const std::size_t colon = line.find(':');
    if (indent == std::string::npos || line[indent] == '#' || line[indent] == '-' || colon == std::string::npos) continue;
    while (!sections.empty() && sections.back().first >= indent) sections.pop_back();
    std::string path;
    for (const auto& s : sections) path += s.second + ".";
    const std::string name = line.substr(indent, colon - indent);
    path += name;
    const std::size_t value = line.find_first_not_of(' ', colon + 1);
    if (path == key) return fmt::format("{}:{}", line_no, value == std::string::npos ? colon + 2 : value + 1);
    if (value == std::string::npos) sections.push_back({indent, name});
  }
  FAIL("no key '" << key << "' in the plan text");
  return {};
}

Scenario unit_scenario(const std::vector<std::string>& overrides = {}) {
  return model::load_scenario_text(kScenario, "unit.yaml", overrides).scenario();
}

LayerDecision dropping(std::initializer_list<OpGroup> groups, Action action, Window window = Window::kNone) {
  LayerDecision d;
  for (OpGroup g : groups) d.group[static_cast<size_t>(g)] = action;
  d.window = window;
  return d;
}

/// Every kind of decision, each where the builder honours it.
RecomputePlan sample_plan() {
  RecomputePlan plan;
  plan.strategy = "lynx-heu";
  StagePlan s0;
  s0.first_layer = 0;
  s0.layers = {dropping({OpGroup::kAttnCore, OpGroup::kMlp}, Action::kOverlap, Window::kBwdTpComm),
               LayerDecision{},
               dropping({OpGroup::kAttnCore}, Action::kOverlap, Window::kPpRecvWait)};
  StagePlan s1;
  s1.first_layer = 3;
  LayerDecision selective = dropping({OpGroup::kAttnCore}, Action::kRecompute);
  selective.rerun_whole_groups = true;
  s1.layers = {selective, dropping({OpGroup::kAttnProjInput}, Action::kOverlap, Window::kFwdTpComm),
               dropping({OpGroup::kPost, OpGroup::kMlp}, Action::kRecompute)};
  plan.stages = {s0, s1};
  return plan;
}

PlanFile sample_file() {
  PlanFile f;
  f.plan = sample_plan();
  f.scenario = unit_scenario();
  f.provenance.lynxsim_version = "0.1.0";
  f.provenance.strategy_requested = "lynx-heu";
  f.provenance.strategy_won = "no-forward-windows";
  f.provenance.search_seconds = 0.000515;
  f.provenance.baseline_seconds = 0.0163;
  f.provenance.confirm_rounds = 1;
  f.provenance.solver_limit_bound = true;
  f.provenance.solver_gap = 0.25;
  f.provenance.stages = {{0, "heuristic", true, 1.5, 1000, 2000, 0, false},
                         {1, "node limit (gap 25.00%)", false, 0, 3, 4, 0.25, true}};
  f.provenance.windows = {{0, 1899.97, 20694.7}, {1, 1899.97, 0}};
  return f;
}

void check_same_decisions(const RecomputePlan& a, const RecomputePlan& b) {
  CHECK(a.strategy == b.strategy);
  REQUIRE(a.stages.size() == b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    CHECK(a.stages[s].first_layer == b.stages[s].first_layer);
    REQUIRE(a.stages[s].layers.size() == b.stages[s].layers.size());
    for (size_t l = 0; l < a.stages[s].layers.size(); ++l) {
      CHECK(a.stages[s].layers[l].group == b.stages[s].layers[l].group);
      CHECK(a.stages[s].layers[l].window == b.stages[s].layers[l].window);
      CHECK(a.stages[s].layers[l].rerun_whole_groups == b.stages[s].layers[l].rerun_whole_groups);
    }
  }
}

/// "p.yaml:LINE:COL" (1-based) of the first `needle` in `text`, plus `offset` columns: where a
/// read error of `text` points.
std::string at(const std::string& text, const std::string& needle, int offset = 0) {
  const size_t found = text.find(needle);
  REQUIRE_MESSAGE(found != std::string::npos, needle);
  const size_t line_start = text.rfind('\n', found) == std::string::npos ? 0 : text.rfind('\n', found) + 1;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(found), '\n');
  return fmt::format("p.yaml:{}:{}", line, found - line_start + 1 + static_cast<size_t>(offset));
}

/// `text` with the first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return text.replace(at, from.size(), to);
}

/// The message read_plan_text throws for `text`, or "" when it reads.
std::string read_error(const std::string& text) {
  try {
    read_plan_text(text, "p.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Checks that reading `text` fails with exactly `message`, at `needle` (+ `offset` columns).
void check_error(const std::string& text, const std::string& needle, const std::string& message,
                 int offset = 0) {
  CHECK(read_error(text) == at(text, needle, offset) + ": " + message);
}

const std::string kLayer1 = "{layer: 1, drop: [], mode: keep}";

/// The sample plan file with its layer 1 written as `layer`.
std::string with_layer1(const std::string& layer) {
  return replaced(plan_to_yaml(sample_file()), kLayer1, layer);
}

}  // namespace

TEST_CASE("plan file round trip: every decision, the scenario and the provenance come back") {
  const PlanFile file = sample_file();
  const std::string yaml = plan_to_yaml(file);
  const PlanFile back = read_plan_text(yaml, "plan.yaml");
  check_same_decisions(back.plan, file.plan);
  CHECK(scenario_to_yaml(back.scenario) == scenario_to_yaml(file.scenario));
  CHECK(back.scenario.source_file == "plan.yaml");
  CHECK(back.provenance.strategy_won == "no-forward-windows");
  CHECK(back.provenance.search_seconds == doctest::Approx(0.000515));
  REQUIRE(back.provenance.stages.size() == 2);
  CHECK(back.provenance.stages[1].status == "node limit (gap 25.00%)");
  CHECK(back.provenance.stages[1].budget_bytes == 4);
  CHECK(back.provenance.stages[1].limit_bound);
  CHECK_FALSE(back.provenance.stages[0].limit_bound);
  CHECK(back.provenance.solver_limit_bound);
  CHECK(back.provenance.solver_gap == doctest::Approx(0.25));
  REQUIRE(back.provenance.windows.size() == 2);
  CHECK(back.provenance.windows[0].top_us == doctest::Approx(20694.7));
  CHECK(plan_to_yaml(back) == yaml);
}

TEST_CASE("plan files with hostile scenario and strategy names read back") {
  // Each broke the hand-concatenated YAML of format 1 or could break a careless emitter.
  for (const std::string name :
       {"gpt: small", "it's \"quoted\"", "# hash", "a: b # c", "line one\nline two", "ünïcødé — 模型",
        "null", "~", "true", "123", "- dash", "[a, b]", "{x: 1}", "  padded  ", "tab\there", "*alias",
        "&anchor", "!tag", "%percent", "@at", "`back`", "key:", "? q", "|", ">", "'", "\""}) {
    CAPTURE(name);
    PlanFile file = sample_file();
    file.scenario.name = name;
    file.plan.strategy = name;
    file.provenance.strategy_requested = name;
    file.provenance.stages[0].status = name;
    const std::string yaml = plan_to_yaml(file);
    PlanFile back;
    REQUIRE_NOTHROW(back = read_plan_text(yaml, "plan.yaml"));
    CHECK(back.scenario.name == name);
    CHECK(back.plan.strategy == name);
    CHECK(back.provenance.strategy_requested == name);
    CHECK(back.provenance.stages[0].status == name);
    check_same_decisions(back.plan, file.plan);
    CHECK(plan_to_yaml(back) == yaml);
  }
}

TEST_CASE("plan file errors: one line naming file, line, column and key, never an internal error") {
  const std::string good = plan_to_yaml(sample_file());
  REQUIRE(read_error(good).empty());
  const std::string layer3 = "{layer: 3, drop: [core], mode: demand, rerun_whole_groups: true}";

  SUBCASE("wrong types") {
    std::string bad = with_layer1("{layer: 1, drop: [{a: 1}], mode: demand}");
    check_error(bad, "{a: 1}", "key 'stages[0].layers[1].drop': expected a string, got a mapping");
    bad = with_layer1("{layer: 1, drop: core, mode: demand}");
    check_error(bad, "core, mode", "key 'stages[0].layers[1].drop': expected a list of op groups, got 'core'");
    bad = with_layer1("{layer: 1, drop: [[core]], mode: demand}");
    check_error(bad, "[core]]", "key 'stages[0].layers[1].drop': expected a string, got a list");
    bad = with_layer1("{layer: 1, drop: [], mode: [keep]}");
    check_error(bad, "[keep]", "key 'stages[0].layers[1].mode': expected a string, got a list");
    bad = with_layer1("{layer: 1, drop: [], mode: keep, rerun_whole_groups: maybe}");
    check_error(bad, "maybe", "key 'stages[0].layers[1].rerun_whole_groups': expected true or false, got 'maybe'");
    bad = with_layer1("{layer: 1, drop: [], mode: keep, window: {a: 1}}");
    check_error(bad, "{a: 1}", "key 'stages[0].layers[1].window': expected a string, got a mapping");
    bad = replaced(good, "first_layer: 3", "first_layer: three");
    check_error(bad, "three", "key 'stages[1].first_layer': expected an integer, got 'three'");
    bad = replaced(good, "lynxsim_plan: 2", "lynxsim_plan: [2]");
    check_error(bad, "[2]", "key 'lynxsim_plan': expected an integer, got a list");
    bad = replaced(good, "search_seconds: 0.000515", "search_seconds: fast");
    check_error(bad, "fast", "key 'provenance.search_seconds': expected a number, got 'fast'");
    bad = replaced(good, "strategy: lynx-heu", "strategy:");
    CHECK(read_error(bad).starts_with("p.yaml:"));
    CHECK(read_error(bad).ends_with(": key 'strategy': expected a string, got nothing"));
    bad = good.substr(0, good.find("\nscenario:") + 1) + "scenario: 3\n" + good.substr(good.find("\nstages:") + 1);
    check_error(bad, "3\nstages", "key 'scenario': expected the resolved scenario the plan was made for (a mapping, as `lynxsim show` prints it), got '3'");
    bad = replaced(good, "first_layer: 3", "first_layer: \"3\\n4\"");
    check_error(bad, "\"3", "key 'stages[1].first_layer': expected an integer, got '3\\n4'");  // one line
    bad = with_layer1("{layer: 1, drop: [], mode: keep, \"a\\nb\": 1}");
    check_error(bad, "\"a", "key 'stages[0].layers[1].a\\nb': unknown key (known: layer, drop, mode, window, rerun_whole_groups)");
    // Not a mapping at all: the position of the document's first node.
    CHECK(read_error("- a\n") == "p.yaml:1:1: not a plan file: expected a mapping with lynxsim_plan, strategy, scenario and stages, got a list");
    CHECK(read_error("# a comment\n\n  just text\n") == "p.yaml:3:3: not a plan file: expected a mapping with lynxsim_plan, strategy, scenario and stages, got 'just text'");
    CHECK(read_error("") == "p.yaml:1:1: not a plan file: expected a mapping with lynxsim_plan, strategy, scenario and stages, got nothing");
  }
  SUBCASE("unknown keys") {
    std::string bad = good + "extra: 1\n";
    check_error(bad, "extra", "key 'extra': unknown key (known: lynxsim_plan, strategy, provenance, scenario, stages)");
    bad = with_layer1("{layer: 1, drop: [], mode: keep, windw: bwd-tp}");
    check_error(bad, "windw", "key 'stages[0].layers[1].windw': unknown key (known: layer, drop, mode, window, rerun_whole_groups)");
    bad = replaced(good, "  confirm_rounds: 1\n", "  confirm_rounds: 1\n  note: hand-made\n");
    check_error(bad, "note", "key 'provenance.note': unknown key (known: lynxsim_version, strategy_requested, strategy_won, search_seconds, baseline_seconds, confirm_rounds, solver_limit_bound, solver_gap, stages, windows)");
    // A repeated key: yaml-cpp would read the first and ignore the second silently.
    bad = with_layer1("{layer: 1, drop: [core], mode: demand, mode: keep}");
    check_error(bad, "mode: keep}", "key 'stages[0].layers[1].mode': given twice");
    bad = replaced(good, "strategy: lynx-heu\n", "strategy: lynx-heu\nstrategy: full\n");
    check_error(bad, "strategy: full", "key 'strategy': given twice");
    bad = with_layer1("{layer: 1, drop: [], mode: keep, {a: 1}: 2}");
    check_error(bad, "{a: 1}: 2", "key 'stages[0].layers[1].a mapping': unknown key (known: layer, drop, mode, window, rerun_whole_groups)");
  }
  SUBCASE("missing keys") {
    std::string bad = with_layer1("{layer: 1, drop: []}");
    check_error(bad, "{layer: 1, drop: []}", "key 'stages[0].layers[1].mode': missing");
    bad = replaced(good, "strategy: lynx-heu\n", "");
    check_error(bad, "lynxsim_plan", "key 'strategy': missing");
    bad = replaced(good, "    first_layer: 3\n", "");
    check_error(bad, "- virtual_stage: 1", "key 'stages[1].first_layer': missing", 2);
    bad = good.substr(0, good.find("\nstages:") + 1);
    check_error(bad, "lynxsim_plan", "key 'stages': missing");
    bad = replaced(good, "\nscenario:\n", "\nold_scenario:\n");
    CHECK(read_error(bad).ends_with(": key 'old_scenario': unknown key (known: lynxsim_plan, strategy, provenance, scenario, stages)"));
  }
  SUBCASE("bad values: mode, window, groups, version") {
    std::string bad = replaced(good, layer3, "{layer: 3, drop: [core], mode: lazy}");
    check_error(bad, "lazy", "key 'stages[1].layers[0].mode': 'lazy' is not one of: keep, demand, overlap");
    bad = replaced(good, "window: pp-wait", "window: bwd");
    check_error(bad, "bwd}", "key 'stages[0].layers[2].window': 'bwd' is not one of: bwd-tp, pp-wait, fwd-tp, none");
    bad = replaced(good, layer3, "{layer: 3, drop: [core, mpl], mode: demand}");
    // "mpl]": the resolved profile above it spells nccl.simple, which contains "mpl".
    check_error(bad, "mpl]", "key 'stages[1].layers[0].drop': unknown group 'mpl' (post, proj, core, mlp, moe_act)");
    bad = replaced(good, layer3, "{layer: 3, drop: [core, core], mode: demand}");
    check_error(bad, "core, core]", "key 'stages[1].layers[0].drop': group 'core' is listed twice", 6);
    bad = with_layer1("{layer: 1, drop: [core], mode: keep}");
    check_error(bad, "keep}", "key 'stages[0].layers[1].mode': 'keep' goes with an empty drop list");
    bad = with_layer1("{layer: 1, drop: [], mode: demand}");
    check_error(bad, "demand}", "key 'stages[0].layers[1].mode': 'demand' needs groups to drop (drop: [] goes with mode keep)");
    bad = replaced(good, "lynxsim_plan: 2", "lynxsim_plan: 1");
    check_error(bad, "1\nstrategy", "key 'lynxsim_plan': format 1 (plans without their scenario) is no longer read; make the plan again with `lynxsim plan`");
    bad = replaced(good, "lynxsim_plan: 2", "lynxsim_plan: 7");
    check_error(bad, "7\nstrategy", "key 'lynxsim_plan': unsupported version 7 (this lynxsim reads 2)");
    CHECK(read_error("stages: [\n") == "p.yaml:2:1: malformed YAML: end of sequence flow not found");
  }
  SUBCASE("layer and stage indices: negative, huge, out of order") {
    std::string bad = with_layer1("{layer: -1, drop: [], mode: keep}");
    check_error(bad, "-1", "key 'stages[0].layers[1].layer': is -1, expected 1 (first_layer + position in the list)");
    bad = with_layer1("{layer: 99999999999999999999, drop: [], mode: keep}");
    check_error(bad, "9999", "key 'stages[0].layers[1].layer': expected an integer, got '99999999999999999999'");
    bad = replaced(replaced(good, "first_layer: 3", "first_layer: -2"), "{layer: 3,", "{layer: -2,");
    bad = replaced(replaced(bad, "{layer: 4,", "{layer: -1,"), "{layer: 5,", "{layer: 0,");
    check_error(bad, "-2\n", "key 'stages[1].first_layer': is -2, expected 3 (stages hold consecutive layers from 0)");
    bad = replaced(good, "virtual_stage: 1\n", "virtual_stage: 5\n");
    check_error(bad, "5\n    first_layer", "key 'stages[1].virtual_stage': is 5, expected 1 (stages are listed in order)");
  }
  SUBCASE("wrong number of stages or layers for the embedded scenario") {
    PlanFile file = sample_file();
    file.plan.stages.pop_back();
    std::string bad = plan_to_yaml(file);
    check_error(bad, "- virtual_stage: 0", "key 'stages': the plan has 1 virtual stages, the scenario's layout has 2 (pp 2 × virtual_stages 1)");
    file = sample_file();
    file.plan.stages[1].layers.pop_back();
    bad = plan_to_yaml(file);
    check_error(bad, "- virtual_stage: 0", "key 'stages': hold 5 layers, the model has 6");
    file = sample_file();
    file.plan.stages[1].layers.clear();
    bad = plan_to_yaml(file);
    check_error(bad, "[]\n", "key 'stages[1].layers': is empty (every virtual stage holds a layer)");
  }
  SUBCASE("errors in the embedded scenario name the plan file's own lines") {
    std::string bad = replaced(good, "memory: 80GiB", "memory: 80GiBB");
    check_error(bad, "80GiBB", "key 'hardware.gpu.memory': expected a size like '80GiB', got '80GiBB' (units: B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)");
    bad = replaced(good, "    tp: 2\n", "    tp: 2\n    pipeline: 2\n");
    check_error(bad, "    pipeline: 2", "unknown key 'parallel.pipeline'", 4);
  }
}

TEST_CASE("a plan that asks for what the builder cannot build is a user error naming the layer and group") {
  const std::string good = plan_to_yaml(sample_file());

  // Dropping 'post' brings back LN2's input, the output of the attention's TP all-reduce.
  std::string bad = with_layer1("{layer: 1, drop: [post], mode: overlap, window: bwd-tp}");
  check_error(bad, "[post]", "key 'stages[0].layers[1].drop': layer 1: overlapped recompute of group 'post' re-runs 'tp_allreduce_attn', a TP collective; only communication-free recomputes can be overlapped (keep 'post', or use mode demand)");
  CHECK(read_error(with_layer1("{layer: 1, drop: [post], mode: demand}")).empty());
  bad = with_layer1("{layer: 1, drop: [post, core], mode: overlap, window: bwd-tp}");
  check_error(bad, "[post, core]", "key 'stages[0].layers[1].drop': layer 1: overlapped recompute of group 'post' re-runs 'tp_allreduce_attn', a TP collective; only communication-free recomputes can be overlapped (keep 'post', or use mode demand)");
  bad = with_layer1("{layer: 1, drop: [input], mode: demand}");
  check_error(bad, "[input]", "key 'stages[0].layers[1].drop': layer 1 drops group 'input' (the layer input): only a layer of a recompute chunk may, dropping every group on demand above a layer below it in the same virtual stage that does the same (its whole recompute brings this input back); other plans keep it, the recompute starts from it (droppable groups: post, proj, core, mlp, moe_act)");
  bad = with_layer1("{layer: 1, drop: [core], mode: overlap, window: pp-wait}");
  check_error(bad, "pp-wait}", "key 'stages[0].layers[1].window': layer 1: window pp-wait (the wait for the next stage's gradient) belongs to a virtual stage's top layer; use bwd-tp or fwd-tp");
  bad = replaced(good, "{layer: 2, drop: [core], mode: overlap, window: pp-wait}", "{layer: 2, drop: [core], mode: overlap, window: bwd-tp}");
  check_error(bad, "bwd-tp}\n  - virtual_stage: 1", "key 'stages[0].layers[2].window': layer 2: window bwd-tp (the backward of the layer above) does not exist for a virtual stage's top layer; use pp-wait or fwd-tp");
  const std::string top5 = "{layer: 5, drop: [core], mode: overlap, window: ";
  bad = replaced(good, "{layer: 5, drop: [post, mlp], mode: demand}", top5 + "pp-wait}");
  check_error(bad, top5, "key 'stages[1].layers[2].window': layer 5: window pp-wait: the last virtual stage receives no gradient from a next stage; use bwd-tp (the LM head's backward) or fwd-tp", static_cast<int>(top5.size()));
  bad = with_layer1("{layer: 1, drop: [core], mode: overlap}");
  check_error(bad, "{layer: 1, drop: [core], mode: overlap}", "key 'stages[0].layers[1].window': layer 1: mode overlap needs a window (bwd-tp, pp-wait or fwd-tp)");
  // Accepted and ignored before: a layer that drops nothing has nothing to re-run whole.
  bad = with_layer1("{layer: 1, drop: [], mode: keep, rerun_whole_groups: true}");
  check_error(bad, "rerun_whole_groups: true}", "key 'stages[0].layers[1].rerun_whole_groups': layer 1 drops nothing, so there is no group to re-run whole (rerun_whole_groups goes with dropped groups)", 20);
  bad = with_layer1("{layer: 1, drop: [core], mode: demand, window: fwd-tp}");
  check_error(bad, "fwd-tp}", "key 'stages[0].layers[1].window': layer 1: window fwd-tp goes only with mode overlap");

  SUBCASE("with sequence parallelism, dropping mlp or proj re-runs an all-gather") {
    PlanFile file = sample_file();
    file.scenario = unit_scenario({"parallel.sequence_parallel=true"});
    bad = plan_to_yaml(file);
    check_error(bad, "[core, mlp]", "key 'stages[0].layers[0].drop': layer 0: overlapped recompute of group 'mlp' re-runs 'sp_allgather_mlp', a TP collective; only communication-free recomputes can be overlapped (keep 'mlp', or use mode demand)");
    file.plan.stages[0].layers[0] = LayerDecision{};
    bad = plan_to_yaml(file);
    check_error(bad, "[proj]", "key 'stages[1].layers[1].drop': layer 4: overlapped recompute of group 'proj' re-runs 'sp_allgather_attn', a TP collective; only communication-free recomputes can be overlapped (keep 'proj', or use mode demand)");
    file.scenario = unit_scenario({"parallel.tp=1"});  // no collectives at all
    CHECK(read_error(plan_to_yaml(file)).empty());
  }
  SUBCASE("validate_plan checks plans in memory the same way") {
    const Scenario sc = unit_scenario();
    const auto ops = model::gpt_workload(sc.model, sc.parallel);
    CHECK_NOTHROW(validate_plan(sample_plan(), sc, ops, "live"));
    RecomputePlan mixed = sample_plan();
    mixed.stages[0].layers[1] = dropping({OpGroup::kAttnCore}, Action::kRecompute, Window::kNone);
    mixed.stages[0].layers[1].group[static_cast<size_t>(OpGroup::kMlp)] = Action::kOverlap;
    mixed.stages[0].layers[1].window = Window::kBwdTpComm;
    CHECK_THROWS_WITH_AS(validate_plan(mixed, sc, ops, "live"),
                         "live: key 'stages[0].layers[1].drop': layer 1 brings some dropped groups back on demand and others overlapped; one recompute pass brings them all back one way",
                         Error);
    RecomputePlan full = plan_fixed_strategy(RecomputeSpec{RecomputeKind::kFull}, {3, 3});
    CHECK_NOTHROW(validate_plan(full, sc, ops, "live"));
    // A recompute chunk (full uniform recomputation, num_layers 2): layer 4 drops its input too.
    full.stages[1].layers[1].group[static_cast<size_t>(OpGroup::kLayerInput)] = Action::kRecompute;
    CHECK_NOTHROW(validate_plan(full, sc, ops, "live"));
    full.stages[1].layers[0].group[static_cast<size_t>(OpGroup::kLayerInput)] = Action::kRecompute;
    CHECK_THROWS_WITH_AS(validate_plan(full, sc, ops, "live"),
                         doctest::Contains("live: key 'stages[1].layers[0].drop': layer 3 drops group 'input'"), Error);
  }
}

TEST_CASE("run --plan: the embedded scenario, or a scenario checked against it") {
  const std::string plan_text = plan_to_yaml(sample_file());
  const PlanFile file = read_plan_text(plan_text, "p.yaml");

  SUBCASE("mismatches name the first key that differs and both values, per key class") {
    auto message = [&](const std::vector<std::string>& overrides) {
      try {
        check_plan_scenario(file, "p.yaml", model::load_scenario_text(kScenario, "s.yaml", overrides), "s.yaml");
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    CHECK(message({"model.layers=4"}) == fmt::format("p.yaml:{}: key 'scenario.model.layers': made for 6, s.yaml has 4 (s.yaml: --set model.layers=4)", value_at(plan_text, "scenario.model.layers")));
    CHECK(message({"model.seq_len=128"}) == fmt::format("p.yaml:{}: key 'scenario.model.seq_len': made for 256, s.yaml has 128 (s.yaml: --set model.seq_len=128)", value_at(plan_text, "scenario.model.seq_len")));
    CHECK(message({"model.flash_attention=true"}) == fmt::format("p.yaml:{}: key 'scenario.model.flash_attention': made for false, s.yaml has true (s.yaml: --set model.flash_attention=true)", value_at(plan_text, "scenario.model.flash_attention")));
    CHECK(message({"parallel.tp=1"}) == fmt::format("p.yaml:{}: key 'scenario.parallel.tp': made for 2, s.yaml has 1 (s.yaml: --set parallel.tp=1)", value_at(plan_text, "scenario.parallel.tp")));
    // parallel.etp: 0 is tp, so an explicit tp fits a plan made with 0, another value does not.
    CHECK(message({"parallel.etp=2"}).empty());
    CHECK(message({"parallel.etp=1"}).find("key 'scenario.parallel.etp': made for 0, s.yaml has 1") != std::string::npos);
    CHECK(message({"parallel.micro_batch=2"}) == fmt::format("p.yaml:{}: key 'scenario.parallel.micro_batch': made for 1, s.yaml has 2 (s.yaml: --set parallel.micro_batch=2)", value_at(plan_text, "scenario.parallel.micro_batch")));
    CHECK(message({"parallel.schedule=gpipe"}) == fmt::format("p.yaml:{}: key 'scenario.parallel.schedule': made for 1f1b, s.yaml has gpipe (s.yaml: --set parallel.schedule=gpipe)", value_at(plan_text, "scenario.parallel.schedule")));
    CHECK(message({"parallel.sequence_parallel=true", "parallel.global_batch=8"}) ==
          fmt::format("p.yaml:{}: key 'scenario.parallel.sequence_parallel': made for false, s.yaml has true (s.yaml: --set parallel.sequence_parallel=true)", value_at(plan_text, "scenario.parallel.sequence_parallel")));
    CHECK(message({"hardware.gpu.memory=40GiB"}) == fmt::format("p.yaml:{}: key 'scenario.hardware.gpu.memory': made for 80GiB, s.yaml has 40GiB (s.yaml: --set hardware.gpu.memory=40GiB)", value_at(plan_text, "scenario.hardware.gpu.memory")));
    // The budget also depends on the reserve and on the optimizer state's sharding.
    CHECK(message({"hardware.gpu.reserve=8GiB"}) == fmt::format("p.yaml:{}: key 'scenario.hardware.gpu.reserve': made for 4GiB, s.yaml has 8GiB (s.yaml: --set hardware.gpu.reserve=8GiB)", value_at(plan_text, "scenario.hardware.gpu.reserve")));
    CHECK(message({"parallel.distributed_optimizer=true"}) ==
          fmt::format("p.yaml:{}: key 'scenario.parallel.distributed_optimizer': made for false, s.yaml has true (s.yaml: --set parallel.distributed_optimizer=true)", value_at(plan_text, "scenario.parallel.distributed_optimizer")));
    // A mixture of experts changes the layer's ops and the static bytes.
    CHECK(message({"model.moe.num_experts=2", "parallel.sequence_parallel=true", "parallel.global_batch=8"}) ==
          fmt::format("p.yaml:{}: key 'scenario.model.moe.num_experts': made for 0, s.yaml has 2 (s.yaml: --set model.moe.num_experts=2)", value_at(plan_text, "scenario.model.moe.num_experts")));
    // What-ifs: the plan does not depend on links, efficiencies or the strategy field.
    CHECK(message({"hardware.node.nvlink.bw=100GB/s", "hardware.gpu.contention=0.3", "recompute.strategy=full"}).empty());
    // A preset and its explicit shape are the same model.
    CHECK(message({}).empty());
  }
  SUBCASE("a mismatch says where the scenario's value came from: its line, a profile, or a default") {
    PlanFile made = sample_file();
    made.scenario = unit_scenario({"parallel.distributed_optimizer=true", "hardware.gpu.reserve=8GiB"});
    const std::string made_text = plan_to_yaml(made);
    const PlanFile plan = read_plan_text(made_text, "p.yaml");
    auto message = [&](const char* text) {
      try {
        check_plan_scenario(plan, "p.yaml", model::load_scenario_text(text, "s.yaml"), "s.yaml");
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    const std::string shape =
        "model: {layers: 6, hidden: 512, heads: 8, seq_len: 256, vocab: 2048}\n"
        "parallel: {tp: 2, pp: 2, dp: 1, micro_batch: 1, global_batch: 4}\n";
    CHECK(message((shape + "hardware: {profile: dgx-a100-80gb, gpu: {reserve: 8GiB}}\n").c_str()) ==
          fmt::format("p.yaml:{}: key 'scenario.parallel.distributed_optimizer': made for true, s.yaml has false (default)", value_at(made_text, "scenario.parallel.distributed_optimizer")));
    const std::string distributed =
        "model: {layers: 6, hidden: 512, heads: 8, seq_len: 256, vocab: 2048}\n"
        "parallel: {tp: 2, pp: 2, dp: 1, micro_batch: 1, global_batch: 4, distributed_optimizer: true}\n";
    CHECK(message((distributed + "hardware: {profile: dgx-a100-80gb}\n").c_str()) ==
          fmt::format("p.yaml:{}: key 'scenario.hardware.gpu.reserve': made for 8GiB, s.yaml has 4GiB (hardware.profile at s.yaml:3:21)", value_at(made_text, "scenario.hardware.gpu.reserve")));
    CHECK(message((distributed + "hardware: {profile: dgx-a100-80gb, gpu: {reserve: 6GiB}}\n").c_str()) ==
          fmt::format("p.yaml:{}: key 'scenario.hardware.gpu.reserve': made for 8GiB, s.yaml has 6GiB (s.yaml:3:51)", value_at(made_text, "scenario.hardware.gpu.reserve")));
  }
  SUBCASE("a scenario file is compared with the plan") {
    const std::string dir = LYNXSIM_SOURCE_DIR "/scenarios/paper/";
    PlanFile f;
    f.scenario = model::load_scenario_file(dir + "pcie-gpt-2.7b.yaml").scenario();
    f.plan = plan_fixed_strategy(RecomputeSpec{RecomputeKind::kSelective}, uniform_partition(32, 4));
    const std::string f_text = plan_to_yaml(f);
    const PlanFile plan = read_plan_text(f_text, "p.yaml");
    CHECK(scenario_for_plan(plan, "p.yaml", dir + "pcie-gpt-2.7b.yaml", {"hardware.node.nic.bw=10GB/s"})
              ->hardware.nic.bw_bytes_per_s == 10'000'000'000ull);
    CHECK_THROWS_WITH_AS(scenario_for_plan(plan, "p.yaml", dir + "pcie-gpt-1.3b.yaml", {}),
                         fmt::format("p.yaml:{1}: key 'scenario.model.layers': made for 32, {0}pcie-gpt-1.3b.yaml has 24 (model.preset at {0}pcie-gpt-1.3b.yaml:7:11)", dir, value_at(f_text, "scenario.model.layers")).c_str(), Error);
    CHECK_THROWS_WITH_AS(scenario_for_plan(plan, "p.yaml", dir + "pcie-gpt-2.7b.yaml", {"parallel.micro_batch=2"}),
                         fmt::format("p.yaml:{1}: key 'scenario.parallel.micro_batch': made for 4, {0}pcie-gpt-2.7b.yaml with --set has 2 ({0}pcie-gpt-2.7b.yaml: --set parallel.micro_batch=2)", dir, value_at(f_text, "scenario.parallel.micro_batch")).c_str(), Error);
  }
  SUBCASE("--set recompute.* is refused, other --set are what-ifs on the embedded scenario") {
    CHECK_THROWS_WITH_AS(scenario_for_plan(file, "p.yaml", "", {"recompute.strategy=lynx-opt"}),
                         "--set recompute.strategy=lynx-opt: not allowed with --plan: p.yaml fixes every recompute decision (a lynx-heu plan); drop --plan to plan again, or drop this --set to run the plan",
                         Error);
    CHECK_THROWS_WITH_AS(scenario_for_plan(file, "p.yaml", "", {" recompute.solver_nodes = 10"}),
                         doctest::Contains("--set  recompute.solver_nodes = 10: not allowed with --plan"), Error);
    CHECK_THROWS_WITH_AS(scenario_for_plan(file, "p.yaml", "", {"parallel.tp=1"}),
                         fmt::format("p.yaml:{}: key 'scenario.parallel.tp': made for 2, its scenario with --set has 1 (p.yaml: --set parallel.tp=1)", value_at(plan_text, "scenario.parallel.tp")).c_str(), Error);
    const auto what_if = scenario_for_plan(file, "p.yaml", "", {"hardware.node.nvlink.bw=100GB/s"});
    CHECK(what_if->hardware.nvlink.bw_bytes_per_s == 100'000'000'000ull);
    CHECK(what_if->name == "unit");
  }
  SUBCASE("the embedded scenario alone runs the plan, as the planned run did") {
    const SimRun planned = simulate(model::load_scenario_text(kScenario, "unit.yaml", {"recompute.strategy=lynx-heu"}));
    PlanFile made;
    made.plan = planned.plan;
    made.scenario = planned.result.scenario;
    const PlanFile back = read_plan_text(plan_to_yaml(made), "p.yaml");
    const auto sc = scenario_for_plan(back, "p.yaml", "", {});
    SimOptions options;
    options.plan = &back.plan;
    const SimRun replay = simulate(sc, options);
    CHECK(replay.result.iteration_time_s == planned.result.iteration_time_s);
    CHECK(replay.result.event_fingerprint == planned.result.event_fingerprint);
    CHECK(replay.result.scenario.name == "unit");
    // A what-if on the same plan: slower links, the same decisions, a slower iteration.
    const SimRun slow = simulate(scenario_for_plan(back, "p.yaml", "", {"hardware.node.nvlink.bw=10GB/s"}), options);
    CHECK(slow.result.iteration_time_s > planned.result.iteration_time_s);
  }
}

TEST_CASE("a planner strategy without its planner is not-in-build (E305)") {
  // Every build tools/setup.sh makes has the planners, so no command line reaches this: the
  // fixed-strategy path is what a build without CBC falls back to for lynx-opt.
  CHECK(test::code_of([] { (void)plan_fixed_strategy(RecomputeSpec{RecomputeKind::kLynxOpt}, {2}); }) ==
        ErrorCode::kNotInBuild);
}
