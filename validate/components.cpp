#include "validate/components.hpp"

#include "common/error.hpp"
#include "runner/simulate.hpp"
#include "validate/validation.hpp"

#include <fmt/format.h>

#include <cmath>

namespace lynx::validate {

namespace {

double error_percent(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

std::string settings_text(const MeasuredRun& run) {
  std::string text;
  for (const RowSetting& s : run.settings) text += (text.empty() ? "" : " ") + s.column + "=" + s.value;
  return text;
}

}  // namespace

std::vector<ComponentRow> simulate_components(const Scenario& base, const std::vector<MeasuredRun>& runs,
                                              const std::string& file_label) {
  require_layer_times(runs, file_label);
  std::vector<ComponentRow> rows;
  for (const MeasuredRun& run : runs) {
    const std::string where = fmt::format("{}:{}", file_label, run.line);
    Scenario sc = scenario_for_run(base, run, file_label);
    sc.sim.mode = SimMode::kExact;  // the timeline is exact mode's
    const model::ResolvedScenario resolved = model::resolve_scenario(sc, where);
    runner::SimOptions options;
    options.keep_trace_data = true;
    ComponentRow row;
    row.run = run;
    try {
      const runner::SimRun sim = runner::simulate(resolved, options);
      const int chunk_layers = sim.result.layers_per_stage.empty() ? 0 : sim.result.layers_per_stage.front();
      if (chunk_layers < 3)
        fail(ErrorCode::kInvalidOption, "the first pipeline chunk has {} layer(s); per-layer times need at least 3",
             chunk_layers);
      row.predicted = runner::layer_times(sim, chunk_layers / 2);
      row.predicted_iteration_ms = sim.result.iteration_time_s * 1e3;
    } catch (const Error& e) {
      fail(e.code(), "{}: {}", where, e.what());
    }
    row.forward_error_percent = error_percent(row.predicted.forward_s * 1e3, run.layer_forward_ms);
    row.backward_error_percent = error_percent(row.predicted.backward_s * 1e3, run.layer_backward_ms);
    row.combined_error_percent = error_percent((row.predicted.forward_s + row.predicted.backward_s) * 1e3,
                                               run.layer_forward_ms + run.layer_backward_ms);
    rows.push_back(std::move(row));
  }
  return rows;
}

void write_components_report(std::ostream& out, const std::vector<ComponentRow>& rows, const std::string& title) {
  out << title << "\n\n";
  out << fmt::format("  {:>5} {:>6} {:>6} {:>7} {:>7} | {:>8} {:>8} {:>7} | {:>8} {:>8} {:>7} | {:>8} {:>8} {:>7} | {:>8}  {}\n",
                     "line", "h", "heads", "micro", "tp", "fwd ms", "pred ms", "err %", "bwd ms", "pred ms", "err %",
                     "sum ms", "pred ms", "err %", "recomp", "settings");
  double fwd = 0, bwd = 0, sum = 0;
  for (const ComponentRow& r : rows) {
    const MeasuredRun& m = r.run;
    out << fmt::format(
        "  {:>5} {:>6} {:>6} {:>7} {:>7} | {:>8.2f} {:>8.2f} {:>+7.2f} | {:>8.2f} {:>8.2f} {:>+7.2f} | {:>8.2f} {:>8.2f} {:>+7.2f} | {:>8.2f}  {}\n",
        m.line, m.hidden, m.heads, m.micro_batch, m.tp, m.layer_forward_ms, r.predicted.forward_s * 1e3,
        r.forward_error_percent, m.layer_backward_ms, r.predicted.backward_s * 1e3, r.backward_error_percent,
        m.layer_forward_ms + m.layer_backward_ms, (r.predicted.forward_s + r.predicted.backward_s) * 1e3,
        r.combined_error_percent, r.predicted.recompute_s * 1e3, settings_text(m));
    fwd += std::abs(r.forward_error_percent);
    bwd += std::abs(r.backward_error_percent);
    sum += std::abs(r.combined_error_percent);
  }
  const double n = static_cast<double>(rows.size());
  out << fmt::format("\nrows {}  mean |error|: forward {:.2f}%  backward {:.2f}%  forward + backward {:.2f}%\n", rows.size(),
                     fwd / n, bwd / n, sum / n);
  out << "recomp: the layer's on-demand recompute (ms), part of its predicted backward\n";
}

}  // namespace lynx::validate
