// The `lynxsim` Python module: a thin layer over the C++ library (docs/python.md). Scenarios
// come from the one loader, results are dicts made from runner/result_fields (the table that
// feeds JSON and CSV), plans are the plan file as a dict, and lynx::Error is lynxsim.Error.
//
// sweep(grid) and best(scenario, gpus, top) call the C++ entry points with the GIL released
// and return each point's (or ranked plan's) SimResult as result_dict(), so rows() flattens
// them unchanged; the per-point keys (the point's axes, a plan's rank) are in the same dict.
#include "common/error.hpp"
#include "common/files.hpp"
#include "megatron/megatron_export.hpp"
#include "megatron/megatron_launch.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/plan_file.hpp"
#include "runner/report.hpp"
#include "runner/result_fields.hpp"
#include "runner/simulate.hpp"
#include "scenarios/fields.hpp"
#include "scenarios/scenario_loader.hpp"
#include "search/best_search.hpp"
#include "strategies/plan_yaml.hpp"
#include "sweep/grid.hpp"
#include "sweep/ordered_pool.hpp"
#include "sweep/sweep.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <thread>
#include <set>
#include <string>
#include <vector>

namespace py = pybind11;

namespace lynx::python {
namespace {

py::object value_of(const runner::FieldValue& v) {
  using Kind = runner::FieldValue::Kind;
  switch (v.kind) {
    case Kind::kNull:
      return py::none();
    case Kind::kBool:
      return py::bool_(v.flag);
    case Kind::kInt:
      return py::int_(v.integer);
    case Kind::kReal:
      return py::float_(v.real);
    case Kind::kText:
      return py::str(v.text);
    case Kind::kIntList:
      return py::cast(v.list);
  }
  return py::none();
}

/// One result as a dict: every run field, and `stages`, a list of dicts of the stage fields.
py::dict result_dict(const runner::SimResult& result) {
  py::dict out;
  const runner::StageBreakdown no_stage{};
  for (const runner::ResultField* f : runner::fields_of(runner::FieldLevel::kRun))
    out[f->name] = value_of(f->value(result, no_stage));
  py::list stages;
  for (const runner::StageBreakdown& stage : result.stages) {
    py::dict row;
    for (const runner::ResultField* f : runner::fields_of(runner::FieldLevel::kStage))
      row[f->name] = value_of(f->value(result, stage));
    stages.append(row);
  }
  out["stages"] = stages;
  return out;
}

/// A YAML document as plain Python values (plain scalars typed, quoted ones kept as text).
py::object from_yaml(const YAML::Node& node) {
  if (node.IsMap()) {
    py::dict d;
    for (const auto& kv : node) d[py::str(kv.first.as<std::string>())] = from_yaml(kv.second);
    return d;
  }
  if (node.IsSequence()) {
    py::list l;
    for (const auto& item : node) l.append(from_yaml(item));
    return l;
  }
  if (!node.IsScalar()) return py::none();
  const std::string text = node.Scalar();
  if (node.Tag() == "!") return py::str(text);
  if (text == "true") return py::bool_(true);
  if (text == "false") return py::bool_(false);
  try {
    std::size_t used = 0;
    const long long i = std::stoll(text, &used);
    if (used == text.size()) return py::int_(i);
    const double x = std::stod(text, &used);
    if (used == text.size()) return py::float_(x);
  } catch (const std::exception&) {
  }
  return py::str(text);
}

/// A path given as str or os.PathLike (pathlib.Path), or none.
std::optional<std::string> path_of(const py::object& path) {
  if (path.is_none()) return std::nullopt;
  return py::module_::import("os").attr("fspath")(path).cast<std::string>();
}

/// A Python value as the text of a --set override.
std::string override_text(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  return py::str(value).cast<std::string>();
}

/// {"parallel.tp": 4} or ["parallel.tp=4"] as --set overrides.
std::vector<std::string> overrides_of(const py::object& overrides) {
  std::vector<std::string> out;
  if (overrides.is_none()) return out;
  if (py::isinstance<py::dict>(overrides)) {
    for (const auto& kv : overrides.cast<py::dict>())
      out.push_back(kv.first.cast<std::string>() + "=" + override_text(kv.second));
    return out;
  }
  for (const auto& item : overrides) out.push_back(item.cast<std::string>());
  return out;
}

model::ResolvedScenario load_scenario(const py::object& path_arg,
                                      const std::optional<std::string>& yaml,
                                      const py::object& overrides, const std::string& label) {
  const std::vector<std::string> sets = overrides_of(overrides);
  const std::optional<std::string> path = path_of(path_arg);
  if (path && yaml) fail(ErrorCode::kConflictingOptions, "load_scenario: give path or yaml, not both");
  if (path) return model::load_scenario_file(*path, sets);
  if (yaml) return model::load_scenario_text(*yaml, label, sets);
  return model::default_scenario(sets);
}

model::ResolvedScenario load_megatron(const std::optional<std::string>& args,
                                      const py::object& file_arg,
                                      const std::string& profile, const std::string& profile_file,
                                      int gpus, const py::object& env, const py::object& overrides) {
  const std::optional<std::string> file = path_of(file_arg);
  if (args.has_value() == file.has_value())
    fail(ErrorCode::kConflictingOptions, "load_megatron: give args (a launch line) or file (a launch script), one of them");
  megatron::MegatronRequest request;
  request.text = args ? *args : read_text_file(*file, "Megatron-LM launch script");
  request.label = args ? "--megatron-args" : *file;
  if (!env.is_none())
    for (const auto& kv : env.cast<py::dict>())
      request.env[kv.first.cast<std::string>()] = override_text(kv.second);
  request.profile = profile;
  request.profile_file = profile_file;
  request.gpus = gpus;
  request.overrides = overrides_of(overrides);
  megatron::MegatronScenario loaded = megatron::load_megatron_scenario(request);
  for (const std::string& warning : loaded.warnings)
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) != 0) throw py::error_already_set();
  return loaded.scenario;
}

runner::SimRun simulate_released(const model::ResolvedScenario& scenario) {
  py::gil_scoped_release release;  // engines share nothing: other Python threads may run
  return runner::simulate(scenario);
}

py::list presets() {
  py::list out;
  for (const std::string& name : model::preset_names()) {
    ModelSpec spec;
    spec.preset = name;
    const ModelSpec m = model::resolve_model(spec);
    py::dict d;
    d["name"] = name;
    d["layers"] = m.layers;
    d["hidden"] = m.hidden;
    d["heads"] = m.heads;
    d["kv_heads"] = m.kv_heads;
    d["ffn_hidden"] = m.ffn_hidden;
    d["mlp"] = architecture_name(m.mlp);
    d["norm"] = architecture_name(m.norm);
    d["position_embedding"] = architecture_name(m.position_embedding);
    d["embeddings"] = architecture_name(m.embeddings);
    d["linear_bias"] = architecture_name(m.linear_bias);
    d["seq_len"] = m.seq_len;
    d["vocab"] = m.vocab;
    d["parameters"] = model::parameter_count(m);
    out.append(d);
  }
  return out;
}

py::list result_fields() {
  py::list out;
  for (const runner::ResultField& f : runner::result_fields()) {
    py::dict d;
    d["name"] = f.name;
    d["unit"] = f.unit;
    d["level"] = f.level == runner::FieldLevel::kRun ? "run" : "stage";
    d["description"] = f.description;
    d["in_csv"] = f.in_csv;
    out.append(d);
  }
  return out;
}

py::list scenario_fields() {
  py::list out;
  for (const FieldDesc& f : scenario_field_table()) {
    if (!f.in_scenario()) continue;
    py::dict d;
    d["key"] = f.scenario_key();
    d["type"] = field_type_text(f);
    d["default"] = f.default_text;
    d["meaning"] = f.meaning;
    out.append(d);
  }
  return out;
}

/// One flat dict per pipeline stage, the run's fields repeated: the CSV rows of `results` (a
/// result dict or a list of them), without the multi-line fields CSV writes as comments.
py::list rows(const py::object& results) {
  std::set<std::string> columns;
  for (const runner::ResultField& f : runner::result_fields())
    if (f.in_csv) columns.insert(f.name);
  std::vector<py::dict> items;
  if (py::isinstance<py::dict>(results)) {
    items.push_back(results.cast<py::dict>());
  } else {
    for (const auto& item : results) items.push_back(item.cast<py::dict>());
  }
  py::list out;
  for (const py::dict& result : items) {
    if (!result.contains("stages")) fail(ErrorCode::kInvalidOption, "rows: a result dict (from simulate) has a 'stages' list");
    py::dict run;
    for (const auto& kv : result) {
      const std::string key = kv.first.cast<std::string>();
      if (key != "stages" && columns.count(key) != 0) run[kv.first] = kv.second;
    }
    for (const auto& stage : result["stages"]) {
      py::dict row = run.attr("copy")();
      for (const auto& kv : stage.cast<py::dict>())
        if (columns.count(kv.first.cast<std::string>()) != 0) row[kv.first] = kv.second;
      out.append(row);
    }
  }
  return out;
}

/// Plain Python values (dict, list, bool, int, float, str) as a YAML node.
YAML::Node to_yaml(const py::handle& value) {
  YAML::Node node;
  if (py::isinstance<py::dict>(value)) {
    for (const auto& kv : value.cast<py::dict>()) node[py::str(kv.first).cast<std::string>()] = to_yaml(kv.second);
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (const auto& item : value) node.push_back(to_yaml(item));
  } else {
    node = override_text(value);
  }
  return node;
}

/// A grid file (str / os.PathLike) or a grid as a dict (written as block YAML; a relative base
/// path is relative to the working directory).
sweep::Grid grid_of(const py::object& grid) {
  if (py::isinstance<py::dict>(grid)) {
    YAML::Emitter emitter;
    emitter << to_yaml(grid);
    return sweep::read_grid_text(std::string(emitter.c_str()) + "\n", "<dict>");
  }
  return sweep::read_grid_file(*path_of(grid));
}

/// Every valid point of a grid simulated on `threads` threads (0: all cores), in point order:
/// result_dict() plus `point` and each axis key with the point's value. Skipped and filtered
/// points have no dict (as they have no row).
py::list sweep_points(const py::object& grid_arg, int threads) {
  const sweep::Grid grid = grid_of(grid_arg);
  if (threads < 0) fail(ErrorCode::kInvalidOption, "sweep: threads {}: expected >= 0 (0: all cores)", threads);
  std::vector<std::pair<std::uint64_t, sweep::PointRun>> runs;
  {
    py::gil_scoped_release release;
    std::vector<std::uint64_t> items(grid.point_count());
    for (std::uint64_t i = 0; i < items.size(); ++i) items[i] = i;
    const int n = threads > 0 ? threads : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    sweep::OrderedPool<sweep::PointRun> pool(items, n, [&](std::uint64_t i) { return sweep::run_point(grid, i, true); });
    while (pool.has_next()) {
      auto next = pool.next();
      if (next.second.kind == sweep::PointOutcome::Kind::kRow) runs.push_back(std::move(next));
    }
  }
  py::list out;
  for (const auto& [index, run] : runs) {
    py::dict d = result_dict(*run.result);
    d["point"] = index;
    const std::vector<std::string> values = grid.values(index);
    for (std::size_t a = 0; a < grid.axes.size(); ++a) d[py::str(grid.axes[a].key)] = values[a];
    out.append(d);
  }
  return out;
}

/// `lynxsim best`: the top plans, fastest first, each result_dict() of its exact-mode run plus
/// `rank`, `plan`, `strategy_searched`, `virtual_stages`, `sequence_parallel`,
/// `distributed_optimizer` (sharding optimizer), `sharding`, `flash_attention`, `headroom_gib`
/// and `fast_iteration_time_s`.
py::list best_plans(const py::object& scenario, int gpus, int top, int threads) {
  search::BestRequest request;
  if (py::isinstance<model::ResolvedScenario>(scenario))
    request.scenario_text = scenario_to_yaml(scenario.cast<const model::ResolvedScenario&>().scenario());
  else
    request.scenario_path = *path_of(scenario);
  request.space.gpus = gpus;
  request.top = top;
  if (threads < 0) fail(ErrorCode::kInvalidOption, "best: threads {}: expected >= 0 (0: all cores)", threads);
  request.threads = threads;
  search::BestOutcome outcome;
  {
    py::gil_scoped_release release;
    outcome = search::run_best(request);
  }
  py::list out;
  for (std::size_t r = 0; r < outcome.top.size(); ++r) {
    const search::RankedPlan& p = outcome.top[r];
    py::dict d = result_dict(p.exact.result);
    d["rank"] = r + 1;
    d["plan"] = p.candidate.layout_text();
    d["strategy_searched"] = p.candidate.strategy;
    d["virtual_stages"] = p.candidate.virtual_stages;
    d["sequence_parallel"] = p.candidate.sequence_parallel;
    d["distributed_optimizer"] = p.candidate.sharding == Sharding::kOptimizer;
    d["sharding"] = kShardingNames[static_cast<std::size_t>(p.candidate.sharding)];
    d["flash_attention"] = p.candidate.flash_attention;
    d["headroom_gib"] = p.headroom_gib;
    d["fast_iteration_time_s"] = p.fast_time_s;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace lynx::python

PYBIND11_MODULE(lynxsim, m) {
  using namespace lynx;
  using namespace lynx::python;
  m.doc() = "lynxsim: discrete-event simulation of Megatron-style GPT training with Lynx "
            "(recomputation overlapped with communication). See docs/python.md.";
  m.attr("__version__") = runner::lynxsim_version();
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      // lynxsim.Error(message) with .code ("E104") and .code_name ("unknown-key").
      py::object exception = py::reinterpret_borrow<py::object>(error.ptr())(e.what());
      exception.attr("code") = error_code_id(e.code());
      exception.attr("code_name") = error_code_info(e.code()).name;
      PyErr_SetObject(error.ptr(), exception.ptr());
    }
  });

  py::class_<model::ResolvedScenario>(m, "Scenario",
                                      "A resolved, checked scenario (read-only; load_scenario makes one).")
      .def_property_readonly("name", [](const model::ResolvedScenario& s) { return s->name; })
      .def_property_readonly("yaml", [](const model::ResolvedScenario& s) { return scenario_to_yaml(s.scenario()); },
                             "the resolved scenario as YAML (what `lynxsim show` prints)")
      .def("to_dict", [](const model::ResolvedScenario& s) { return from_yaml(YAML::Load(scenario_to_yaml(s.scenario()))); },
           "the resolved scenario as nested dicts")
      .def("megatron_args", [](const model::ResolvedScenario& s) { return megatron::scenario_to_megatron_args(s.scenario()); },
           "the Megatron-LM launch arguments (what `lynxsim show --as-megatron-args` prints)")
      .def("__repr__", [](const model::ResolvedScenario& s) {
        return "<lynxsim.Scenario '" + s->name + "' from " + s->source_file + ">";
      });

  m.def("load_scenario", &load_scenario, py::arg("path") = py::none(), py::arg("yaml") = py::none(),
        py::arg("overrides") = py::none(), py::arg("label") = "<yaml>",
        "A scenario from a file (path), YAML text (yaml) or the built-in default (neither), with "
        "overrides: a dict {key: value} or a list of 'key=value' strings, applied like --set.");
  m.def("load_megatron", &load_megatron, py::arg("args") = py::none(), py::arg("file") = py::none(),
        py::arg("profile") = "", py::arg("profile_file") = "", py::arg("gpus") = 0,
        py::arg("env") = py::none(), py::arg("overrides") = py::none(),
        "A scenario from Megatron-LM launch arguments (a line, or a script file) on a hardware "
        "profile and a GPU count, like `lynxsim run --megatron-args`; warnings as UserWarning.");
  m.def("simulate", [](const model::ResolvedScenario& s) { return result_dict(simulate_released(s).result); },
        py::arg("scenario"),
        "Simulates one iteration: a dict of the result fields (fields()), with 'stages'.");
  m.def("plan", [](const model::ResolvedScenario& s) {
          const runner::SimRun run = simulate_released(s);
          return from_yaml(YAML::Load(strategies::plan_to_yaml(runner::plan_file_of(run))));
        },
        py::arg("scenario"), "Plans recomputation: the plan file `lynxsim plan` writes, as a dict.");
  m.def("sweep", &sweep_points, py::arg("grid"), py::arg("threads") = 0,
        "Simulates every point of a sweep grid (a file path, or the grid as a dict): a list of "
        "result dicts in point order, each with 'point' and the point's axis values; skipped and "
        "filtered points are left out (docs/sweep.md).");
  m.def("best", &best_plans, py::arg("scenario"), py::arg("gpus"), py::arg("top") = 5, py::arg("threads") = 0,
        "`lynxsim best`: the fastest plans that fit for a scenario (a path or a Scenario) on "
        "`gpus` GPUs, confirmed in exact mode: a list of result dicts, fastest first, with "
        "'rank', 'plan', 'headroom_gib' and the searched knobs (docs/best.md).");
  m.def("presets", &presets, "The model presets (GPT, Llama): name, shape, architecture, parameter count.");
  m.def("fields", &result_fields, "The result fields: name, unit, level (run/stage), description.");
  m.def("scenario_fields", &scenario_fields, "The scenario keys: key, type, default, meaning.");
  m.def("rows", &rows, py::arg("results"),
        "One flat dict per pipeline stage with the run's fields repeated (the CSV rows), for a "
        "result dict or a list of them: pandas.DataFrame(lynxsim.rows(results)).");
}
