#include "runner/report.hpp"

#include "common/bytes.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/error.hpp"
#include "sim/json.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <ostream>
#include <sstream>

namespace lynx {

const char* lynxsim_version() { return LYNXSIM_VERSION; }

ReportFormat parse_report_format(const std::string& text) {
  if (text == "table") return ReportFormat::kTable;
  if (text == "csv") return ReportFormat::kCsv;
  if (text == "json") return ReportFormat::kJson;
  fail("--format: unknown format '{}' (expected table, csv or json)", text);
}

namespace {

void write_table(std::ostream& out, const SimResult& r) {
  const auto& m = r.scenario.model;
  const auto& p = r.scenario.parallel;
  fmt::print(out, "lynxsim {} — {} on {} × {} ({} GPUs: tp {} pp {} dp {}), recompute {}\n",
             lynxsim_version(), m.preset.empty() ? "custom GPT" : m.preset, r.scenario.hardware.nodes,
             r.scenario.hardware.profile, r.gpus, p.tp, p.pp, p.dp, r.strategy);
  fmt::print(out, "  global batch {} × seq {} = {} tokens; {} micro-batches of {} per pipeline{}\n\n",
             p.global_batch, m.seq_len, static_cast<long long>(p.global_batch) * m.seq_len,
             r.micro_batches, p.micro_batch, r.symmetric ? " (simulated one rank per stage)" : "");
  fmt::print(out, "  iteration time   {:>12.4f} s\n", r.iteration_time_s);
  fmt::print(out, "  throughput       {:>12.1f} tokens/s   {:.2f} samples/s\n", r.tokens_per_s,
             r.samples_per_s);
  fmt::print(out, "  model TFLOP/s    {:>12.1f} per GPU\n", r.tflops_per_gpu);
  fmt::print(out, "  MFU / HFU        {:>11.1f}% / {:.1f}%\n", 100 * r.mfu, 100 * r.hfu);
  if (r.search_seconds > 0)
    fmt::print(out, "  planner search   {:>12.6f} s   (largest MILP gap {:.2f}%), layers per stage {}\n",
               r.search_seconds, 100 * r.solver_gap, fmt::join(r.layers_per_stage, " "));
  fmt::print(out, "  memory           {}\n\n",
             r.oom ? fmt::format("OOM (stage {} exceeds {:.1f} GiB)", r.oom_stage,
                                 static_cast<double>(r.scenario.hardware.memory_bytes) / kGiB)
                   : "fits");
  fmt::print(out, "  {:>5} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>4}\n", "stage",
             "compute s", "recomp s", "hidden s", "tp exp s", "pp exp s", "dp exp s", "bubble s",
             "peak GiB", "static GiB", "oom");
  for (const auto& s : r.stages)
    fmt::print(out, "  {:>5} {:>10.4f} {:>10.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.2f} {:>10.2f} {:>4}\n",
               s.stage, s.compute_s, s.recompute_s, s.recompute_overlapped_s, s.tp_exposed_s,
               s.pp_exposed_s, s.dp_exposed_s, s.bubble_s,
               static_cast<double>(s.peak_memory_bytes) / kGiB,
               static_cast<double>(s.static_memory_bytes) / kGiB, s.oom ? "yes" : "no");
}

void write_csv(std::ostream& out, const SimResult& r) {
  fmt::print(out, "# lynxsim {}\n", lynxsim_version());
  std::istringstream yaml(scenario_to_yaml(r.scenario));
  for (std::string line; std::getline(yaml, line);) fmt::print(out, "# {}\n", line);
  fmt::print(out,
             "stage,strategy,iteration_time_s,tokens_per_s,samples_per_s,tflops_per_gpu,mfu,hfu,"
             "oom,peak_memory_bytes,static_memory_bytes,stage_oom,compute_s,recompute_s,"
             "recompute_overlapped_s,tp_exposed_s,pp_exposed_s,dp_exposed_s,bubble_s\n");
  for (const auto& s : r.stages)
    fmt::print(out, "{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.6f},{:.6f},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n",
               s.stage, r.strategy, r.iteration_time_s, r.tokens_per_s, r.samples_per_s,
               r.tflops_per_gpu, r.mfu, r.hfu, r.oom ? "true" : "false", s.peak_memory_bytes,
               s.static_memory_bytes, s.oom ? "true" : "false", s.compute_s, s.recompute_s,
               s.recompute_overlapped_s, s.tp_exposed_s, s.pp_exposed_s, s.dp_exposed_s,
               s.bubble_s);
}

void write_json(std::ostream& out, const SimResult& r) {
  fmt::print(out, "{{\n  \"lynxsim_version\": {},\n", sim::json_string(lynxsim_version()));
  fmt::print(out, "  \"strategy\": {},\n", sim::json_string(r.strategy));
  fmt::print(out, "  \"strategy_requested\": {},\n", sim::json_string(r.strategy_requested));
  fmt::print(out, "  \"iteration_time_s\": {:.9g},\n  \"tokens_per_s\": {:.9g},\n", r.iteration_time_s,
             r.tokens_per_s);
  fmt::print(out, "  \"samples_per_s\": {:.9g},\n  \"tflops_per_gpu\": {:.9g},\n", r.samples_per_s,
             r.tflops_per_gpu);
  fmt::print(out, "  \"mfu\": {:.6f},\n  \"hfu\": {:.6f},\n", r.mfu, r.hfu);
  fmt::print(out, "  \"model_flops\": {:.9g},\n  \"executed_flops\": {:.9g},\n", r.model_flops,
             r.executed_flops);
  fmt::print(out, "  \"oom\": {},\n  \"oom_stage\": {},\n", r.oom ? "true" : "false",
             r.oom_stage < 0 ? std::string("null") : std::to_string(r.oom_stage));
  fmt::print(out, "  \"gpus\": {},\n  \"micro_batches\": {},\n  \"symmetric\": {},\n", r.gpus,
             r.micro_batches, r.symmetric ? "true" : "false");
  fmt::print(out, "  \"events\": {},\n  \"tasks\": {},\n", r.events, r.tasks);
  fmt::print(out, "  \"event_fingerprint\": \"{:016x}\",\n", r.event_fingerprint);
  fmt::print(out, "  \"search_seconds\": {:.6f},\n  \"solver_gap\": {:.6f},\n", r.search_seconds,
             r.solver_gap);
  fmt::print(out, "  \"engine_runs\": {},\n  \"baseline_seconds\": {:.6f},\n  \"confirm_seconds\": {:.6f},\n",
             r.engine_runs, r.baseline_seconds, r.confirm_seconds);
  fmt::print(out, "  \"layers_per_stage\": [{}],\n", fmt::join(r.layers_per_stage, ", "));
  fmt::print(out, "  \"peak_memory_bytes\": [");
  for (size_t i = 0; i < r.stages.size(); ++i)
    fmt::print(out, "{}{}", i ? ", " : "", r.stages[i].peak_memory_bytes);
  fmt::print(out, "],\n  \"stages\": [\n");
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const auto& s = r.stages[i];
    fmt::print(out,
               "    {{\"stage\": {}, \"peak_memory_bytes\": {}, \"static_memory_bytes\": {}, "
               "\"oom\": {}, \"compute_s\": {:.9g}, \"recompute_s\": {:.9g}, "
               "\"recompute_overlapped_s\": {:.9g}, \"tp_exposed_s\": {:.9g}, \"pp_exposed_s\": "
               "{:.9g}, \"dp_exposed_s\": {:.9g}, \"bubble_s\": {:.9g}}}{}\n",
               s.stage, s.peak_memory_bytes, s.static_memory_bytes, s.oom ? "true" : "false",
               s.compute_s, s.recompute_s, s.recompute_overlapped_s, s.tp_exposed_s,
               s.pp_exposed_s, s.dp_exposed_s, s.bubble_s, i + 1 < r.stages.size() ? "," : "");
  }
  fmt::print(out, "  ],\n  \"scenario_yaml\": {}\n}}\n", sim::json_string(scenario_to_yaml(r.scenario)));
}

}  // namespace

void write_report(std::ostream& out, const SimResult& result, ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: write_table(out, result); break;
    case ReportFormat::kCsv: write_csv(out, result); break;
    case ReportFormat::kJson: write_json(out, result); break;
  }
}

}  // namespace lynx
