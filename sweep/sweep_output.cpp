#include "sweep/sweep_output.hpp"

#include "common/error.hpp"
#include "common/text.hpp"
#include "runner/report.hpp"
#include "sim/json.hpp"
#include "sweep/filter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>

namespace lynx::sweep {
namespace {

namespace fs = std::filesystem;
using runner::FieldValue;

/// Columns of the stdout table besides point and axes (the full set is in the files).
constexpr const char* kTableFields[] = {"strategy", "oom", "iteration_time_s", "tokens_per_s", "mfu",
                                        "peak_memory_bytes"};

/// An axis value as a typed cell: JSON writes numbers and true/false unquoted.
FieldValue typed_value(const std::string& text) {
  const FilterValue v = FilterValue::of_field_text(text);
  switch (v.kind) {
    case FilterValue::Kind::kBool: return FieldValue::of_bool(v.flag);
    case FilterValue::Kind::kNumber:
      if (v.number == std::floor(v.number) && std::abs(v.number) < 9e15)
        return FieldValue::of_int(static_cast<std::int64_t>(v.number));
      return FieldValue::of_real(v.number);
    case FilterValue::Kind::kText: break;
  }
  return FieldValue::of_text(text);
}

}  // namespace

OutputFormat output_format_for(const std::string& path) {
  if (path.empty()) return OutputFormat::kTable;
  const std::string extension = fs::path(path).extension().string();
  if (extension == ".csv") return OutputFormat::kCsv;
  if (extension == ".jsonl") return OutputFormat::kJsonLines;
  fail(ErrorCode::kInvalidOption, "-o {}: expected a .csv or .jsonl file (the format follows the extension)", path);
}

RowWriter::RowWriter(const Grid& grid, OutputFormat format) : grid_(grid), format_(format) {
  for (const runner::ResultField* field : runner::fields_of(runner::FieldLevel::kRun, true))
    if (!field->wall_clock) fields_.push_back(field);
  for (const Axis& axis : grid.axes) {
    const bool clash = axis.key == "point" ||
                       std::any_of(fields_.begin(), fields_.end(),
                                   [&](const runner::ResultField* f) { return axis.key == f->name; });
    if (clash) fail(ErrorCode::kIncompatibleSettings, "{}: axis '{}': the name of a result column; it cannot be an axis", axis.origin, axis.key);
  }
}

std::string RowWriter::header() const {
  std::vector<std::string> names = {"point"};
  for (const Axis& axis : grid_.axes) names.push_back(axis.key);
  for (const runner::ResultField* field : fields_) names.emplace_back(field->name);
  switch (format_) {
    case OutputFormat::kTable: return {};
    case OutputFormat::kCsv: {
      std::string line;
      for (const std::string& name : names) {
        if (!line.empty()) line += ',';
        line += runner::csv_cell(FieldValue::of_text(name));
      }
      return fmt::format(
          "# lynxsim {} sweep, grid hash {}: one row per valid point, in point order; times are "
          "simulated (wall times left out); docs/sweep.md\n{}\n",
          runner::lynxsim_version(), grid_.hash, line);
    }
    case OutputFormat::kJsonLines: {
      std::string columns;
      for (const std::string& name : names) {
        if (!columns.empty()) columns += ',';
        columns += sim::json_string(name);
      }
      return fmt::format(R"({{"lynxsim_sweep":{},"grid_hash":"{}","points":{},"columns":[{}]}})" "\n",
                         sim::json_string(runner::lynxsim_version()), grid_.hash, grid_.point_count(),
                         columns);
    }
  }
  return {};
}

std::string RowWriter::row_start(std::uint64_t index) const {
  const std::vector<std::string> values = grid_.values(index);
  std::string out;
  switch (format_) {
    case OutputFormat::kTable:
      out = std::to_string(index);
      for (const std::string& v : values) out += '\x1f' + v;
      return out;
    case OutputFormat::kCsv:
      out = std::to_string(index);
      for (const std::string& v : values) out += ',' + runner::csv_cell(FieldValue::of_text(v));
      return out;
    case OutputFormat::kJsonLines:
      out = fmt::format(R"({{"point":{})", index);
      for (std::size_t a = 0; a < values.size(); ++a)
        out += fmt::format(",{}:{}", sim::json_string(grid_.axes[a].key), runner::json_literal(typed_value(values[a])));
      return out;
  }
  return out;
}

std::string RowWriter::row(std::uint64_t index, const runner::SimResult& result) const {
  const runner::StageBreakdown no_stage;  // run-level fields only
  std::string out = row_start(index);
  switch (format_) {
    case OutputFormat::kTable:
      for (const char* name : kTableFields) {
        const auto field = std::find_if(fields_.begin(), fields_.end(),
                                        [&](const runner::ResultField* f) { return std::string_view(f->name) == name; });
        LYNX_CHECK(field != fields_.end(), "table column '{}' is not a result field", name);
        out += '\x1f' + runner::csv_cell((*field)->value(result, no_stage));
      }
      return out;
    case OutputFormat::kCsv:
      for (const runner::ResultField* f : fields_) out += ',' + runner::csv_cell(f->value(result, no_stage));
      return out + "\n";
    case OutputFormat::kJsonLines:
      for (const runner::ResultField* f : fields_)
        out += fmt::format(",{}:{}", sim::json_string(f->name), runner::json_literal(f->value(result, no_stage)));
      return out + "}\n";
  }
  return out;
}

std::string RowWriter::table(const std::vector<std::string>& rows) const {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> head = {"point"};
  for (const Axis& axis : grid_.axes) head.push_back(axis.key);
  for (const char* name : kTableFields) head.emplace_back(name);
  cells.push_back(head);
  for (const std::string& row : rows) {
    std::vector<std::string> line;
    for (std::string_view cell : split(row, '\x1f')) line.emplace_back(cell);
    cells.push_back(std::move(line));
  }
  std::vector<std::size_t> width(head.size(), 0);
  for (const auto& line : cells)
    for (std::size_t c = 0; c < line.size() && c < width.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t c = 0; c < line.size(); ++c) text += fmt::format("{:<{}}  ", line[c], width[c]);
    out += std::string(trim(text)) + "\n";
  }
  return out;
}

ExistingRows read_existing_rows(const std::string& path, const RowWriter& writer, const Grid& grid) {
  ExistingRows existing;
  std::error_code ec;
  if (!fs::exists(path, ec)) return existing;
  if (!fs::is_regular_file(path, ec)) fail(ErrorCode::kNotRegularFile, "-o {}: not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kReadFailed, "-o {}: cannot read it to resume", path);
  const std::string header = writer.header();
  std::string start(header.size(), '\0');
  in.read(start.data(), static_cast<std::streamsize>(header.size()));
  start.resize(static_cast<std::size_t>(in.gcount()));
  if (start != header) {
    // A file cut inside its header holds no row yet: start it again.
    if (start.size() < header.size() && header.compare(0, start.size(), start) == 0) return existing;
    // The first line that differs (the header is comment lines, then the column line).
    const std::size_t differs = static_cast<std::size_t>(
        std::mismatch(start.begin(), start.end(), header.begin()).first - start.begin());
    const auto line = 1 + std::count(start.begin(), start.begin() + static_cast<std::ptrdiff_t>(differs), '\n');
    fail(ErrorCode::kOutputMismatch, "-o {}:{}: the file holds another sweep (its header differs from this grid's: another "
         "grid or base scenario, lynxsim version or column set); remove it or choose another "
         "file",
         path, line);
  }
  existing.resume = true;
  existing.keep_bytes = header.size();
  std::string line;
  std::size_t line_number = static_cast<std::size_t>(std::count(header.begin(), header.end(), '\n'));
  while (std::getline(in, line)) {
    ++line_number;
    if (in.eof()) break;  // no line break after it: a row cut off while being written
    // The point number leads the row: "12," in CSV, {"point":12, in JSON lines.
    const std::size_t digits = writer.format() == OutputFormat::kJsonLines ? 9 : 0;
    std::uint64_t index = 0;
    std::size_t i = digits;
    bool number = i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]));
    for (; i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])); ++i)
      index = index * 10 + static_cast<std::uint64_t>(line[i] - '0');
    const bool ascending = existing.points.empty() || index > existing.points.back();
    const std::string expected = number && index < grid.point_count() ? writer.row_start(index) : std::string();
    if (!number || !ascending || index >= grid.point_count() ||
        line.compare(0, expected.size(), expected) != 0 || line.size() == expected.size() ||
        (line[expected.size()] != ',' && line[expected.size()] != '}'))
      fail(ErrorCode::kOutputMismatch, "{}:{}: not a row of this sweep in point order; remove the file or choose another -o",
           path, line_number);
    existing.points.push_back(index);
    existing.keep_bytes += line.size() + 1;
  }
  return existing;
}

OutputStream::OutputStream(const std::string& path, const RowWriter& writer, const ExistingRows& existing)
    : path_(path) {
  if (existing.resume) {
    std::error_code ec;
    fs::resize_file(path, existing.keep_bytes, ec);
    if (ec) fail(ErrorCode::kWriteFailed, "-o {}: cannot cut off its partial last row: {}", path, ec.message());
    out_.open(path, std::ios::binary | std::ios::app);
  } else {
    out_.open(path, std::ios::binary | std::ios::trunc);
  }
  if (!out_) fail(ErrorCode::kWriteFailed, "-o {}: cannot open it for writing", path);
  if (!existing.resume) write(writer.header());
}

void OutputStream::write(const std::string& text) {
  out_ << text;
  out_.flush();
  if (!out_) fail(ErrorCode::kWriteFailed, "-o {}: cannot write it (disk full?)", path_);
}

void OutputStream::close() {
  out_.close();
  if (out_.fail()) fail(ErrorCode::kWriteFailed, "-o {}: cannot write it (disk full?)", path_);
}

}  // namespace lynx::sweep
