#include "validate/markdown_report.hpp"

#include "validate/validation_report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>
#include <ostream>

namespace lynx::validate {

namespace {

/// A markdown cell: '|' would end it.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void write_worst_rows(std::ostream& out, const ProfileRows& p, std::size_t count) {
  const std::vector<RowResult> worst = worst_rows(p.rows, count);
  bool any_settings = false;
  for (const RowResult& r : worst) any_settings = any_settings || !r.run.settings.empty();
  fmt::print(out, "\nWorst {} rows on `{}`:\n\n", worst.size(), cell(p.profile));
  fmt::print(out, "| line | GPUs | global | micro | h | heads | layers | seq | tp | dp | pp |{} measured ms | predicted ms | error |\n",
             any_settings ? " settings |" : "");
  fmt::print(out, "|---|---|---|---|---|---|---|---|---|---|---|{}---|---|---|\n",
             any_settings ? "---|" : "");
  for (const RowResult& r : worst) {
    const MeasuredRun& m = r.run;
    const std::string settings = any_settings ? fmt::format(" {} |", cell(settings_text(m))) : "";
    fmt::print(out, "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |{} {:.2f} | {:.2f} | {:+.1f}%{} |\n",
               m.line, m.gpus, m.global_batch, m.micro_batch, m.hidden, m.heads, m.layers,
               m.seq_len, m.tp, m.dp, m.pp,
               settings, m.iteration_ms,
               r.predicted_ms, r.error_percent, r.oom ? " (OOM)" : "");
  }
}

void write_categories(std::ostream& out, const DatasetResults& d) {
  std::vector<std::vector<CategoryError>> per_profile;
  for (const ProfileRows& p : d.profiles) per_profile.push_back(errors_by_category(p.rows));
  fmt::print(out, "\nError by category (bias = mean signed error):\n\n| column | value | rows |");
  for (const ProfileRows& p : d.profiles)
    fmt::print(out, " bias `{}` | MAPE `{}` |", cell(p.profile), cell(p.profile));
  fmt::print(out, "\n|---|---|---|");
  for (std::size_t i = 0; i < d.profiles.size(); ++i) fmt::print(out, "---|---|");
  fmt::print(out, "\n");
  // Every profile scores the same rows, so the categories line up.
  for (std::size_t k = 0; k < per_profile.front().size(); ++k) {
    const CategoryError& c = per_profile.front()[k];
    fmt::print(out, "| {} | {} | {} |", c.column, c.value, c.rows);
    for (const auto& categories : per_profile)
      fmt::print(out, " {:+.1f}% | {:.1f}% |", categories[k].mean_signed_error_percent,
                 categories[k].mape_percent);
    fmt::print(out, "\n");
  }
}

/// The per-layer data sets: a summary line per (data set, profile), then every row.
void write_layer_sets(std::ostream& out, const std::vector<DatasetResults>& results) {
  bool any = false;
  for (const DatasetResults& d : results) any = any || !d.layer_profiles.empty();
  if (!any) return;
  fmt::print(out, "\nPer-layer data sets (`lynxsim validate FILE --components`): one transformer layer's forward and "
                  "backward time, simulated middle layer against measured.\n\n");
  fmt::print(out, "| data set | profile | rows | forward MAE | forward bias | backward MAE | backward bias | "
                  "fwd + bwd MAE |\n|---|---|---|---|---|---|---|---|\n");
  for (const DatasetResults& d : results)
    for (const ProfileLayers& p : d.layer_profiles) {
      double f = 0, fb = 0, b = 0, bb = 0, c = 0;
      for (const ComponentRow& r : p.rows) {
        f += std::abs(r.forward_error_percent);
        fb += r.forward_error_percent;
        b += std::abs(r.backward_error_percent);
        bb += r.backward_error_percent;
        c += std::abs(r.combined_error_percent);
      }
      const double n = static_cast<double>(p.rows.size());
      fmt::print(out, "| {} | `{}` | {} | {:.2f}% | {:+.2f}% | {:.2f}% | {:+.2f}% | {:.2f}% |\n", cell(d.dataset.name),
                 cell(p.profile), p.rows.size(), f / n, fb / n, b / n, bb / n, c / n);
    }
  for (const DatasetResults& d : results)
    for (const ProfileLayers& p : d.layer_profiles) {
      fmt::print(out, "\n### {} on `{}`\n\n", d.dataset.name, cell(p.profile));
      if (!d.dataset.source.empty()) fmt::print(out, "Source: {}.\n\n", d.dataset.source);
      fmt::print(out, "| line | settings | forward ms | predicted | error | backward ms | predicted | error | "
                      "of which recompute |\n|---|---|---|---|---|---|---|---|---|\n");
      for (const ComponentRow& r : p.rows) {
        std::string settings;
        for (const RowSetting& s : r.run.settings) settings += (settings.empty() ? "" : " ") + s.column + "=" + s.value;
        fmt::print(out, "| {} | {} | {:.2f} | {:.2f} | {:+.1f}% | {:.2f} | {:.2f} | {:+.1f}% | {:.2f} |\n", r.run.line,
                   cell(settings), r.run.layer_forward_ms, r.predicted.forward_s * 1e3, r.forward_error_percent,
                   r.run.layer_backward_ms, r.predicted.backward_s * 1e3, r.backward_error_percent,
                   r.predicted.recompute_s * 1e3);
      }
    }
}

}  // namespace

void write_markdown_report(std::ostream& out, const std::vector<DatasetResults>& results,
                           const MarkdownOptions& options) {
  fmt::print(out, "<!-- generated by `{}` (lynxsim {}); edit the manifest, not this block -->\n\n",
             options.command, options.version);
  fmt::print(out, "| data set | profile | rows | MAPE | median APE | bias | Kendall tau-b | OOM rows |\n");
  fmt::print(out, "|---|---|---|---|---|---|---|---|\n");
  for (const DatasetResults& d : results)
    for (const ProfileRows& p : d.profiles) {
      const Summary s = summarize(p.rows, fmt::format("{} (data set '{}', profile {})", d.dataset.file,
                                                      d.dataset.name, p.profile));
      fmt::print(out, "| {} | `{}` | {} | {:.2f}% | {:.2f}% | {:+.2f}% | {:.3f} | {} |\n",
                 cell(d.dataset.name), cell(p.profile), s.rows, s.mape_percent,
                 s.median_ape_percent, s.mean_signed_error_percent, s.kendall_tau_b, s.oom_rows);
    }
  write_layer_sets(out, results);
  for (const DatasetResults& d : results) {
    if (d.profiles.empty()) continue;
    fmt::print(out, "\n### {}\n\n", d.dataset.name);
    if (!d.dataset.source.empty()) fmt::print(out, "Source: {}.", d.dataset.source);
    fmt::print(out, "{}{} rows{}{}.\n", d.dataset.source.empty() ? "" : " ",
               d.profiles.front().rows.size(),
               d.dataset.recompute.empty() ? "" : ", recompute " + d.dataset.recompute + " unless a row says otherwise",
               d.dataset.overrides.empty() ? "" : fmt::format(", --set {}", fmt::join(d.dataset.overrides, " --set ")));
    write_categories(out, d);
    for (const ProfileRows& p : d.profiles) write_worst_rows(out, p, options.worst_count);
  }
}

}  // namespace lynx::validate
