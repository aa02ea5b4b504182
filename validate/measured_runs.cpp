#include "validate/measured_runs.hpp"

#include "common/checked.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

namespace lynx::validate {

namespace {

/// The core columns: header name and, for the vTrain form, the description its messages use.
/// Order = the vTrain column order; the integers first, the time (ms) last.
struct CoreColumn {
  const char* name;
  const char* description;
};
constexpr std::size_t kCoreInts = 10;
constexpr std::size_t kVtrainColumns = kCoreInts + 1;
constexpr std::array<CoreColumn, kVtrainColumns> kCore = {{{"gpus", "GPUs"},
                                                           {"global_batch", "global batch"},
                                                           {"micro_batch", "micro batch"},
                                                           {"hidden", "hidden size"},
                                                           {"heads", "attention heads"},
                                                           {"layers", "layers"},
                                                           {"seq_len", "sequence length"},
                                                           {"tp", "tensor parallelism"},
                                                           {"dp", "data parallelism"},
                                                           {"pp", "pipeline parallelism"},
                                                           {"iteration_ms", "iteration time (ms)"}}};
constexpr const char* kSecondsColumn = "iteration_s";
/// Per-layer measurements (Korthikanti et al. 2022 Table 4 style): one transformer layer's
/// forward and backward time in ms, instead of or beside the iteration time.
constexpr std::array<const char*, 2> kLayerColumns = {"layer_forward_ms", "layer_backward_ms"};

/// Scenario keys the core columns set (by kCore index), the model preset and the profile
/// choice: a settings column may not name them.
constexpr std::array<const char*, kCoreInts> kCoreKeys = {
    "",           "parallel.global_batch", "parallel.micro_batch", "model.hidden", "model.heads",
    "model.layers", "model.seq_len",       "parallel.tp",          "parallel.dp",  "parallel.pp"};

/// Where each column of a row goes.
struct Layout {
  std::vector<std::string> names;         ///< per column: its name in messages
  std::array<std::size_t, kCoreInts> ints{};  ///< column of each integer core column
  std::optional<std::size_t> time;        ///< column of the measured iteration time
  double time_to_ms = 1;                  ///< 1000 for iteration_s
  std::array<std::optional<std::size_t>, 2> layer;  ///< columns of kLayerColumns
  /// (column, scenario key) of each settings column, in header order.
  std::vector<std::pair<std::size_t, std::string>> settings;
};

Layout vtrain_layout() {
  Layout layout;
  for (std::size_t c = 0; c < kVtrainColumns; ++c) layout.names.emplace_back(kCore[c].description);
  for (std::size_t c = 0; c < kCoreInts; ++c) layout.ints[c] = c;
  layout.time = kCoreInts;
  return layout;
}

std::vector<std::string_view> split_fields(std::string_view row) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = row.find(',', start);
    fields.push_back(trim(
        row.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}


/// Why `key` cannot be a settings column; nothing when it can.
std::optional<std::string> refused_setting(const std::string& key, const FieldDesc& field) {
  for (std::size_t c = 0; c < kCoreInts; ++c)
    if (key == kCoreKeys[c])
      return fmt::format("the core column '{}' gives it", kCore[c].name);
  if (key == "model.preset")
    return std::string("the core columns give the model shape (layers, hidden, heads, seq_len)");
  if (field.selects_profile)
    return std::string("the profile is chosen for the whole file (validate --profile or --profile-file)");
  return std::nullopt;
}

/// The scenario key a settings column's name stands for; throws naming the column.
std::string setting_key(const std::string& name, const std::string& where, std::size_t column) {
  std::string key = name;
  for (const auto& [alias, target] : row_setting_aliases())
    if (name == alias) key = target;
  const auto& fields = scenario_fields_by_key();
  const auto it = fields.find(key);
  if (it == fields.end()) {
    std::string core;
    for (const CoreColumn& c : kCore) core += std::string(c.name) + ", ";
    std::string aliases;
    for (const auto& [alias, target] : row_setting_aliases())
      aliases += (aliases.empty() ? "" : ", ") + alias;
    fail(ErrorCode::kBadCsvHeader, "{}: column {} '{}' is not a known column (core: {}{}; settings: a scenario key as "
         "`lynxsim fields` lists them, or {})",
         where, column + 1, name, core, kSecondsColumn, aliases);
  }
  if (const auto why = refused_setting(key, it->second))
    fail(ErrorCode::kBadCsvHeader, "{}: column {} '{}' cannot be a settings column: {}", where, column + 1, name, *why);
  return key;
}

Layout header_layout(std::string_view row, const std::string& where) {
  Layout layout;
  std::array<std::optional<std::size_t>, kCoreInts> ints;
  std::optional<std::size_t>& time = layout.time;
  const std::vector<std::string_view> names = split_fields(row);
  for (std::size_t c = 0; c < names.size(); ++c) {
    const std::string name(names[c]);
    layout.names.push_back(name);
    if (name.empty()) fail(ErrorCode::kBadCsvHeader, "{}: column {} of the header has no name", where, c + 1);
    if (name == kCore[kCoreInts].name || name == kSecondsColumn) {
      if (time)
        fail(ErrorCode::kBadCsvHeader, "{}: columns {} and {} both give the measured time: give one of {} and {}", where,
             *time + 1, c + 1, kCore[kCoreInts].name, kSecondsColumn);
      time = c;
      layout.time_to_ms = name == kSecondsColumn ? 1000.0 : 1.0;
      continue;
    }
    const auto layer = std::find(kLayerColumns.begin(), kLayerColumns.end(), name);
    if (layer != kLayerColumns.end()) {
      std::optional<std::size_t>& slot = layout.layer[static_cast<std::size_t>(layer - kLayerColumns.begin())];
      if (slot) fail(ErrorCode::kBadCsvHeader, "{}: columns {} and {} are both '{}'", where, *slot + 1, c + 1, name);
      slot = c;
      continue;
    }
    bool core = false;
    for (std::size_t k = 0; k < kCoreInts; ++k) {
      if (name != kCore[k].name) continue;
      if (ints[k]) fail(ErrorCode::kBadCsvHeader, "{}: columns {} and {} are both '{}'", where, *ints[k] + 1, c + 1, name);
      ints[k] = c;
      core = true;
    }
    if (core) continue;
    const std::string key = setting_key(name, where, c);
    for (const auto& [other, other_key] : layout.settings)
      if (other_key == key)
        fail(ErrorCode::kBadCsvHeader, "{}: columns {} '{}' and {} '{}' both set {}", where, other + 1, layout.names[other],
             c + 1, name, key);
    layout.settings.emplace_back(c, key);
  }
  for (std::size_t k = 0; k < kCoreInts; ++k) {
    if (!ints[k])
      fail(ErrorCode::kBadCsvHeader, "{}: the header has no '{}' column (a first line whose first field is not a number "
           "is the header)",
           where, kCore[k].name);
    layout.ints[k] = *ints[k];
  }
  if (layout.layer[0].has_value() != layout.layer[1].has_value())
    fail(ErrorCode::kBadCsvHeader, "{}: per-layer times come in pairs: the header has '{}' without '{}'", where,
         kLayerColumns[layout.layer[0] ? 0 : 1], kLayerColumns[layout.layer[0] ? 1 : 0]);
  if (!time && !layout.layer[0])
    fail(ErrorCode::kBadCsvHeader, "{}: the header has no measured time: add a column {} or {} (or the per-layer pair {}, {})",
         where, kCore[kCoreInts].name, kSecondsColumn, kLayerColumns[0], kLayerColumns[1]);
  return layout;
}

/// A positive integer cell; the whole field must be the number.
int positive_int(std::string_view field, const std::string& where, std::size_t column,
                 const std::string& name) {
  int value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size() || value <= 0)
    fail(ErrorCode::kBadCsvRow, "{}: column {} ({}): '{}' is not a positive integer", where, column + 1, name, field);
  return value;
}

/// A positive finite number cell (std::from_chars for double needs GCC 11+, which we have).
double positive_number(std::string_view field, const std::string& where, std::size_t column,
                       const std::string& name) {
  double value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size() || !std::isfinite(value) ||
      value <= 0)
    fail(ErrorCode::kBadCsvRow, "{}: column {} ({}): '{}' is not a positive number", where, column + 1, name, field);
  return value;
}

MeasuredRun parse_row(std::string_view row, const Layout& layout, const std::string& where,
                      int line) {
  const std::vector<std::string_view> fields = split_fields(row);
  if (fields.size() != layout.names.size())
    fail(ErrorCode::kBadCsvRow, "{}: expected {} comma-separated columns, got {}", where, layout.names.size(),
         fields.size());
  MeasuredRun run;
  run.line = line;
  int* const ints[kCoreInts] = {&run.gpus, &run.global_batch, &run.micro_batch, &run.hidden,
                                &run.heads, &run.layers, &run.seq_len, &run.tp, &run.dp, &run.pp};
  for (std::size_t k = 0; k < kCoreInts; ++k) {
    const std::size_t c = layout.ints[k];
    *ints[k] = positive_int(fields[c], where, c, layout.names[c]);
  }
  if (layout.time) {
    const std::size_t c = *layout.time;
    run.iteration_ms = positive_number(fields[c], where, c, layout.names[c]) * layout.time_to_ms;
    if (!std::isfinite(run.iteration_ms))
      fail(ErrorCode::kBadCsvRow, "{}: column {} ({}): '{}' is too large", where, c + 1, layout.names[c], fields[c]);
  }
  if (layout.layer[0]) {
    run.layer_forward_ms = positive_number(fields[*layout.layer[0]], where, *layout.layer[0], layout.names[*layout.layer[0]]);
    run.layer_backward_ms = positive_number(fields[*layout.layer[1]], where, *layout.layer[1], layout.names[*layout.layer[1]]);
  }
  for (const auto& [c, key] : layout.settings) {
    if (fields[c].empty()) continue;  // this row keeps the default
    Scenario scratch;
    try {
      row_setting_field(key).set(scratch, fields[c]);
    } catch (const Error& e) {
      fail(ErrorCode::kBadCsvRow, "{}: column {} ({}): {}", where, c + 1, layout.names[c], e.what());
    }
    run.settings.push_back({key, layout.names[c], std::string(fields[c])});
  }
  if (try_product({run.tp, run.dp, run.pp}) != run.gpus)
    fail(ErrorCode::kInconsistentCsvRow, "{}: tp · dp · pp = {} · {} · {} does not equal the {} GPUs of the row", where, run.tp,
         run.dp, run.pp, run.gpus);
  if (run.global_batch % checked_product(fmt::format("{}: micro batch · dp", where),
                                         {run.micro_batch, run.dp}) != 0)
    fail(ErrorCode::kInconsistentCsvRow, "{}: global batch {} is not divisible by micro batch · dp = {} · {}", where,
         run.global_batch, run.micro_batch, run.dp);
  return run;
}

/// A first data line whose first field is not a number is the header.
bool is_header(std::string_view row) {
  const std::string_view first = split_fields(row).front();
  return first.empty() || !std::isdigit(static_cast<unsigned char>(first.front()));
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& row_setting_aliases() {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"recompute", "recompute.strategy"},
      {"recompute_method", "recompute.method"},
      {"recompute_num_layers", "recompute.num_layers"},
      {"sequence_parallel", "parallel.sequence_parallel"},
      {"virtual_stages", "parallel.virtual_stages"},
      {"schedule", "parallel.schedule"},
      {"distributed_optimizer", "parallel.distributed_optimizer"},
      {"ffn_hidden", "model.ffn_hidden"},
      {"vocab", "model.vocab"},
      {"flash_attention", "model.flash_attention"},
  };
  return aliases;
}

const FieldDesc& row_setting_field(const std::string& key) {
  const auto& fields = scenario_fields_by_key();
  const auto it = fields.find(key);
  if (it == fields.end() || refused_setting(key, it->second))
    fail(ErrorCode::kBadCsvHeader, "'{}' is not a scenario key a measured row may set", key);
  return it->second;
}

std::vector<MeasuredRun> parse_measured_runs(std::string_view text, const std::string& file_label) {
  std::vector<MeasuredRun> runs;
  std::optional<Layout> layout;
  bool header = false;
  int line = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view row = trim(text.substr(start, end - start));
    ++line;
    start = end + 1;
    if (row.empty() || row.front() == '#') continue;
    const std::string where = file_label + ":" + std::to_string(line);
    if (!layout) {
      header = is_header(row);
      layout = header ? header_layout(row, where) : vtrain_layout();
      if (header) continue;  // the header line itself
    }
    runs.push_back(parse_row(row, *layout, where, line));
  }
  if (runs.empty())
    fail(ErrorCode::kEmptyCsv, "{}: no measured rows (only blank or '#' lines{})", file_label, header ? " and the header" : "");
  return runs;
}

std::vector<MeasuredRun> load_measured_runs(const std::string& path) {
  return parse_measured_runs(read_text_file(path, "measurements CSV"), path);
}

void require_iteration_times(const std::vector<MeasuredRun>& runs, const std::string& file_label) {
  for (const MeasuredRun& r : runs)
    if (!(r.iteration_ms > 0))
      fail(ErrorCode::kBadCsvHeader, "{}:{}: no measured iteration time (the file gives per-layer times: score them with "
           "`lynxsim validate {} --components`)", file_label, r.line, file_label);
}

void require_layer_times(const std::vector<MeasuredRun>& runs, const std::string& file_label) {
  for (const MeasuredRun& r : runs)
    if (!(r.layer_forward_ms > 0))
      fail(ErrorCode::kBadCsvHeader, "{}:{}: no measured per-layer times: --components needs the columns {} and {}",
           file_label, r.line, kLayerColumns[0], kLayerColumns[1]);
}

}  // namespace lynx::validate
