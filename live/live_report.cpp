#include "live/live_report.hpp"

#include "calibrate/stats.hpp"
#include "common/error.hpp"
#include "common/statistics.hpp"
#include "live/dry_run.hpp"
#include "runner/report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <tuple>

namespace lynx::live {

namespace {

constexpr double kPsPerS = 1e12;

double ps_to_s(TimePs ps) { return static_cast<double>(ps) / kPsPerS; }

/// The iterations that count (after the warm-up; at least the last one).
std::vector<const Measured*> counted(const LiveRun& run) {
  LYNX_CHECK(!run.iterations.empty(), "no live iterations");
  std::vector<const Measured*> out;
  const std::size_t first = std::min<std::size_t>(static_cast<std::size_t>(std::max(run.warmup, 0)),
                                                  run.iterations.size() - 1);
  for (std::size_t i = first; i < run.iterations.size(); ++i) out.push_back(&run.iterations[i]);
  return out;
}

}  // namespace

std::vector<CompareRow> compare_rows(const OpStream& ops, const LiveRun& run) {
  const std::vector<const Measured*> its = counted(run);
  std::vector<CompareRow> rows;
  std::vector<double> times;
  for (const Measured* m : its) times.push_back(m->iteration_s);
  rows.push_back({"iteration", -1, "", "", "", 1, "s", median(times), ps_to_s(ops.predicted_iteration_ps)});
  for (std::size_t r = 0; r < ops.gpu_names.size(); ++r) {
    double peak = 0;
    for (const Measured* m : its) peak = std::max(peak, static_cast<double>(m->peak_bytes.at(r)));
    rows.push_back({"peak_memory", static_cast<int>(r), "", "", "", 1, "bytes", peak,
                    static_cast<double>(ops.predicted_peak_bytes.at(r))});
  }
  // Per (op, pass, stream): predicted and measured busy time summed over ranks, per iteration.
  std::map<std::tuple<std::string, std::string, int>, CompareRow> groups;
  for (std::size_t i = 0; i < ops.ops.size(); ++i) {
    const LiveOp& op = ops.ops[i];
    if (op.launch == LaunchKind::kNone) continue;
    CompareRow& g = groups[{op.op, op.pass, op.stream}];
    g.row = "op";
    g.op = op.op;
    g.pass = op.pass;
    g.stream = ops.stream_names.at(static_cast<std::size_t>(op.stream));
    g.unit = "s";
    ++g.count;
    g.predicted += ps_to_s(op.predicted_end_ps - op.predicted_start_ps);
  }
  for (auto& [key, g] : groups) {
    std::vector<double> per_iteration;
    for (const Measured* m : its) {
      double sum = 0;
      for (std::size_t i = 0; i < ops.ops.size(); ++i) {
        const LiveOp& op = ops.ops[i];
        if (op.launch != LaunchKind::kNone && op.op == g.op && op.pass == g.pass &&
            ops.stream_names[static_cast<std::size_t>(op.stream)] == g.stream)
          sum += m->op_end_s[i] - m->op_start_s[i];
      }
      per_iteration.push_back(sum);
    }
    g.measured = median(per_iteration);
  }
  std::vector<CompareRow> op_rows;
  for (auto& [key, g] : groups) op_rows.push_back(g);
  std::stable_sort(op_rows.begin(), op_rows.end(),
                   [](const CompareRow& a, const CompareRow& b) { return a.predicted > b.predicted; });
  rows.insert(rows.end(), op_rows.begin(), op_rows.end());
  return rows;
}

void write_compare_table(std::ostream& out, const std::vector<CompareRow>& rows, const LiveRun& run) {
  fmt::print(out, "live run of {} on {} ({} backend): {} iteration(s), {} warm-up\n", run.plan_label, run.device,
             run.backend, run.iterations.size(), run.warmup);
  if (!run.runs_as.empty()) fmt::print(out, "{}\n", run.runs_as);
  fmt::print(out, "{:<12} {:>4}  {:<26} {:<16} {:<9} {:>6}  {:>14} {:>14} {:>8}\n", "row", "rank", "op", "pass",
             "stream", "count", "measured", "predicted", "ratio");
  for (const CompareRow& r : rows) {
    const bool bytes = r.unit == "bytes";
    const auto value = [&](double v) {
      return bytes ? format_bytes(static_cast<std::uint64_t>(v)) : fmt::format("{:.6f} s", v);
    };
    fmt::print(out, "{:<12} {:>4}  {:<26} {:<16} {:<9} {:>6}  {:>14} {:>14} {:>8}\n", r.row,
               r.rank >= 0 ? std::to_string(r.rank) : "", r.op, r.pass, r.stream, r.count, value(r.measured),
               value(r.predicted), r.predicted > 0 ? fmt::format("{:.3f}", r.measured / r.predicted) : "");
  }
}

void write_compare_csv(std::ostream& out, const std::vector<CompareRow>& rows) {
  fmt::print(out, "row,rank,op,pass,stream,count,unit,measured,predicted,measured_over_predicted\n");
  for (const CompareRow& r : rows)
    fmt::print(out, "{},{},{},{},{},{},{},{},{},{}\n", r.row, r.rank, r.op, r.pass, r.stream, r.count, r.unit,
               r.measured, r.predicted, r.predicted > 0 ? r.measured / r.predicted : 0.0);
}

calibrate::RawMeasurements raw_measurements(const OpStream& ops, const LiveRun& run) {
  using calibrate::Measurement;
  using calibrate::MeasurementKind;
  const std::vector<const Measured*> its = counted(run);
  calibrate::RawMeasurements raw;
  raw.metadata = {{"device", run.device},
                  {"source", "lynxsim live"},
                  {"backend", run.backend},
                  {"plan", run.plan_label},
                  {"strategy", ops.strategy},
                  {"iterations", std::to_string(its.size())},
                  {"lynxsim", runner::lynxsim_version()}};
  if (!run.runs_as.empty()) raw.metadata.emplace_back("runs_as", run.runs_as);
  // One row per distinct launch; instances keyed by everything the row carries.
  std::map<std::tuple<int, std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::uint64_t, int>,
           std::pair<Measurement, std::vector<double>>>
      rows;
  std::vector<std::tuple<int, std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::uint64_t, int>>
      order;
  for (std::size_t i = 0; i < ops.ops.size(); ++i) {
    const LiveOp& op = ops.ops[i];
    Measurement row;
    row.dtype = "bf16";
    switch (op.launch) {
      case LaunchKind::kNone:
      case LaunchKind::kRecv:  // timed with its send
      case LaunchKind::kStandinCopy:  // a copy, not a collective the fitter models
        continue;
      case LaunchKind::kGemm:
      case LaunchKind::kBatchedGemm:
        if (op.m2 > 0) continue;  // two GEMMs in one op: no single shape to fit
        row.kind = op.launch == LaunchKind::kGemm ? MeasurementKind::kGemm : MeasurementKind::kAttention;
        row.name = fmt::format("live:{}.{}", op.op, op.pass);
        row.m = op.m, row.n = op.n, row.k = op.k, row.batch = op.batch;
        break;
      case LaunchKind::kMemoryBound:
        row.kind = MeasurementKind::kMemoryBound;
        row.name = kernel_name(op.kernel);
        row.m = op.m, row.n = op.n;
        break;
      case LaunchKind::kCollective:
        // The micro-batch load's broadcasts: calibrate's NCCL curves have no broadcast row.
        if (op.collective == model::CollectiveKind::kBroadcast) continue;
        row.kind = MeasurementKind::kCollective;
        row.name = collective_name(op.collective);
        row.ranks = static_cast<int>(ops.comms.at(static_cast<std::size_t>(op.comm)).ranks.size());
        row.scope = "intra";
        break;
      case LaunchKind::kSend:
        row.kind = MeasurementKind::kCollective;
        row.name = "send_recv";
        row.ranks = 2;
        row.scope = "intra";
        break;
    }
    row.bytes = op.bytes;
    const auto key = std::make_tuple(static_cast<int>(row.kind), row.name, row.m, row.n, row.k, row.batch, row.bytes,
                                     row.ranks);
    auto [it, inserted] = rows.try_emplace(key, row, std::vector<double>{});
    if (inserted) order.push_back(key);
    // The send's time is the transfer: until its receive ended, whichever is later.
    for (const Measured* m : its) {
      double end = m->op_end_s[i];
      if (op.launch == LaunchKind::kSend) end = std::max(end, m->op_end_s[static_cast<std::size_t>(op.match)]);
      it->second.second.push_back((end - m->op_start_s[i]) * 1e6);
    }
  }
  constexpr double kFloorUs = 0.001;  // below the clock's resolution (the raw CSV needs > 0)
  for (const auto& key : order) {
    auto& [row, times] = rows.at(key);
    const calibrate::TimingSummary t = calibrate::summarize(times);
    row.time_us_median = std::max(t.median, kFloorUs);
    row.time_us_p10 = std::max(t.p10, kFloorUs);
    row.time_us_p90 = std::max(t.p90, kFloorUs);
    row.reps = t.reps;
    raw.rows.push_back(row);
  }
  raw.source_label = run.plan_label;
  return raw;
}

void write_live_trace(std::ostream& out, const OpStream& ops, const LiveRun& run) {
  const Measured& m = *counted(run).back();
  const auto to_ps = [&](double s) { return static_cast<TimePs>(std::llround(s * kPsPerS)); };
  double first = m.op_start_s.empty() ? 0 : m.op_start_s[0];
  for (double s : m.op_start_s) first = std::min(first, s);
  sim::ExecResult exec;
  exec.task_start_ps.resize(ops.num_tasks);
  exec.task_end_ps.resize(ops.num_tasks);
  for (std::size_t i = 0; i < ops.num_tasks; ++i) {
    exec.task_start_ps[i] = to_ps(m.op_start_s[i] - first);
    exec.task_end_ps[i] = to_ps(m.op_end_s[i] - first);
    exec.makespan_ps = std::max(exec.makespan_ps, exec.task_end_ps[i]);
  }
  exec.flow_end_ps.resize(ops.sim.built.program.flows.size());
  for (std::size_t i = 0; i < ops.num_tasks; ++i) {
    const sim::Task& t = ops.sim.built.program.tasks[i];
    for (std::uint32_t k = 0; k < t.num_flows; ++k) exec.flow_end_ps[t.first_flow + k] = exec.task_end_ps[i];
  }
  exec.peak_bytes = m.peak_bytes;
  exec.first_oom_ps.assign(m.peak_bytes.size(), -1);
  for (const auto& timeline : m.memory_timeline) {
    exec.memory_timeline.emplace_back();
    for (const auto& [s, bytes] : timeline) exec.memory_timeline.back().emplace_back(to_ps(std::max(0.0, s - first)), bytes);
    std::stable_sort(exec.memory_timeline.back().begin(), exec.memory_timeline.back().end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  sim::TraceOptions options;
  options.metadata = {{"lynxsim", runner::lynxsim_version()},
                      {"mode", "live (measured)"},
                      {"backend", run.backend},
                      {"device", run.device},
                      {"plan", run.plan_label},
                      {"strategy", ops.strategy}};
  if (!run.runs_as.empty()) options.metadata.emplace_back("runs_as", run.runs_as);
  sim::write_chrome_trace(out, ops.sim.built.machine, ops.sim.built.program, exec, {}, options);
}

}  // namespace lynx::live
