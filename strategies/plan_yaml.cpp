#include "strategies/plan_yaml.hpp"

#include "common/error.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <fstream>
#include <sstream>

namespace lynx::strategy {
namespace {

constexpr int kFormatVersion = 1;

/// Plan-file names of the droppable groups, indexed by model::OpGroup.
constexpr std::array<const char*, kNumOpGroups> kGroupNames = {"post", "proj", "core", "mlp",
                                                               "input"};

const char* window_name(Window w) {
  switch (w) {
    case Window::kNone: return "none";
    case Window::kBwdTpComm: return "bwd-tp";
    case Window::kPpRecvWait: return "pp-wait";
    case Window::kFwdTpComm: return "fwd-tp";
  }
  return "none";
}

[[noreturn]] void fail_at(const std::string& file, const YAML::Node& node, const std::string& key,
                          const std::string& what) {
  const YAML::Mark m = node.Mark();
  fail("{}:{}:{}: key '{}': {}", file, m.line + 1, m.column + 1, key, what);
}

template <typename T>
T scalar(const std::string& file, const YAML::Node& map, const std::string& key) {
  const YAML::Node n = map[key];
  if (!n) fail_at(file, map, key, "missing");
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    fail_at(file, n, key, "has the wrong type");
  }
}

void check_keys(const std::string& file, const YAML::Node& map, std::initializer_list<const char*> known,
                const std::string& where) {
  if (!map.IsMap()) fail_at(file, map, where, "expected a mapping");
  for (const auto& kv : map) {
    const auto key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) fail_at(file, kv.first, where.empty() ? key : where + "." + key, "unknown key");
  }
}

}  // namespace

std::string plan_to_yaml(const RecomputePlan& plan, const std::string& scenario_name,
                         const PlannerOutput* planner) {
  std::ostringstream y;
  y << "# lynxsim recomputation plan: per virtual pipeline stage, its layers and what each\n"
       "# layer does with its saved activations. drop: op groups not kept in forward (post =\n"
       "# LN2 input + residual masks, proj = QKV/out-proj inputs + Q,K,V, core = softmax/dropout\n"
       "# tensors, mlp = FC1/GeLU/FC2 inputs); mode: keep | demand (recompute before the\n"
       "# backward) | overlap (recompute on the recompute stream in `window`).\n";
  y << "lynxsim_plan: " << kFormatVersion << "\n";
  y << "strategy: " << plan.strategy << "\n";
  y << "scenario: " << (scenario_name.empty() ? "unnamed" : scenario_name) << "\n";
  if (planner) {
    y << fmt::format("search:\n  seconds: {:.6f}\n  baseline_seconds: {:.6f}\n  confirm_rounds: {}\n",
                     planner->search_seconds, planner->baseline_seconds, planner->confirm_rounds);
    if (!planner->fallback.empty())
      y << "  fallback: " << planner->fallback << "  # the engine found this narrower plan faster\n";
    y << "  stages:\n";
    for (size_t k = 0; k < planner->solutions.size(); ++k) {
      const auto& s = planner->solutions[k];
      y << fmt::format(
          "    - {{stage: {}, status: {}, feasible: {}, exposed_us_per_micro_batch: {:.3f}, "
          "activation_bytes: {}, budget_bytes: {}, gap: {:.6f}}}\n",
          k, s.status.empty() ? "unknown" : s.status, s.feasible ? "true" : "false",
          ps_to_us(s.exposed_ps), s.activation_bytes, planner->problems[k].budget_bytes, s.gap);
    }
    y << "windows:\n";
    for (size_t vs = 0; vs < planner->windows.size(); ++vs)
      y << fmt::format("  - {{virtual_stage: {}, inner_us: {:.3f}, top_us: {:.3f}}}\n", vs,
                       ps_to_us(planner->windows[vs].inner_ps), ps_to_us(planner->windows[vs].top_ps));
  }
  y << "stages:\n";
  for (size_t vs = 0; vs < plan.stages.size(); ++vs) {
    const StagePlan& sp = plan.stages[vs];
    y << fmt::format("  - virtual_stage: {}\n    first_layer: {}\n    layers:\n", vs, sp.first_layer);
    for (size_t l = 0; l < sp.layers.size(); ++l) {
      const LayerDecision& d = sp.layers[l];
      std::string drop;
      for (size_t g = 0; g < kNumOpGroups; ++g)
        if (d.group[g] != Action::kKeep) drop += fmt::format("{}{}", drop.empty() ? "" : ", ", kGroupNames[g]);
      const char* mode = d.keeps_everything() ? "keep" : d.overlapped() ? "overlap" : "demand";
      y << fmt::format("      - {{layer: {}, drop: [{}], mode: {}", sp.first_layer + static_cast<int>(l), drop, mode);
      if (d.overlapped()) y << ", window: " << window_name(d.window);
      if (d.rerun_whole_groups) y << ", rerun_whole_groups: true";
      y << "}\n";
    }
  }
  return y.str();
}

RecomputePlan load_plan_text(const std::string& text, const std::string& file, int virtual_stages,
                             int layers) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    fail("{}:{}:{}: malformed YAML: {}", file, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  check_keys(file, root, {"lynxsim_plan", "strategy", "scenario", "search", "windows", "stages"}, "");
  if (scalar<int>(file, root, "lynxsim_plan") != kFormatVersion)
    fail_at(file, root["lynxsim_plan"], "lynxsim_plan", fmt::format("unsupported version (this lynxsim reads {})", kFormatVersion));
  RecomputePlan plan;
  plan.strategy = scalar<std::string>(file, root, "strategy");
  const YAML::Node stages = root["stages"];
  if (!stages || !stages.IsSequence()) fail_at(file, root, "stages", "expected a list of stages");
  if (static_cast<int>(stages.size()) != virtual_stages)
    fail_at(file, stages, "stages", fmt::format("has {} stages, the scenario's layout has {} (pp × virtual_stages)", stages.size(), virtual_stages));
  int next_layer = 0;
  for (const YAML::Node& s : stages) {
    check_keys(file, s, {"virtual_stage", "first_layer", "layers"}, "stages[]");
    StagePlan sp;
    sp.first_layer = scalar<int>(file, s, "first_layer");
    if (sp.first_layer != next_layer)
      fail_at(file, s["first_layer"], "stages[].first_layer", fmt::format("is {}, expected {} (stages are contiguous)", sp.first_layer, next_layer));
    const YAML::Node ls = s["layers"];
    if (!ls || !ls.IsSequence() || ls.size() == 0) fail_at(file, s, "stages[].layers", "expected a non-empty list");
    for (const YAML::Node& l : ls) {
      check_keys(file, l, {"layer", "drop", "mode", "window", "rerun_whole_groups"}, "stages[].layers[]");
      LayerDecision d;
      const auto mode = scalar<std::string>(file, l, "mode");
      if (mode != "keep" && mode != "demand" && mode != "overlap")
        fail_at(file, l["mode"], "stages[].layers[].mode", fmt::format("'{}' is not one of: keep, demand, overlap", mode));
      const Action action = mode == "overlap" ? Action::kOverlap : Action::kRecompute;
      const YAML::Node drop = l["drop"];
      if (!drop || !drop.IsSequence()) fail_at(file, l, "stages[].layers[].drop", "expected a list of groups");
      for (const YAML::Node& g : drop) {
        const auto name = g.as<std::string>();
        size_t index = kNumOpGroups;
        for (size_t i = 0; i < kNumOpGroups; ++i)
          if (name == kGroupNames[i]) index = i;
        if (index == kNumOpGroups)
          fail_at(file, g, "stages[].layers[].drop", fmt::format("unknown group '{}' (post, proj, core, mlp, input)", name));
        d.group[index] = action;
      }
      if ((mode == "keep") != (drop.size() == 0))
        fail_at(file, l["mode"], "stages[].layers[].mode", "'keep' goes with an empty drop list and only with it");
      if (l["window"]) {
        const auto w = l["window"].as<std::string>();
        if (w == "bwd-tp") d.window = Window::kBwdTpComm;
        else if (w == "pp-wait") d.window = Window::kPpRecvWait;
        else if (w == "fwd-tp") d.window = Window::kFwdTpComm;
        else if (w != "none") fail_at(file, l["window"], "stages[].layers[].window", fmt::format("'{}' is not one of: bwd-tp, pp-wait, fwd-tp, none", w));
      }
      if (mode == "overlap" && d.window == Window::kNone)
        fail_at(file, l, "stages[].layers[].window", "mode overlap needs a window (bwd-tp, pp-wait or fwd-tp)");
      if (l["rerun_whole_groups"]) d.rerun_whole_groups = l["rerun_whole_groups"].as<bool>();
      sp.layers.push_back(d);
    }
    next_layer += static_cast<int>(sp.layers.size());
    plan.stages.push_back(sp);
  }
  if (next_layer != layers)
    fail_at(file, stages, "stages", fmt::format("hold {} layers, the model has {}", next_layer, layers));
  return plan;
}

RecomputePlan load_plan_file(const std::string& path, int virtual_stages, int layers) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open the plan file", path);
  std::stringstream text;
  text << in.rdbuf();
  return load_plan_text(text.str(), path, virtual_stages, layers);
}

}  // namespace lynx::strategy
