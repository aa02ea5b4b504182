#include "runner/result_fields.hpp"

#include "common/bytes.hpp"
#include "model/gpt.hpp"
#include "runner/report.hpp"
#include "scenarios/scenario_loader.hpp"
#include "sim/json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace lynx::runner {

FieldValue FieldValue::of_bool(bool b) { return {Kind::kBool, b, 0, 0, {}, {}}; }
FieldValue FieldValue::of_int(std::int64_t i) { return {Kind::kInt, false, i, 0, {}, {}}; }
FieldValue FieldValue::of_real(double x) { return {Kind::kReal, false, 0, x, {}, {}}; }
FieldValue FieldValue::of_text(std::string s) { return {Kind::kText, false, 0, 0, std::move(s), {}}; }
FieldValue FieldValue::of_list(const std::vector<int>& values) {
  return {Kind::kIntList, false, 0, 0, {}, {values.begin(), values.end()}};
}

namespace {

constexpr auto flag = FieldValue::of_bool;
constexpr auto integer = FieldValue::of_int;
constexpr auto real = FieldValue::of_real;
constexpr auto text = FieldValue::of_text;
constexpr auto int_list = FieldValue::of_list;
constexpr auto null_value = FieldValue::null;


std::int64_t max_stage_peak(const SimResult& r) {
  std::int64_t peak = 0;
  for (const auto& s : r.stages) peak = std::max(peak, s.peak_memory_bytes);
  return peak;
}

using R = const SimResult&;
using S = const StageBreakdown&;
constexpr FieldLevel kRun = FieldLevel::kRun;
constexpr FieldLevel kStage = FieldLevel::kStage;
constexpr double kPerGiB = 1.0 / static_cast<double>(kGiB);

// Summary-line and column styles: {label, scale, precision, suffix, hide_zero, explain}.
const TableStyle kNoTable{};
TableStyle line(const char* label, int precision, const char* suffix, double scale = 1,
                bool hide_zero = false) {
  return {label, scale, precision, suffix, hide_zero, false};
}
TableStyle column(const char* label, int precision, double scale = 1, bool explain = false) {
  return {label, scale, precision, "", false, explain};
}

std::vector<ResultField> make_fields() {
  return {
      // Run level: what ran (configuration), then how it did, then what it cost to find.
      {"lynxsim_version", "", kRun, "program version that wrote the result", true, kNoTable,
       [](R, S) { return text(lynxsim_version()); }},
      {"scenario", "", kRun, "scenario name (file stem, or `default`)", true, kNoTable,
       [](R r, S) { return text(r.scenario.name); }},
      {"model", "", kRun, "model preset, else the model.hf_config file name, else `custom`", true, kNoTable,
       [](R r, S) { return text(model_name(r.scenario.model)); }},
      {"parameters", "", kRun, "model parameters", true, kNoTable,
       [](R r, S) { return integer(std::llround(model::parameter_count(r.scenario.model))); }},
      {"profile", "", kRun, "hardware profile", true, kNoTable,
       [](R r, S) { return text(r.scenario.hardware.profile); }},
      {"gpu", "", kRun, "GPU name of the profile", true, kNoTable,
       [](R r, S) { return text(r.scenario.hardware.gpu_name); }},
      {"nodes", "", kRun, "nodes in the cluster", true, kNoTable,
       [](R r, S) { return integer(r.scenario.hardware.nodes); }},
      {"gpus", "", kRun, "GPUs used (tp × cp × pp × dp)", true, kNoTable,
       [](R r, S) { return integer(r.gpus); }},
      {"tp", "", kRun, "tensor-parallel degree", true, kNoTable,
       [](R r, S) { return integer(r.scenario.parallel.tp); }},
      {"pp", "", kRun, "pipeline-parallel degree", true, kNoTable,
       [](R r, S) { return integer(r.scenario.parallel.pp); }},
      {"dp", "", kRun, "data-parallel degree", true, kNoTable,
       [](R r, S) { return integer(r.scenario.parallel.dp); }},
      {"seq_len", "tokens", kRun, "sequence length", true, kNoTable,
       [](R r, S) { return integer(r.scenario.model.seq_len); }},
      {"micro_batch", "samples", kRun, "micro-batch size", true, kNoTable,
       [](R r, S) { return integer(r.scenario.parallel.micro_batch); }},
      {"global_batch", "samples", kRun, "global batch of one iteration", true, kNoTable,
       [](R r, S) { return integer(r.scenario.parallel.global_batch); }},
      {"micro_batches", "", kRun, "micro-batches per pipeline (global batch / micro batch / dp)",
       true, kNoTable, [](R r, S) { return integer(r.micro_batches); }},
      {"strategy_requested", "", kRun,
       "recomputation strategy asked for (`recompute.strategy`, or the `--plan` file's)", true,
       kNoTable, [](R r, S) { return text(r.strategy_requested); }},
      {"strategy", "", kRun,
       "recomputation plan that ran: the one requested, or a narrower plan the engine found "
       "faster (`no-overlap`, `no-forward-windows`, `selective`, `full`)",
       true, kNoTable, [](R r, S) { return text(r.strategy); }},
      {"iteration_time_s", "s", kRun, "one training iteration (global batch), simulated", true,
       line("iteration time", 4, "s"), [](R r, S) { return real(r.iteration_time_s); }},
      {"tokens_per_s", "tokens/s", kRun, "training throughput in tokens", true,
       line("throughput", 1, "tokens/s"), [](R r, S) { return real(r.tokens_per_s); }},
      {"samples_per_s", "samples/s", kRun, "training throughput in samples", true,
       line("sample rate", 2, "samples/s"), [](R r, S) { return real(r.samples_per_s); }},
      {"tflops_per_gpu", "TFLOP/s", kRun,
       "model FLOPs (every op forward + backward, no recomputation; Korthikanti Eq. 7 for "
       "f = 4h) per second per GPU",
       true,
       line("model TFLOP/s", 1, "per GPU"), [](R r, S) { return real(r.tflops_per_gpu); }},
      {"mfu", "", kRun, "model FLOPs utilisation: tflops_per_gpu as a fraction of the GPU's peak",
       true, line("MFU", 1, "%", 100), [](R r, S) { return real(r.mfu); }},
      {"hfu", "", kRun,
       "FLOPs of the kernels actually simulated (recompute included) per second, as a fraction "
       "of peak",
       true, line("HFU", 1, "%", 100), [](R r, S) { return real(r.hfu); }},
      {"model_flops", "FLOP", kRun,
       "model FLOPs of one iteration (every op forward + backward, no recompute; Eq. 7 for "
       "f = 4h)",
       true, kNoTable,
       [](R r, S) { return real(r.model_flops); }},
      {"executed_flops", "FLOP", kRun, "FLOPs of the kernels simulated in one iteration", true,
       kNoTable, [](R r, S) { return real(r.executed_flops); }},
      {"oom", "", kRun, "whether some stage's peak exceeds the GPU memory", true, kNoTable,
       [](R r, S) { return flag(r.oom); }},
      {"oom_stage", "", kRun, "first stage whose peak exceeds the GPU memory; null (CSV: empty) if none",
       true, kNoTable, [](R r, S) { return r.oom_stage < 0 ? null_value() : integer(r.oom_stage); }},
      {"peak_memory_bytes", "bytes", kRun,
       "largest stage peak (static + activations), from the simulated memory tracker", true,
       line("peak memory", 2, "GiB (largest stage)", kPerGiB),
       [](R r, S) { return integer(max_stage_peak(r)); }},
      {"memory_capacity_bytes", "bytes", kRun, "GPU memory capacity", true, kNoTable,
       [](R r, S) { return integer(static_cast<std::int64_t>(r.scenario.hardware.memory_bytes)); }},
      {"symmetric", "", kRun, "whether one rank per stage was simulated (exact reduction)", true,
       kNoTable, [](R r, S) { return flag(r.symmetric); }},
      {"layers_per_stage", "", kRun, "layers per virtual pipeline stage (CSV: space-separated)",
       true, line("layers per stage", 0, ""), [](R r, S) { return int_list(r.layers_per_stage); }},
      {"search_seconds", "s", kRun,
       "wall time of the planner's search (lynx-heu, lynx-opt, checkmate); 0 for fixed strategies",
       true, line("planner search", 6, "s wall", 1, true),
       [](R r, S) { return real(r.search_seconds); }, true},
      {"baseline_seconds", "s", kRun,
       "wall time of the planner's keep-everything baseline simulation (measures the overlap "
       "windows)",
       true, line("baseline run", 6, "s wall", 1, true),
       [](R r, S) { return real(r.baseline_seconds); }, true},
      {"confirm_seconds", "s", kRun,
       "wall time of the engine runs confirming the plan and comparing it with narrower ones",
       true, line("confirm runs", 6, "s wall", 1, true),
       [](R r, S) { return real(r.confirm_seconds); }, true},
      {"simulate_seconds", "s", kRun, "wall time of building and running the final programs", true,
       line("final run", 6, "s wall"), [](R r, S) { return real(r.simulate_seconds); }, true},
      {"engine_runs", "", kRun, "engine executions this result took, planning included", true,
       line("engine runs", 0, ""), [](R r, S) { return integer(r.engine_runs); }},
      {"fast_screened_runs", "", kRun,
       "planner candidates fast mode showed cannot win, so never run in the engine "
       "(sim.fast_screening)",
       true, line("fast-screened", 0, ""), [](R r, S) { return integer(r.fast_screened_runs); }},
      {"solver_gap", "", kRun, "largest relative MILP gap over stages (0 = optimal)", true,
       line("MILP gap", 2, "%", 100, true), [](R r, S) { return real(r.solver_gap); }},
      {"solver_limit_bound", "", kRun,
       "whether the MILP node limit (recompute.solver_nodes) stopped some stage's search: the "
       "plan is then the best found, solver_gap from optimal",
       true, kNoTable, [](R r, S) { return flag(r.solver_limit_bound); }},
      {"events", "", kRun, "engine events of the final run", true, kNoTable,
       [](R r, S) { return integer(static_cast<std::int64_t>(r.events)); }},
      {"tasks", "", kRun, "tasks of the final program", true, kNoTable,
       [](R r, S) { return integer(static_cast<std::int64_t>(r.tasks)); }},
      {"event_fingerprint", "", kRun,
       "hash of the final run's (time, sequence, task) event stream, 16 hex digits", true,
       kNoTable, [](R r, S) { return text(fmt::format("{:016x}", r.event_fingerprint)); }},
      {"scenario_yaml", "", kRun,
       "the resolved scenario as `lynxsim show` prints it (CSV: `#` comment lines above the header)",
       false, kNoTable, [](R r, S) { return text(scenario_to_yaml(r.scenario)); }},

      // Stage level: where the stage's iteration went, and its memory.
      {"stage", "", kStage, "pipeline stage", true, column("stage", 0),
       [](R, S s) { return integer(s.stage); }},
      {"compute_s", "s", kStage,
       "forward, backward and optimizer kernels on the compute stream (their contention included)",
       true, column("compute s", 4), [](R, S s) { return real(s.compute_s); }},
      {"recompute_s", "s", kStage, "recompute on the compute stream, on the critical path (exposed)",
       true, column("recomp s", 4, 1, true), [](R, S s) { return real(s.recompute_s); }},
      {"recompute_overlapped_s", "s", kStage,
       "recompute on the recompute stream, beside the critical path (overlapped with communication)",
       true, column("recomp-stream s", 4, 1, true),
       [](R, S s) { return real(s.recompute_overlapped_s); }},
      {"contention_s", "s", kStage,
       "compute-stream kernel time beyond solo time (SMs shared with communication kernels and "
       "overlapped recompute): the cost of overlap, part of compute_s + recompute_s",
       true, column("contention s", 4, 1, true), [](R, S s) { return real(s.contention_s); }},
      {"tp_exposed_s", "s", kStage, "compute stream idle while a TP collective (or a context-parallel ring transfer) it waits for is in flight",
       true, column("tp exp s", 4), [](R, S s) { return real(s.tp_exposed_s); }},
      {"pp_exposed_s", "s", kStage, "compute stream idle while a pipeline transfer it waits for is in flight",
       true, column("pp exp s", 4), [](R, S s) { return real(s.pp_exposed_s); }},
      {"dp_exposed_s", "s", kStage,
       "compute stream idle while the gradient all-reduce it waits for is in flight", true,
       column("dp exp s", 4), [](R, S s) { return real(s.dp_exposed_s); }},
      {"bubble_s", "s", kStage,
       "the rest of the compute stream's idle time (pipeline fill and drain, imbalance)", true,
       column("bubble s", 4), [](R, S s) { return real(s.bubble_s); }},
      {"stage_peak_memory_bytes", "bytes", kStage,
       "peak bytes in use on the stage's GPUs (static + activations)", true,
       column("peak GiB", 2, kPerGiB), [](R, S s) { return integer(s.peak_memory_bytes); }},
      {"static_memory_bytes", "bytes", kStage, "weights, gradients, optimizer state and reserve",
       true, column("static GiB", 2, kPerGiB), [](R, S s) { return integer(s.static_memory_bytes); }},
      {"stage_oom", "", kStage, "whether this stage's peak exceeds the GPU memory", true,
       column("oom", 0), [](R, S s) { return flag(s.oom); }},
  };
}

std::string quoted_csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

const std::vector<ResultField>& result_fields() {
  static const std::vector<ResultField> fields = make_fields();
  return fields;
}

std::string model_name(const ModelSpec& model) {
  if (!model.preset.empty()) return model.preset;
  if (!model.hf_config.empty()) return std::filesystem::path(model.hf_config).filename().string();
  return "custom";
}

std::vector<const ResultField*> fields_of(FieldLevel level, bool csv_only) {
  std::vector<const ResultField*> out;
  for (const ResultField& f : result_fields())
    if (f.level == level && (f.in_csv || !csv_only)) out.push_back(&f);
  return out;
}

std::string csv_cell(const FieldValue& v) {
  switch (v.kind) {
    case FieldValue::Kind::kNull: return "";
    case FieldValue::Kind::kBool: return v.flag ? "true" : "false";
    case FieldValue::Kind::kInt: return std::to_string(v.integer);
    case FieldValue::Kind::kReal: return fmt::format("{:.9g}", v.real);
    case FieldValue::Kind::kText: return quoted_csv(v.text);
    case FieldValue::Kind::kIntList: return fmt::format("{}", fmt::join(v.list, " "));
  }
  return "";
}

std::string json_literal(const FieldValue& v) {
  switch (v.kind) {
    case FieldValue::Kind::kNull: return "null";
    case FieldValue::Kind::kBool: return v.flag ? "true" : "false";
    case FieldValue::Kind::kInt: return std::to_string(v.integer);
    case FieldValue::Kind::kReal: return std::isfinite(v.real) ? fmt::format("{:.9g}", v.real) : "null";
    case FieldValue::Kind::kText: return sim::json_string(v.text);
    case FieldValue::Kind::kIntList: return fmt::format("[{}]", fmt::join(v.list, ", "));
  }
  return "null";
}

std::string table_cell(const ResultField& field, const FieldValue& v) {
  const TableStyle& t = field.table;
  switch (v.kind) {
    case FieldValue::Kind::kNull: return "-";
    case FieldValue::Kind::kBool: return v.flag ? "yes" : "no";
    case FieldValue::Kind::kInt:
      if (t.scale == 1) return std::to_string(v.integer);
      return fmt::format("{:.{}f}", static_cast<double>(v.integer) * t.scale, t.precision);
    case FieldValue::Kind::kReal: return fmt::format("{:.{}f}", v.real * t.scale, t.precision);
    case FieldValue::Kind::kText: return v.text;
    case FieldValue::Kind::kIntList: return fmt::format("{}", fmt::join(v.list, " "));
  }
  return "-";
}

std::string csv_cells(const std::vector<const ResultField*>& fields, const SimResult& result,
                      const StageBreakdown& stage) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += csv_cell(fields[i]->value(result, stage));
  }
  return out;
}

std::string csv_names(const std::vector<const ResultField*>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += fields[i]->name;
  }
  return out;
}

std::string result_fields_markdown() {
  std::string out = "| field | level | unit | meaning |\n|---|---|---|---|\n";
  for (const ResultField& f : result_fields())
    out += fmt::format("| `{}` | {} | {} | {} |\n", f.name, f.level == FieldLevel::kRun ? "run" : "stage",
                       *f.unit ? f.unit : "-", f.description);
  return out;
}

}  // namespace lynx::runner
