#include "validate/measured_runs.hpp"

#include "common/checked.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace lynx::validate {

namespace {

constexpr std::size_t kColumns = 11;
constexpr std::array<const char*, kColumns> kColumnNames = {
    "GPUs",           "global batch",       "micro batch",       "hidden size",
    "attention heads", "layers",            "sequence length",   "tensor parallelism",
    "data parallelism", "pipeline parallelism", "iteration time (ms)"};

/// A positive integer column; the whole field must be the number.
int positive_int(std::string_view field, const std::string& where, std::size_t column) {
  int value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size() || value <= 0)
    fail(ErrorCode::kBadCsvRow, "{}: column {} ({}): '{}' is not a positive integer", where, column + 1,
         kColumnNames[column], field);
  return value;
}

/// A positive finite number column (std::from_chars for double needs GCC 11+, which we have).
double positive_number(std::string_view field, const std::string& where, std::size_t column) {
  double value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size() || !std::isfinite(value) ||
      value <= 0)
    fail(ErrorCode::kBadCsvRow, "{}: column {} ({}): '{}' is not a positive number", where, column + 1,
         kColumnNames[column], field);
  return value;
}

MeasuredRun parse_row(std::string_view row, const std::string& where, int line) {
  std::array<std::string_view, kColumns> fields{};
  std::size_t count = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = row.find(',', start);
    const std::string_view field =
        trim(row.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (count < kColumns) fields[count] = field;
    ++count;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (count != kColumns) fail(ErrorCode::kBadCsvRow, "{}: expected {} comma-separated columns, got {}", where, kColumns, count);
  MeasuredRun run;
  run.line = line;
  int* const ints[] = {&run.gpus, &run.global_batch, &run.micro_batch, &run.hidden, &run.heads,
                       &run.layers, &run.seq_len, &run.tp, &run.dp, &run.pp};
  for (std::size_t c = 0; c + 1 < kColumns; ++c) *ints[c] = positive_int(fields[c], where, c);
  run.iteration_ms = positive_number(fields[kColumns - 1], where, kColumns - 1);
  if (try_product({run.tp, run.dp, run.pp}) != run.gpus)
    fail(ErrorCode::kInconsistentCsvRow, "{}: tp · dp · pp = {} · {} · {} does not equal the {} GPUs of the row", where, run.tp,
         run.dp, run.pp, run.gpus);
  if (run.global_batch % checked_product(fmt::format("{}: micro batch · dp", where),
                                         {run.micro_batch, run.dp}) != 0)
    fail(ErrorCode::kInconsistentCsvRow, "{}: global batch {} is not divisible by micro batch · dp = {} · {}", where,
         run.global_batch, run.micro_batch, run.dp);
  return run;
}

}  // namespace

std::vector<MeasuredRun> parse_measured_runs(std::string_view text, const std::string& file_label) {
  std::vector<MeasuredRun> runs;
  int line = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view row = trim(text.substr(start, end - start));
    ++line;
    start = end + 1;
    if (row.empty() || row.front() == '#') continue;
    runs.push_back(parse_row(row, file_label + ":" + std::to_string(line), line));
  }
  if (runs.empty()) fail(ErrorCode::kEmptyCsv, "{}: no measured rows (only blank or '#' lines)", file_label);
  return runs;
}

std::vector<MeasuredRun> load_measured_runs(const std::string& path) {
  return parse_measured_runs(read_text_file(path, "measurements CSV"), path);
}

}  // namespace lynx::validate
