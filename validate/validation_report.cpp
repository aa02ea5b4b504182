#include "validate/validation_report.hpp"

#include "common/error.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

namespace lynx::validate {

namespace {

void write_row_header(std::ostream& out, const char* prefix) {
  fmt::print(out, "{}{:>6} {:>4} {:>4} {:>3} {:>5} {:>3} {:>5} {:>3} {:>3} {:>3} {:>11} {:>11} {:>8}{}\n",
             prefix, "line", "gpus", "gb", "mb", "h", "a", "l", "tp", "dp", "pp", "measured ms",
             "predict ms", "error %", " oom");
}

void write_row(std::ostream& out, const RowResult& r, const char* prefix) {
  const MeasuredRun& m = r.run;
  const std::string settings = settings_text(m);
  fmt::print(out, "{}{:>6} {:>4} {:>4} {:>3} {:>5} {:>3} {:>5} {:>3} {:>3} {:>3} {:>11.2f} {:>11.2f} {:>+8.2f}{}{}\n",
             prefix, m.line, m.gpus, m.global_batch, m.micro_batch, m.hidden, m.heads, m.layers,
             m.tp, m.dp, m.pp, m.iteration_ms, r.predicted_ms, r.error_percent,
             r.oom ? " yes" : (settings.empty() ? "" : "    "),
             settings.empty() ? "" : "  " + settings);
}

}  // namespace

ValidationFormat parse_validation_format(const std::string& text) {
  if (text == "table") return ValidationFormat::kTable;
  if (text == "csv") return ValidationFormat::kCsv;
  fail(ErrorCode::kInvalidOption, "--format: unknown format '{}' (expected table or csv)", text);
}

std::string settings_text(const MeasuredRun& run) {
  std::string out;
  for (const RowSetting& s : run.settings)
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", s.column, s.value);
  return out;
}

std::string summary_line(const Summary& s) {
  return fmt::format(
      "rows {}  MAPE {:.2f}%  median APE {:.2f}%  bias {:+.2f}%  mean |ln(pred/meas)| {:.4f}  "
      "Kendall tau-b {:.4f}",
      s.rows, s.mape_percent, s.median_ape_percent, s.mean_signed_error_percent,
      s.mean_abs_log_error, s.kendall_tau_b);
}

void write_validation_report(std::ostream& out, const std::vector<RowResult>& rows,
                             const ReportOptions& options) {
  const Summary summary = summarize(rows, options.csv);
  const std::vector<RowResult> worst = worst_rows(rows, options.worst_count);
  const std::vector<CategoryError> categories = errors_by_category(rows);

  if (options.format == ValidationFormat::kCsv) {
    if (!options.title.empty()) fmt::print(out, "# {}\n", options.title);
    fmt::print(out,
               "line,gpus,global_batch,micro_batch,hidden,heads,layers,seq_len,tp,dp,pp,"
               "measured_ms,predicted_ms,error_percent,oom,settings\n");
    if (options.per_row) {
      for (const RowResult& r : rows) {
        const MeasuredRun& m = r.run;
        fmt::print(out, "{},{},{},{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.4f},{},{}\n", m.line, m.gpus,
                   m.global_batch, m.micro_batch, m.hidden, m.heads, m.layers, m.seq_len, m.tp,
                   m.dp, m.pp, m.iteration_ms, r.predicted_ms, r.error_percent,
                   r.oom ? "true" : "false", settings_text(m));
      }
    }
    fmt::print(out, "# {}\n", summary_line(summary));
    fmt::print(out, "# worst rows (line: error %): {}\n", [&] {
      std::string s;
      for (const RowResult& r : worst) s += fmt::format("{}{}: {:+.2f}", s.empty() ? "" : ", ", r.run.line, r.error_percent);
      return s;
    }());
    for (const CategoryError& c : categories)
      fmt::print(out, "# category {}={}: rows {} bias {:+.2f}% MAPE {:.2f}%\n", c.column, c.value,
                 c.rows, c.mean_signed_error_percent, c.mape_percent);
    return;
  }

  if (!options.title.empty()) fmt::print(out, "{}\n\n", options.title);
  if (options.per_row) {
    write_row_header(out, "");
    for (const RowResult& r : rows) write_row(out, r, "");
    fmt::print(out, "\n");
  }
  fmt::print(out, "{}\n", summary_line(summary));
  if (summary.oom_rows > 0)
    fmt::print(out, "({} rows would not fit the profile's GPU memory; capacity is ignored here)\n",
               summary.oom_rows);
  fmt::print(out, "\nworst {} rows by |error|:\n", worst.size());
  write_row_header(out, "  ");
  for (const RowResult& r : worst) write_row(out, r, "  ");
  fmt::print(out, "\nerror by category (bias = mean signed error):\n");
  fmt::print(out, "  {:<14} {:>6} {:>6} {:>9} {:>8}\n", "column", "value", "rows", "bias %", "MAPE %");
  for (const CategoryError& c : categories)
    fmt::print(out, "  {:<14} {:>6} {:>6} {:>+9.2f} {:>8.2f}\n", c.column, c.value, c.rows,
               c.mean_signed_error_percent, c.mape_percent);
}

void write_fit_parameters(std::ostream& out, const FitResult& fit, const std::string& indent) {
  fmt::print(out, "{}{:<40} {:>12} {:>12}  unit\n", indent, "parameter", "start", "fitted");
  for (std::size_t i = 0; i < fit.keys.size(); ++i) {
    const FitParameter& p = fittable_parameter(fit.keys[i]);
    fmt::print(out, "{}{:<40} {:>12.4g} {:>12.4g}  {}\n", indent, p.key, fit.start_values[i],
               fit.values[i], p.unit.empty() ? "-" : p.unit);
  }
}

}  // namespace lynx::validate
