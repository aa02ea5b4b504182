#pragma once
/// Writes simulation results for people (table) and programs (CSV, JSON). Every format
/// carries the program version and the resolved scenario.
#include "runner/simulate.hpp"

#include <iosfwd>
#include <string>

namespace lynx {

enum class ReportFormat { kTable, kCsv, kJson };

/// Parses "table" | "csv" | "json"; throws lynx::Error naming the allowed values.
ReportFormat parse_report_format(const std::string& text);

void write_report(std::ostream& out, const SimResult& result, ReportFormat format);

/// The lynxsim version string, e.g. "0.1.0".
const char* lynxsim_version();

}  // namespace lynx
