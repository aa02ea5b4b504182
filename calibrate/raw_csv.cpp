#include "calibrate/raw_csv.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <ostream>
#include <sstream>
#include <system_error>

namespace lynx::calibrate {

namespace {

constexpr std::array<std::pair<MeasurementKind, std::string_view>, 6> kKindNames{{
    {MeasurementKind::kGemm, "gemm"},
    {MeasurementKind::kAttention, "attention"},
    {MeasurementKind::kMemoryBound, "memory_bound"},
    {MeasurementKind::kLaunch, "launch"},
    {MeasurementKind::kCollective, "collective"},
    {MeasurementKind::kContention, "contention"},
}};
constexpr std::array<std::string_view, 4> kDtypes{"bf16", "fp16", "fp32", ""};
constexpr std::array<std::string_view, 4> kScopes{"device", "intra", "inter", "standin"};
/// The collectives the fitter models (its ring costs): refused here, where the row's line is known.
constexpr std::array<std::string_view, 4> kCollectives{"all_reduce", "all_gather", "reduce_scatter", "send_recv"};

template <std::size_t N>
bool one_of(std::string_view value, const std::array<std::string_view, N>& allowed) {
  for (std::string_view a : allowed)
    if (a == value) return true;
  return false;
}

template <std::size_t N>
std::string joined(const std::array<std::string_view, N>& words) {
  std::string out;
  for (std::string_view w : words) {
    if (!out.empty()) out += ", ";
    out += w.empty() ? "(empty)" : std::string(w);
  }
  return out;
}

void check_text_field(std::string_view column, std::string_view value) {
  if (value.find_first_of(",\"\r\n") != std::string_view::npos)
    fail(ErrorCode::kInternal, "raw CSV column '{}' must not contain a comma, quote or line break: '{}'", column, value);
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> cells;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      cells.push_back(line.substr(start));
      return cells;
    }
    cells.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

/// Parses one cell as T (an integer or double) or throws "LABEL:LINE: column 'c': ...".
template <typename T>
T parse_number(std::string_view cell, const std::string& where, std::string_view column) {
  cell = trim(cell);
  T value{};
  const char* first = cell.data();
  const char* last = cell.data() + cell.size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (cell.empty() || ec != std::errc() || ptr != last) {
    if constexpr (std::is_floating_point_v<T>)
      fail(ErrorCode::kBadCsvRow, "{}: column '{}': expected a number, got '{}'", where, column, cell);
    else if constexpr (std::is_unsigned_v<T>)
      fail(ErrorCode::kBadCsvRow, "{}: column '{}': expected a non-negative integer, got '{}'", where, column, cell);
    else
      fail(ErrorCode::kBadCsvRow, "{}: column '{}': expected an integer, got '{}'", where, column, cell);
  }
  return value;
}

int parse_int(std::string_view cell, const std::string& where, std::string_view column) {
  return parse_number<int>(cell, where, column);
}

Measurement parse_row(std::string_view line, const std::string& where) {
  const std::vector<std::string_view> cells = split_commas(line);
  const std::vector<std::string>& columns = raw_csv_columns();
  if (cells.size() != columns.size())
    fail(ErrorCode::kBadCsvRow, "{}: expected {} comma-separated columns ({}), got {}", where, columns.size(),
         raw_csv_header_line(), cells.size());
  Measurement row;
  row.kind = [&] {
    try {
      return parse_measurement_kind(trim(cells[0]));
    } catch (const Error& e) {
      fail(e.code(), "{}: column 'kind': {}", where, e.what());
    }
  }();
  row.name = std::string(trim(cells[1]));
  if (row.name.empty()) fail(ErrorCode::kBadCsvRow, "{}: column 'name' is empty", where);
  if (row.kind == MeasurementKind::kCollective && !one_of(row.name, kCollectives))
    fail(ErrorCode::kBadCsvRow, "{}: column 'name': unknown collective '{}' (one of {})", where, row.name,
         joined(kCollectives));
  row.dtype = std::string(trim(cells[2]));
  if (!one_of(row.dtype, kDtypes))
    fail(ErrorCode::kBadCsvRow, "{}: column 'dtype': '{}' is not one of {}", where, row.dtype, joined(kDtypes));
  row.m = parse_number<std::int64_t>(cells[3], where, "m");
  row.n = parse_number<std::int64_t>(cells[4], where, "n");
  row.k = parse_number<std::int64_t>(cells[5], where, "k");
  row.batch = parse_number<std::int64_t>(cells[6], where, "batch");
  row.bytes = parse_number<std::uint64_t>(cells[7], where, "bytes");
  row.ranks = parse_int(cells[8], where, "ranks");
  row.nodes = parse_int(cells[9], where, "nodes");
  row.scope = std::string(trim(cells[10]));
  row.time_us_median = parse_number<double>(cells[11], where, "time_us_median");
  row.time_us_p10 = parse_number<double>(cells[12], where, "time_us_p10");
  row.time_us_p90 = parse_number<double>(cells[13], where, "time_us_p90");
  row.reps = parse_int(cells[14], where, "reps");

  if (row.m < 0 || row.n < 0 || row.k < 0)
    fail(ErrorCode::kBadCsvRow, "{}: GEMM dimensions must be >= 0, got m {} n {} k {}", where, row.m, row.n, row.k);
  if (row.batch < 1) fail(ErrorCode::kBadCsvRow, "{}: column 'batch' must be >= 1, got {}", where, row.batch);
  if (row.ranks < 1) fail(ErrorCode::kBadCsvRow, "{}: column 'ranks' must be >= 1, got {}", where, row.ranks);
  if (row.nodes < 1 || row.nodes > row.ranks)
    fail(ErrorCode::kInconsistentCsvRow, "{}: column 'nodes' must be in [1, ranks = {}], got {}", where, row.ranks, row.nodes);
  if (!one_of(row.scope, kScopes))
    fail(ErrorCode::kBadCsvRow, "{}: column 'scope': '{}' is not one of {}", where, row.scope, joined(kScopes));
  for (const auto& [column, value] :
       std::array<std::pair<std::string_view, double>, 3>{{{"time_us_median", row.time_us_median},
                                                           {"time_us_p10", row.time_us_p10},
                                                           {"time_us_p90", row.time_us_p90}}})
    if (!std::isfinite(value) || value <= 0.0)
      fail(ErrorCode::kBadCsvRow, "{}: column '{}' must be a positive finite time in microseconds, got {}", where,
           column, value);
  if (row.time_us_p10 > row.time_us_median || row.time_us_median > row.time_us_p90)
    fail(ErrorCode::kInconsistentCsvRow, "{}: percentiles out of order: p10 {} <= median {} <= p90 {} does not hold", where,
         row.time_us_p10, row.time_us_median, row.time_us_p90);
  if (row.reps < 1) fail(ErrorCode::kBadCsvRow, "{}: column 'reps' must be >= 1, got {}", where, row.reps);
  return row;
}

}  // namespace

std::string_view to_string(MeasurementKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return name;
  LYNX_CHECK(false, "unknown MeasurementKind {}", static_cast<int>(kind));
  return {};
}

MeasurementKind parse_measurement_kind(std::string_view text) {
  for (const auto& [kind, name] : kKindNames)
    if (name == text) return kind;
  std::string valid;
  for (const auto& entry : kKindNames) {
    if (!valid.empty()) valid += ", ";
    valid += entry.second;
  }
  fail(ErrorCode::kBadCsvRow, "unknown measurement kind '{}' (valid: {})", text, valid);
}

std::string RawMeasurements::metadata_value(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return v;
  return {};
}

std::string RawMeasurements::device_name() const {
  std::string device = metadata_value("device");
  return device.empty() ? std::string("unknown device") : device;
}

const std::vector<std::string>& raw_csv_columns() {
  static const std::vector<std::string> kColumns{
      "kind",  "name",  "dtype", "m",     "n",
      "k",     "batch", "bytes", "ranks", "nodes",
      "scope", "time_us_median", "time_us_p10", "time_us_p90", "reps"};
  return kColumns;
}

std::string raw_csv_header_line() {
  std::string line;
  for (const std::string& column : raw_csv_columns()) {
    if (!line.empty()) line += ',';
    line += column;
  }
  return line;
}

std::string format_raw_csv_row(const Measurement& row) {
  check_text_field("name", row.name);
  check_text_field("dtype", row.dtype);
  check_text_field("scope", row.scope);
  // fmt's "{}" for double is the shortest representation that reads back to the same value.
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", to_string(row.kind), row.name,
                     row.dtype, row.m, row.n, row.k, row.batch, row.bytes, row.ranks, row.nodes,
                     row.scope, row.time_us_median, row.time_us_p10, row.time_us_p90, row.reps);
}

namespace {
void write_metadata(std::ostream& out,
                    const std::vector<std::pair<std::string, std::string>>& metadata) {
  for (const auto& [key, value] : metadata) {
    if (key.empty() || key.find_first_of(":\r\n") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos)
      fail(ErrorCode::kInternal, "raw CSV metadata key '{}' must be non-empty without ':' or line breaks, and its "
           "value one line",
           key);
    out << "# " << key << ": " << value << '\n';
  }
}
}  // namespace

void write_raw_csv(std::ostream& out, const RawMeasurements& raw) {
  write_metadata(out, raw.metadata);
  out << raw_csv_header_line() << '\n';
  for (const Measurement& row : raw.rows) out << format_raw_csv_row(row) << '\n';
}

void write_raw_csv_file(const std::string& path, const RawMeasurements& raw) {
  std::ofstream out(path);
  if (!out) fail(ErrorCode::kWriteFailed, "cannot open '{}' for writing", path);
  write_raw_csv(out, raw);
  out.flush();
  if (!out) fail(ErrorCode::kWriteFailed, "error writing '{}'", path);
}

RawMeasurements parse_raw_csv(std::string_view text, const std::string& label) {
  RawMeasurements raw;
  raw.source_label = label;
  bool header_seen = false;
  std::size_t line_number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_number;
    const std::string where = fmt::format("{}:{}", label, line_number);
    if (line.empty()) continue;
    if (line.front() == '#') {
      if (header_seen) continue;  // comments after the header carry no metadata
      const std::string_view body = trim(line.substr(1));
      const std::size_t colon = body.find(':');
      if (colon == std::string_view::npos) continue;  // a free-text comment
      raw.metadata.emplace_back(std::string(trim(body.substr(0, colon))),
                                std::string(trim(body.substr(colon + 1))));
      continue;
    }
    if (!header_seen) {
      if (line != raw_csv_header_line())
        fail(ErrorCode::kBadCsvHeader, "{}: expected the raw CSV header '{}', got '{}'", where, raw_csv_header_line(), line);
      header_seen = true;
      continue;
    }
    raw.rows.push_back(parse_row(line, where));
  }
  if (!header_seen)
    fail(ErrorCode::kBadCsvHeader, "{}: no header line '{}' found (is this a lynxsim-calibrate raw CSV?)", label,
         raw_csv_header_line());
  return raw;
}

RawMeasurements read_raw_csv(const std::string& path) {
  return parse_raw_csv(read_text_file(path, "raw measurements CSV"), path);
}

RawMeasurements merge_raw(const std::vector<RawMeasurements>& parts) {
  RawMeasurements merged;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const RawMeasurements& part = parts[i];
    for (const auto& [key, value] : part.metadata) {
      if (i == 0) {
        merged.metadata.emplace_back(key, value);
      } else if (merged.metadata_value(key) != value) {
        merged.metadata.emplace_back(fmt::format("file{}.{}", i + 1, key), value);
      }
    }
    merged.rows.insert(merged.rows.end(), part.rows.begin(), part.rows.end());
    if (!merged.source_label.empty()) merged.source_label += ", ";
    merged.source_label += part.source_label;
  }
  return merged;
}

struct RawCsvWriter::File {
  std::ofstream out;
};

RawCsvWriter::RawCsvWriter(const std::string& path,
                           const std::vector<std::pair<std::string, std::string>>& metadata)
    : path_(path), file_(std::make_unique<File>()) {
  file_->out.open(path);
  if (!file_->out) fail(ErrorCode::kWriteFailed, "cannot open '{}' for writing", path);
  write_metadata(file_->out, metadata);
  file_->out << raw_csv_header_line() << '\n';
  file_->out.flush();
  if (!file_->out) fail(ErrorCode::kWriteFailed, "error writing '{}'", path);
}

RawCsvWriter::~RawCsvWriter() = default;

void RawCsvWriter::append(const Measurement& row) {
  file_->out << format_raw_csv_row(row) << '\n';
  file_->out.flush();
  if (!file_->out) fail(ErrorCode::kWriteFailed, "error writing '{}'", path_);
  ++rows_written_;
}

}  // namespace lynx::calibrate
