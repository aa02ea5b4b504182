#pragma once
/// Writes simulation results for people (table) and programs (CSV, JSON). Every format
/// carries the program version and the resolved scenario; the fields come from one table
/// (runner/result_fields.hpp).
#include "runner/simulate.hpp"

#include <iosfwd>
#include <string>

namespace lynx::runner {

enum class ReportFormat { kTable, kCsv, kJson };

/// Parses "table" | "csv" | "json"; throws lynx::Error naming the allowed values.
ReportFormat parse_report_format(const std::string& text);

/// Writes `result` in `format`: the table for people; CSV with `#` comment lines (version,
/// resolved scenario), a header and one row per pipeline stage; JSON as one object.
void write_report(std::ostream& out, const SimResult& result, ReportFormat format);

/// What ran, in words, for the table header: the strategy, the requested one when the engine
/// kept another, and whether anything was recomputed at all.
std::string strategy_sentence(const SimResult& result);

/// The lynxsim version string, e.g. "0.1.0".
const char* lynxsim_version();

}  // namespace lynx::runner
