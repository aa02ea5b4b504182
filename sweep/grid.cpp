#include "sweep/grid.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "scenarios/fields.hpp"
#include "scenarios/scenario_loader.hpp"
#include "scenarios/yaml_document.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

namespace lynx::sweep {
namespace {

namespace fs = std::filesystem;

/// Most values one range may produce.
constexpr std::size_t kMaxRangeValues = 1'000'000;

std::string position(const std::string& label, const YAML::Mark& mark) {
  if (mark.is_null()) return label + ":1:1";
  return fmt::format("{}:{}:{}", label, mark.line + 1, mark.column + 1);  // yaml-cpp is 0-based
}

/// 64-bit FNV-1a of `parts`, each followed by a 0 byte.
std::string hash_hex(const std::vector<std::string_view>& parts) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::string_view part : parts) {
    for (const char c : part) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}


/// Fails for an axis key the scenario lacks, with the loader's own message (and suggestion).
[[noreturn]] void unknown_key(const std::string& origin, const std::string& key) {
  std::string hint;
  try {
    read_scenario_text("", "grid", {key + "=1"});
  } catch (const Error& e) {
    const std::string message = e.what();
    const std::size_t at = message.find("unknown key");
    const std::size_t section = message.find("is a section");
    if (at != std::string::npos) hint = message.substr(message.find(';', at) == std::string::npos
                                                           ? message.size()
                                                           : message.find(';', at));
    if (section != std::string::npos) hint = "; it is a section: give one of its keys";
  }
  fail(ErrorCode::kUnknownKey, "{}: unknown key '{}' in axes{}", origin, key, hint);
}

/// `text` as an override value that the override parser reads back as exactly `text`.
std::string override_value(const std::string& text) {
  try {
    const YAML::Node node = YAML::Load(text);
    if (node.IsScalar() && node.Scalar() == text) return text;
  } catch (const YAML::Exception&) {
  }
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

struct Number {
  double value = 0;
  bool integral = false;
};

Number number_at(const YAML::Node& node, const std::string& origin, const std::string& what) {
  if (!node.IsScalar()) fail(ErrorCode::kWrongType, "{}: {}: expected a number", origin, what);
  const std::string& text = node.Scalar();
  Number n;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, n.value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(n.value))
    fail(ErrorCode::kWrongType, "{}: {}: expected a number, got '{}'", origin, what, text);
  n.integral = text.find_first_of(".eE") == std::string::npos;
  return n;
}

std::string number_text(double x, bool integral) {
  if (integral) return fmt::format("{}", static_cast<long long>(std::llround(x)));
  return fmt::format("{:.12g}", x);
}

/// The values of a range `{from, to, step}` or `{from, to, times}`.
std::vector<std::string> range_values(const YAML::Node& node, const std::string& label,
                                      const std::string& key) {
  std::map<std::string, YAML::Node> given;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node k = it->first;
    const std::string name = k.IsScalar() ? k.Scalar() : std::string();
    if (name != "from" && name != "to" && name != "step" && name != "times")
      fail(ErrorCode::kUnknownKey, "{}: axis '{}': unknown key '{}' in a range (expected from, to and step or times)",
           position(label, k.Mark()), key, name);
    given[name] = it->second;
  }
  const std::string origin = position(label, node.Mark());
  for (const char* needed : {"from", "to"})
    if (given.count(needed) == 0) fail(ErrorCode::kMissingKey, "{}: axis '{}': a range needs '{}'", origin, key, needed);
  if ((given.count("step") != 0) == (given.count("times") != 0))
    fail(ErrorCode::kBadRange, "{}: axis '{}': a range needs exactly one of 'step' (arithmetic) or 'times' (geometric)",
         origin, key);
  const Number from = number_at(given["from"], origin, fmt::format("axis '{}': from", key));
  const Number to = number_at(given["to"], origin, fmt::format("axis '{}': to", key));
  std::vector<std::string> values;
  auto add = [&](double x, bool integral) {
    if (values.size() >= kMaxRangeValues)
      fail(ErrorCode::kWorkTooLarge, "{}: axis '{}': the range has more than {} values", origin, key, kMaxRangeValues);
    values.push_back(number_text(x, integral));
  };
  if (given.count("step") != 0) {
    const Number step = number_at(given["step"], origin, fmt::format("axis '{}': step", key));
    if (step.value == 0 || (to.value - from.value) * step.value < 0)
      fail(ErrorCode::kBadRange, "{}: axis '{}': step {} does not lead from {} to {}", origin, key, step.value,
           from.value, to.value);
    const bool integral = from.integral && to.integral && step.integral;
    const double slack = 1e-9 * std::abs(step.value);
    for (std::size_t k = 0;; ++k) {
      const double x = from.value + static_cast<double>(k) * step.value;
      if (step.value > 0 ? x > to.value + slack : x < to.value - slack) break;
      add(x, integral);
    }
  } else {
    const Number times = number_at(given["times"], origin, fmt::format("axis '{}': times", key));
    if (times.value <= 1 || from.value <= 0 || to.value < from.value)
      fail(ErrorCode::kBadRange, "{}: axis '{}': a geometric range needs times > 1 and 0 < from <= to", origin, key);
    const bool integral = from.integral && times.integral;
    for (double x = from.value; x <= to.value * (1 + 1e-12); x *= times.value) add(x, integral);
  }
  return values;
}

}  // namespace

/// Reads one axis: a list of values or a range; each value checked by its field's parser.
Axis read_axis(const YAML::Node& key_node, const YAML::Node& value, const std::string& label) {
  Axis axis;
  axis.origin = position(label, key_node.Mark());
  if (!key_node.IsScalar()) fail(ErrorCode::kWrongShape, "{}: axis keys must be plain words", axis.origin);
  axis.key = key_node.Scalar();
  const auto field = scenario_fields_by_key().find(axis.key);
  if (field == scenario_fields_by_key().end()) unknown_key(axis.origin, axis.key);
  std::vector<std::pair<std::string, std::string>> texts;  // (value, origin)
  if (value.IsSequence()) {
    for (const YAML::Node& item : value) {
      const std::string origin = position(label, item.Mark());
      if (!item.IsScalar() || item.IsNull())
        fail(ErrorCode::kWrongShape, "{}: axis '{}': expected single values in the list", origin, axis.key);
      texts.emplace_back(item.Scalar(), origin);
    }
  } else if (value.IsMap()) {
    for (std::string& v : range_values(value, label, axis.key))
      texts.emplace_back(std::move(v), position(label, value.Mark()));
  } else if (value.IsScalar() && !value.IsNull()) {
    texts.emplace_back(value.Scalar(), position(label, value.Mark()));
  } else {
    fail(ErrorCode::kWrongShape, "{}: axis '{}': expected a list of values or a range {{from, to, step}}", axis.origin,
         axis.key);
  }
  if (texts.empty()) fail(ErrorCode::kBadRange, "{}: axis '{}': no values", axis.origin, axis.key);
  std::set<std::string> seen;
  for (const auto& [text, origin] : texts) {
    Scenario scratch;
    try {
      field->second.set(scratch, text);
    } catch (const Error& e) {
      fail(e.code(), "{}: axis '{}': value '{}': {}", origin, axis.key, text, e.what());
    }
    std::string canonical = field->second.get(scratch);
    if (!seen.insert(canonical).second)
      fail(ErrorCode::kDuplicateKey, "{}: axis '{}': value '{}' is given twice", origin, axis.key, text);
    axis.overrides.push_back(axis.key + "=" + override_value(text));
    axis.values.push_back(std::move(canonical));
  }
  return axis;
}

namespace {

/// The inline base mapping as text of its own in which every line and column is where it is in
/// the grid file: everything outside [begin, end) becomes spaces (line breaks stay).
std::string inline_base_text(std::string_view grid_text, std::size_t begin, std::size_t end) {
  std::string text(grid_text);
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((i < begin || i >= end) && text[i] != '\n' && text[i] != '\r') text[i] = ' ';
  return text;
}

}  // namespace

std::uint64_t Grid::point_count() const {
  std::uint64_t n = 1;
  for (const Axis& axis : axes) n *= axis.values.size();
  return n;
}

std::vector<std::size_t> Grid::digits(std::uint64_t index) const {
  std::vector<std::size_t> out(axes.size());
  for (std::size_t a = axes.size(); a-- > 0;) {
    const std::uint64_t radix = axes[a].values.size();
    out[a] = static_cast<std::size_t>(index % radix);
    index /= radix;
  }
  return out;
}

std::vector<std::string> Grid::overrides(std::uint64_t index) const {
  const std::vector<std::size_t> d = digits(index);
  std::vector<std::string> out;
  for (std::size_t a = 0; a < axes.size(); ++a) out.push_back(axes[a].overrides[d[a]]);
  return out;
}

std::vector<std::string> Grid::values(std::uint64_t index) const {
  const std::vector<std::size_t> d = digits(index);
  std::vector<std::string> out;
  for (std::size_t a = 0; a < axes.size(); ++a) out.push_back(axes[a].values[d[a]]);
  return out;
}

Grid read_grid_text(std::string_view text, const std::string& label) {
  Grid grid;
  grid.label = label;
  const YAML::Node root = load_single_document(std::string(text), label);
  if (!root.IsMap()) fail(ErrorCode::kWrongShape, "{}:1:1: a sweep grid is a map with base, axes and where", label);
  std::string base_file_text;
  bool have_base = false;
  // Top-level keys in file order, with where each starts (the inline base ends at the next).
  std::vector<std::pair<YAML::Node, YAML::Node>> entries;
  for (auto it = root.begin(); it != root.end(); ++it) entries.emplace_back(it->first, it->second);
  std::set<std::string> seen;
  std::set<std::string> axis_keys;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& [key_node, value] = entries[i];
    const std::string origin = position(label, key_node.Mark());
    const std::string key = key_node.IsScalar() ? key_node.Scalar() : std::string();
    if (!seen.insert(key).second) fail(ErrorCode::kDuplicateKey, "{}: key '{}': given twice", origin, key);
    if (key == "base") {
      have_base = true;
      if (value.IsScalar() && !value.IsNull()) {
        fs::path path(value.Scalar());
        if (path.is_relative()) path = fs::path(label).parent_path() / path;
        grid.base_label = path.lexically_normal().string();
        try {
          base_file_text = read_text_file(grid.base_label, "base scenario");
        } catch (const Error& e) {
          fail(e.code(), "{}: key 'base': {}", position(label, value.Mark()), e.what());
        }
        grid.base_text = base_file_text;
      } else if (value.IsMap()) {
        const std::size_t begin = static_cast<std::size_t>(value.Mark().pos);
        const std::size_t end = i + 1 < entries.size()
                                    ? static_cast<std::size_t>(entries[i + 1].first.Mark().pos)
                                    : text.size();
        grid.base_label = label;
        grid.base_text = inline_base_text(text, begin, end);
      } else {
        fail(ErrorCode::kWrongShape, "{}: key 'base': expected a scenario file (a path relative to the grid) or a "
             "scenario (a map)", origin);
      }
    } else if (key == "axes") {
      if (value.IsNull()) continue;
      if (!value.IsMap()) fail(ErrorCode::kWrongShape, "{}: key 'axes': expected a map of scenario keys to values", origin);
      for (auto it = value.begin(); it != value.end(); ++it) {
        Axis axis = read_axis(it->first, it->second, label);
        if (!axis_keys.insert(axis.key).second)
          fail(ErrorCode::kDuplicateKey, "{}: axis '{}': given twice", axis.origin, axis.key);
        grid.axes.push_back(std::move(axis));
      }
    } else if (key == "where") {
      std::vector<YAML::Node> expressions;
      if (value.IsSequence()) {
        for (const YAML::Node& item : value) expressions.push_back(item);
      } else {
        expressions.push_back(value);
      }
      for (const YAML::Node& item : expressions) {
        const std::string at = position(label, item.Mark());
        if (!item.IsScalar() || item.IsNull())
          fail(ErrorCode::kWrongShape, "{}: key 'where': expected an expression or a list of them", at);
        grid.filters.push_back(Filter::parse(item.Scalar(), at, [](const std::string& k) {
          return scenario_fields_by_key().count(k) != 0;
        }));
      }
    } else {
      fail(ErrorCode::kUnknownKey, "{}: unknown key '{}' in the sweep grid (expected base, axes, where)", origin, key);
    }
  }
  if (!have_base) fail(ErrorCode::kMissingKey, "{}:1:1: key 'base': missing; give a scenario file or an inline scenario", label);
  std::uint64_t points = 1;
  for (const Axis& axis : grid.axes) {
    if (points > kMaxGridPoints / axis.values.size())
      fail(ErrorCode::kWorkTooLarge, "{}: the grid has more than {} points", axis.origin, kMaxGridPoints);
    points *= axis.values.size();
  }
  grid.hash = hash_hex({text, base_file_text});
  // The base must read with the first point's values; a problem that no axis value caused
  // (an unknown key in the base, no hardware) is the grid's error, not a point's.
  try {
    grid.base = std::make_shared<const ParsedScenario>(grid.base_text, grid.base_label);
    grid.read_point(0);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.find(": --set ") == std::string::npos) fail(e.code(), "{}", message);
  }
  return grid;
}

UnresolvedScenario Grid::read_point(std::uint64_t index) const {
  LYNX_CHECK(base != nullptr, "grid {}: its base was not parsed", label);
  return base->read(overrides(index));
}

std::string scenario_value(const Scenario& scenario, const std::string& key) {
  const auto field = scenario_fields_by_key().find(key);
  LYNX_CHECK(field != scenario_fields_by_key().end(), "'{}' is not a scenario key", key);
  return field->second.get(scenario);
}

Grid read_grid_file(const std::string& path) {
  return read_grid_text(read_text_file(path, "sweep grid"), path);
}

}  // namespace lynx::sweep
