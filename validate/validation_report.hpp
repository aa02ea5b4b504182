#pragma once
/// Writes validation results for people (table) and programs (CSV).
#include "validate/fit.hpp"
#include "validate/validation.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace lynx::validate {

enum class ValidationFormat { kTable, kCsv };

/// Parses "table" | "csv"; throws lynx::Error naming the allowed values.
ValidationFormat parse_validation_format(const std::string& text);

struct ReportOptions {
  ValidationFormat format = ValidationFormat::kTable;
  bool per_row = true;            ///< one line per row (predicted vs measured, error %)
  std::size_t worst_count = 10;   ///< rows in the worst-rows list
  std::string title;              ///< first line (table) / comment (CSV), e.g. the profile
  std::string csv;                ///< the measurements CSV the rows come from, for messages
};

/// Per-row predictions, then MAPE, median APE, bias, Kendall tau-b, the worst rows and the
/// error by category. CSV: one row per measured row, the summary as '#' comment lines.
void write_validation_report(std::ostream& out, const std::vector<RowResult>& rows,
                             const ReportOptions& options);

/// A row's settings columns as "column=value", space-separated, in header order ("" if none).
std::string settings_text(const MeasuredRun& run);

/// One line of accuracy figures ("MAPE 7.1%  median APE 5.0%  bias +0.3%  tau-b 0.951 ...").
std::string summary_line(const Summary& summary);

/// The fitted values against their start (datasheet) values, one parameter per line.
void write_fit_parameters(std::ostream& out, const FitResult& fit, const std::string& indent);

}  // namespace lynx::validate
