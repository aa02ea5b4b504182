#include "strategies/plan_yaml.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "scenarios/scenario_loader.hpp"
#include "scenarios/yaml_document.hpp"
#include "sim/json.hpp"
#include "strategies/plan_check.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <string_view>
#include <vector>

namespace lynx::strategies {
namespace {

constexpr std::array<Window, 4> kWindows = {Window::kNone, Window::kBwdTpComm, Window::kPpRecvWait,
                                            Window::kFwdTpComm};

constexpr const char* kHeader =
    "lynxsim recomputation plan (`lynxsim plan`); run it with `lynxsim run --plan FILE`.\n"
    "provenance: how it was made (informational, not used to run it). scenario: the resolved\n"
    "scenario it was made for, run when no other is given; `run SCENARIO --plan FILE` refuses a\n"
    "SCENARIO with another model shape, layout or GPU memory. stages: per virtual pipeline\n"
    "stage, its layers and what each does with its saved activations. drop: op groups not kept\n"
    "in forward (post = LN2 input + residual masks, proj = QKV/out-proj inputs + Q,K,V, core =\n"
    "softmax/dropout tensors, mlp = FC1/GeLU/FC2 inputs or the MoE MLP's tensors, moe_act = the\n"
    "experts' FC2 input); mode: keep | demand (recompute before the backward) | overlap\n"
    "(recompute on the recompute stream in `window`: bwd-tp, the layer above's backward;\n"
    "pp-wait, the wait for the next stage's gradient; fwd-tp, the forward step before).";

/// The provenance fields, once for writing and reading: `visit(key, member)` on each scalar.
template <typename P, typename Visit>
void provenance_fields(P& p, Visit&& visit) {
  visit("lynxsim_version", p.lynxsim_version);
  visit("strategy_requested", p.strategy_requested);
  visit("strategy_won", p.strategy_won);
  visit("search_seconds", p.search_seconds);
  visit("baseline_seconds", p.baseline_seconds);
  visit("confirm_rounds", p.confirm_rounds);
  visit("solver_limit_bound", p.solver_limit_bound);
  visit("solver_gap", p.solver_gap);
}
template <typename S, typename Visit>
void stage_search_fields(S& s, Visit&& visit) {
  visit("stage", s.stage);
  visit("status", s.status);
  visit("feasible", s.feasible);
  visit("exposed_us_per_micro_batch", s.exposed_us_per_micro_batch);
  visit("activation_bytes", s.activation_bytes);
  visit("budget_bytes", s.budget_bytes);
  visit("gap", s.gap);
  visit("limit_bound", s.limit_bound);
}
template <typename W, typename Visit>
void windows_fields(W& w, Visit&& visit) {
  visit("virtual_stage", w.virtual_stage);
  visit("inner_us", w.inner_us);
  visit("top_us", w.top_us);
}

/// The keys a field list visits.
template <typename T, typename Fields>
std::vector<std::string> keys_of(Fields&& fields) {
  std::vector<std::string> keys;
  T holder;
  fields(holder, [&](const char* key, const auto&) { keys.emplace_back(key); });
  return keys;
}

// ---- writing ----

template <typename T>
void entry(YAML::Emitter& out, const char* key, const T& value) {
  out << YAML::Key << key << YAML::Value << value;
}

/// `items` as a list of one-line mappings under `key` (nothing when empty).
template <typename T, typename Fields>
void emit_rows(YAML::Emitter& out, const char* key, const std::vector<T>& items, Fields&& fields) {
  if (items.empty()) return;
  entry(out, key, YAML::BeginSeq);
  for (const T& item : items) {
    out << YAML::Flow << YAML::BeginMap;
    fields(item, [&](const char* k, const auto& value) { entry(out, k, value); });
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void emit_provenance(YAML::Emitter& out, const PlanProvenance& p) {
  entry(out, "provenance", YAML::BeginMap);
  provenance_fields(p, [&](const char* k, const auto& value) { entry(out, k, value); });
  emit_rows(out, "stages", p.stages, [](auto& s, auto&& v) { stage_search_fields(s, v); });
  emit_rows(out, "windows", p.windows, [](auto& w, auto&& v) { windows_fields(w, v); });
  out << YAML::EndMap;
}

void emit_layer(YAML::Emitter& out, const LayerDecision& d, int layer) {
  out << YAML::Flow << YAML::BeginMap;
  entry(out, "layer", layer);
  out << YAML::Key << "drop" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (size_t g = 0; g < kNumOpGroups; ++g)
    if (d.group[g] != Action::kKeep) out << model::kOpGroupNames[g];
  out << YAML::EndSeq;
  out << YAML::Key << "mode" << YAML::Value
      << (d.keeps_everything() ? "keep" : d.overlapped() ? "overlap" : "demand");
  if (d.window != Window::kNone) entry(out, "window", window_name(d.window));
  if (d.rerun_whole_groups) entry(out, "rerun_whole_groups", true);
  out << YAML::EndMap;
}

// ---- reading ----

std::string join_key(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

/// User text for a one-line message: control characters (and quotes) escaped.
std::string escaped(std::string_view text) {
  const std::string quoted = sim::json_string(text);
  return quoted.substr(1, quoted.size() - 2);
}

/// What a node holds, for "expected X, got Y" messages.
std::string describe(const YAML::Node& n) {
  if (n.IsScalar()) return fmt::format("'{}'", escaped(n.Scalar()));
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

template <typename T>
constexpr const char* type_text() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else return "a string";
}

/// The text of the plan with everything but `value` (the embedded scenario) blanked, so the
/// scenario loader reads the block in place and its messages name the plan file's own lines
/// and columns. The block ends where the next top-level key starts.
std::string block_text(const std::string& text, const YAML::Node& root, const YAML::Node& value) {
  const YAML::Mark start = value.Mark();
  int end_line = INT_MAX;
  for (const auto& kv : root) {
    const int line = kv.first.Mark().line;
    if (line > start.line) end_line = std::min(end_line, line);
  }
  std::string out;
  int line = 0;
  for (size_t pos = 0; pos <= text.size(); ++line) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string_view row(text.data() + pos, eol - pos);
    if (line == start.line) {
      const auto column = std::min(static_cast<size_t>(start.column), row.size());
      out.append(column, ' ');
      out += row.substr(column);
    } else if (line > start.line && line < end_line) {
      out += row;
    }
    out += '\n';
    pos = eol + 1;
  }
  return out;
}

/// Reads one plan file's nodes; every failure is "FILE:LINE:COL: key 'K': what".
class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  /// "FILE:LINE:COL" of `node`; the file's start for a node without a position (an empty
  /// document, a key that is missing).
  std::string position(const YAML::Node& node) const {
    const YAML::Mark m = node.Mark();
    return m.is_null() ? file_ + ":1:1" : fmt::format("{}:{}:{}", file_, m.line + 1, m.column + 1);
  }

  [[noreturn]] void fail_at(ErrorCode code, const YAML::Node& node, const std::string& key,
                            const std::string& what) const {
    fail(code, "{}: key '{}': {}", position(node), key, what);
  }

  /// `node` as a T, or an error naming what it holds instead.
  template <typename T>
  T value(const YAML::Node& node, const std::string& key) const {
    if (node.IsScalar()) {
      try {
        return node.as<T>();
      } catch (const YAML::Exception&) {
      }
    }
    fail_at(ErrorCode::kWrongType, node, key, fmt::format("expected {}, got {}", type_text<T>(), describe(node)));
  }

  YAML::Node required(const YAML::Node& map, const char* key, const std::string& where) const {
    const YAML::Node n = map[key];
    if (!n) fail_at(ErrorCode::kMissingKey, map, join_key(where, key), "missing");
    return n;
  }

  template <typename T>
  void optional(const YAML::Node& map, const char* key, const std::string& where, T& out) const {
    if (const YAML::Node n = map[key]) out = value<T>(n, join_key(where, key));
  }

  void list(const YAML::Node& node, const std::string& key, const char* of) const {
    if (!node.IsSequence()) fail_at(ErrorCode::kWrongShape, node, key, fmt::format("expected a list of {}, got {}", of, describe(node)));
  }

  void check_keys(const YAML::Node& map, const std::vector<std::string>& known,
                  const std::string& where) const {
    if (!map.IsMap())
      fail_at(ErrorCode::kWrongShape, map, where, fmt::format("expected a mapping, got {}", describe(map)));
    std::vector<std::string> seen;
    for (const auto& kv : map) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : describe(kv.first);
      // yaml-cpp keeps both copies of a repeated key and lookups see the first: refuse it.
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail_at(ErrorCode::kDuplicateKey, kv.first, join_key(where, escaped(key)), "given twice");
      seen.push_back(key);
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      fail_at(ErrorCode::kUnknownKey, kv.first, join_key(where, escaped(key)),
              fmt::format("unknown key (known: {})", fmt::join(known, ", ")));
    }
  }

  /// Reads the keys `fields` visits from the mapping `node` (each optional, no other key).
  template <typename T, typename Fields>
  void read_fields(const YAML::Node& node, const std::string& where, T& out, Fields&& fields,
                   std::vector<std::string> extra_keys = {}) const {
    std::vector<std::string> known = keys_of<T>(fields);
    known.insert(known.end(), extra_keys.begin(), extra_keys.end());
    check_keys(node, known, where);
    fields(out, [&](const char* key, auto& member) { optional(node, key, where, member); });
  }

  template <typename T, typename Fields>
  void read_rows(const YAML::Node& map, const char* key, const char* of, std::vector<T>& out,
                 Fields&& fields) const {
    const YAML::Node rows = map[key];
    if (!rows) return;
    const std::string where = join_key("provenance", key);
    list(rows, where, of);
    for (size_t k = 0; k < rows.size(); ++k)
      read_fields(rows[k], fmt::format("{}[{}]", where, k), out.emplace_back(), fields);
  }

  PlanProvenance provenance(const YAML::Node& node) const {
    PlanProvenance p;
    read_fields(node, "provenance", p, [](auto& q, auto&& v) { provenance_fields(q, v); },
                {"stages", "windows"});
    read_rows(node, "stages", "stage search results", p.stages,
              [](auto& s, auto&& v) { stage_search_fields(s, v); });
    read_rows(node, "windows", "windows", p.windows, [](auto& w, auto&& v) { windows_fields(w, v); });
    return p;
  }

  model::ResolvedScenario scenario(const std::string& text, const YAML::Node& root) const {
    const YAML::Node node = required(root, "scenario", "");
    if (!node.IsMap())
      fail_at(ErrorCode::kWrongShape, node, "scenario",
              fmt::format("expected the resolved scenario the plan was made for (a mapping, as "
                          "`lynxsim show` prints it), got {}", describe(node)));
    // Read and resolved like a scenario file: errors carry the plan file's own positions.
    return model::load_scenario_text(block_text(text, root, node), file_);
  }

  LayerDecision layer(const YAML::Node& l, const std::string& at, int expected_layer) const {
    check_keys(l, {"layer", "drop", "mode", "window", "rerun_whole_groups"}, at);
    const YAML::Node index = required(l, "layer", at);
    const int layer_index = value<int>(index, at + ".layer");
    if (layer_index != expected_layer)
      fail_at(ErrorCode::kPlanUnbuildable, index, at + ".layer",
              fmt::format("is {}, expected {} (first_layer + position in the list)", layer_index,
                          expected_layer));
    const YAML::Node mode_node = required(l, "mode", at);
    const auto mode = value<std::string>(mode_node, at + ".mode");
    if (mode != "keep" && mode != "demand" && mode != "overlap")
      fail_at(ErrorCode::kUnknownChoice, mode_node, at + ".mode", fmt::format("{} is not one of: keep, demand, overlap", describe(mode_node)));
    const Action action = mode == "overlap" ? Action::kOverlap : Action::kRecompute;
    LayerDecision d;
    const YAML::Node drop = required(l, "drop", at);
    list(drop, at + ".drop", "op groups");
    for (const YAML::Node& g : drop) {
      const auto name = value<std::string>(g, at + ".drop");
      const auto& names = model::kOpGroupNames;
      const auto it = std::find_if(names.begin(), names.end(), [&](const char* n) { return name == n; });
      if (it == names.end())
        fail_at(ErrorCode::kUnknownChoice, g, at + ".drop", fmt::format("unknown group {} ({})", describe(g), droppable_group_names()));
      Action& slot = d.group[static_cast<size_t>(it - names.begin())];
      if (slot != Action::kKeep) fail_at(ErrorCode::kDuplicateKey, g, at + ".drop", fmt::format("group '{}' is listed twice", name));
      slot = action;
    }
    if ((mode == "keep") != (drop.size() == 0))
      fail_at(ErrorCode::kPlanUnbuildable, mode_node, at + ".mode",
              drop.size() == 0 ? fmt::format("'{}' needs groups to drop (drop: [] goes with mode keep)", mode)
                               : std::string("'keep' goes with an empty drop list"));
    if (const YAML::Node w = l["window"]) {
      const auto name = value<std::string>(w, at + ".window");
      const auto it = std::find_if(kWindows.begin(), kWindows.end(),
                                   [&](Window k) { return name == window_name(k); });
      if (it == kWindows.end())
        fail_at(ErrorCode::kUnknownChoice, w, at + ".window",
                fmt::format("{} is not one of: bwd-tp, pp-wait, fwd-tp, none", describe(w)));
      d.window = *it;
    }
    optional(l, "rerun_whole_groups", at, d.rerun_whole_groups);
    return d;
  }

  void stages(const YAML::Node& stages, RecomputePlan& plan) const {
    list(stages, "stages", "virtual stages");
    for (size_t k = 0; k < stages.size(); ++k) {
      const YAML::Node s = stages[k];
      const std::string at = fmt::format("stages[{}]", k);
      check_keys(s, {"virtual_stage", "first_layer", "layers"}, at);
      const YAML::Node vs = required(s, "virtual_stage", at);
      if (value<std::int64_t>(vs, at + ".virtual_stage") != static_cast<std::int64_t>(k))
        fail_at(ErrorCode::kPlanUnbuildable, vs, at + ".virtual_stage",
                fmt::format("is {}, expected {} (stages are listed in order)", vs.Scalar(), k));
      StagePlan sp;
      sp.first_layer = value<int>(required(s, "first_layer", at), at + ".first_layer");
      const YAML::Node layers = required(s, "layers", at);
      list(layers, at + ".layers", "layers");
      for (size_t i = 0; i < layers.size(); ++i)
        sp.layers.push_back(layer(layers[i], fmt::format("{}.layers[{}]", at, i),
                                  sp.first_layer + static_cast<int>(i)));
      plan.stages.push_back(std::move(sp));
    }
  }

  /// The node a PlanProblem is about (its field when the file has it).
  YAML::Node node_of(const YAML::Node& stages, const PlanProblem& p) const {
    if (p.virtual_stage < 0) return stages;
    const YAML::Node stage = stages[static_cast<size_t>(p.virtual_stage)];
    return p.index < 0 ? field_or(stage, p.field)
                       : field_or(stage["layers"][static_cast<size_t>(p.index)], p.field);
  }

  static YAML::Node field_or(const YAML::Node& owner, const std::string& field) {
    const YAML::Node n = owner[field];
    return n ? n : owner;
  }

 private:
  const std::string& file_;
};

}  // namespace

const char* window_name(Window w) {
  switch (w) {
    case Window::kNone: return "none";
    case Window::kBwdTpComm: return "bwd-tp";
    case Window::kPpRecvWait: return "pp-wait";
    case Window::kFwdTpComm: return "fwd-tp";
  }
  return "none";
}

std::string plan_to_yaml(const PlanFile& file) {
  YAML::Emitter out;
  out.SetDoublePrecision(6);
  out << YAML::Comment(kHeader) << YAML::Newline;
  out << YAML::BeginMap;
  entry(out, "lynxsim_plan", kPlanFormatVersion);
  entry(out, "strategy", file.plan.strategy);
  emit_provenance(out, file.provenance);
  entry(out, "scenario", YAML::Load(scenario_to_yaml(file.scenario)));
  entry(out, "stages", YAML::BeginSeq);
  for (size_t vs = 0; vs < file.plan.stages.size(); ++vs) {
    const StagePlan& sp = file.plan.stages[vs];
    out << YAML::BeginMap;
    entry(out, "virtual_stage", vs);
    entry(out, "first_layer", sp.first_layer);
    entry(out, "layers", YAML::BeginSeq);
    for (size_t l = 0; l < sp.layers.size(); ++l)
      emit_layer(out, sp.layers[l], sp.first_layer + static_cast<int>(l));
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  LYNX_CHECK(out.good(), "plan emitter: {}", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

PlanFile read_plan_text(const std::string& text, const std::string& file) {
  const YAML::Node root = load_single_document(text, file);
  const Reader r(file);
  if (!root.IsMap())
    fail(ErrorCode::kNotAPlan, "{}: not a plan file: expected a mapping with lynxsim_plan, strategy, scenario and stages, "
         "got {}", r.position(root), describe(root));
  r.check_keys(root, {"lynxsim_plan", "strategy", "provenance", "scenario", "stages"}, "");
  const YAML::Node version = r.required(root, "lynxsim_plan", "");
  const int v = r.value<int>(version, "lynxsim_plan");
  if (v == 1)
    r.fail_at(ErrorCode::kPlanVersion, version, "lynxsim_plan",
              "format 1 (plans without their scenario) is no longer read; make the plan again with "
              "`lynxsim plan`");
  if (v != kPlanFormatVersion)
    r.fail_at(ErrorCode::kPlanVersion, version, "lynxsim_plan",
              fmt::format("unsupported version {} (this lynxsim reads {})", v, kPlanFormatVersion));
  PlanFile out;
  out.plan.strategy = r.value<std::string>(r.required(root, "strategy", ""), "strategy");
  if (const YAML::Node p = root["provenance"]) out.provenance = r.provenance(p);
  const model::ResolvedScenario scenario = r.scenario(text, root);
  out.scenario = scenario.scenario();
  out.scenario_origins = scenario.origins();
  const YAML::Node stages = r.required(root, "stages", "");
  r.stages(stages, out.plan);
  const auto problem =
      find_plan_problem(out.plan, out.scenario, model::gpt_workload(out.scenario.model, out.scenario.parallel));
  if (problem) r.fail_at(ErrorCode::kPlanUnbuildable, r.node_of(stages, *problem), plan_key(*problem), problem->what);
  return out;
}

PlanFile read_plan_file(const std::string& path) {
  return read_plan_text(read_text_file(path, "plan file"), path);
}

}  // namespace lynx::strategies
