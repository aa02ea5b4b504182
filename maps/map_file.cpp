#include "maps/map_file.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "scenarios/fields.hpp"
#include "scenarios/scenario_loader.hpp"
#include "scenarios/yaml_document.hpp"
#include "sweep/grid.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

namespace lynx::maps {
namespace {

namespace fs = std::filesystem;

/// Most micro-batches per pipeline an axis may ask for (parallel.global_batch's own limit).
constexpr std::int64_t kMaxMicroBatches = 16'777'216;

/// The entries of a YAML map in file order, each key checked against `allowed` and given once;
/// `handle(key, key_node, value)` reads each.
void read_entries(const YAML::Node& node, const std::string& label, const std::string& what,
                  const std::vector<std::string>& allowed,
                  const std::function<void(const std::string&, const YAML::Node&, const YAML::Node&)>& handle) {
  if (!node.IsMap())
    fail(ErrorCode::kWrongShape, "{}: {}: expected a map with keys {}", yaml_position(label, node.Mark()), what,
         fmt::join(allowed, ", "));
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;
    const std::string origin = yaml_position(label, key_node.Mark());
    const std::string key = key_node.IsScalar() ? key_node.Scalar() : std::string();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      fail(ErrorCode::kUnknownKey, "{}: unknown key '{}' in {} (expected {})", origin, key, what, fmt::join(allowed, ", "));
    if (!seen.insert(key).second) fail(ErrorCode::kDuplicateKey, "{}: key '{}' in {}: given twice", origin, key, what);
    handle(key, key_node, it->second);
  }
}

/// Fails unless every key of `required` was read.
void require(const std::set<std::string>& given, const std::vector<std::string>& required, const std::string& origin,
             const std::string& what) {
  for (const std::string& key : required)
    if (given.count(key) == 0) fail(ErrorCode::kMissingKey, "{}: {}: key '{}' missing", origin, what, key);
}

std::string scalar_text(const YAML::Node& value, const std::string& label, const std::string& what) {
  if (!value.IsScalar() || value.IsNull())
    fail(ErrorCode::kWrongShape, "{}: {}: expected a single value", yaml_position(label, value.Mark()), what);
  return value.Scalar();
}

bool is_scenario_key(const std::string& key) { return scenario_fields_by_key().count(key) != 0; }

/// `set:` — a map of scenario keys to values, each value checked by its field's parser.
std::vector<std::string> read_set(const YAML::Node& node, const std::string& label, const std::string& what) {
  std::vector<std::string> overrides;
  if (node.IsNull()) return overrides;
  if (!node.IsMap())
    fail(ErrorCode::kWrongShape, "{}: {}: key 'set': expected a map of scenario keys to values",
         yaml_position(label, node.Mark()), what);
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string origin = yaml_position(label, it->first.Mark());
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string();
    if (!is_scenario_key(key))
      fail(ErrorCode::kUnknownKey, "{}: {}: unknown key '{}' in set (lynxsim fields lists the scenario keys)", origin,
           what, key);
    if (!seen.insert(key).second) fail(ErrorCode::kDuplicateKey, "{}: {}: set: key '{}' given twice", origin, what, key);
    const sweep::Axis one = sweep::read_axis(it->first, it->second, label);
    if (one.overrides.size() != 1)
      fail(ErrorCode::kWrongShape, "{}: {}: set: key '{}' takes one value", origin, what, key);
    overrides.push_back(one.overrides.front());
  }
  return overrides;
}

/// The values of the micro_batches axis: a list of positive integers.
std::vector<std::string> micro_batch_values(const YAML::Node& values, const std::string& label,
                                            const std::string& what) {
  if (!values.IsSequence())
    fail(ErrorCode::kWrongShape, "{}: {}: micro_batches takes a list of integers", yaml_position(label, values.Mark()),
         what);
  std::vector<std::string> out;
  for (const YAML::Node& item : values) {
    const std::string origin = yaml_position(label, item.Mark());
    const std::string text = item.IsScalar() ? item.Scalar() : std::string();
    std::int64_t m = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), m);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      fail(ErrorCode::kWrongType, "{}: {}: micro_batches: expected an integer, got '{}'", origin, what, text);
    if (m < 1 || m > kMaxMicroBatches)
      fail(ErrorCode::kOutOfRange, "{}: {}: micro_batches: {} is not in [1, {}]", origin, what, m, kMaxMicroBatches);
    if (std::find(out.begin(), out.end(), text) != out.end())
      fail(ErrorCode::kDuplicateKey, "{}: {}: micro_batches: value {} is given twice", origin, what, text);
    out.push_back(text);
  }
  return out;
}

/// `x:` or `y:` — {label, keys (one key or a list), values (a list or a range)}.
MapAxis read_axis(const YAML::Node& node, const std::string& label, const std::string& what) {
  MapAxis axis;
  axis.origin = yaml_position(label, node.Mark());
  std::vector<YAML::Node> key_nodes;
  YAML::Node values;
  std::set<std::string> given;
  read_entries(node, label, what, {"label", "keys", "values"},
               [&](const std::string& key, const YAML::Node&, const YAML::Node& value) {
                 given.insert(key);
                 if (key == "label") axis.label = scalar_text(value, label, what + ": label");
                 if (key == "values") values = value;
                 if (key == "keys") {
                   if (value.IsSequence()) {
                     for (const YAML::Node& k : value) key_nodes.push_back(k);
                   } else {
                     key_nodes.push_back(value);
                   }
                   if (key_nodes.empty())
                     fail(ErrorCode::kMissingKey, "{}: {}: keys: give at least one scenario key",
                          yaml_position(label, value.Mark()), what);
                 }
               });
  require(given, {"keys", "values"}, axis.origin, what);
  for (const YAML::Node& key_node : key_nodes) {
    const std::string key = scalar_text(key_node, label, what + ": keys");
    if (std::find(axis.keys.begin(), axis.keys.end(), key) != axis.keys.end())
      fail(ErrorCode::kDuplicateKey, "{}: {}: key '{}' given twice", yaml_position(label, key_node.Mark()), what, key);
    axis.keys.push_back(key);
    if (key == kMicroBatchesKey) {
      if (key_nodes.size() != 1)
        fail(ErrorCode::kIncompatibleSettings, "{}: {}: micro_batches is an axis of its own (no other keys with it)",
             yaml_position(label, key_node.Mark()), what);
      axis.micro_batches = true;
      axis.values = micro_batch_values(values, label, what);
      axis.overrides.assign(axis.values.size(), {});
      continue;
    }
    // The sweep grid's axis reader: unknown keys, values each checked by the key's field.
    const sweep::Axis one = sweep::read_axis(key_node, values, label);
    if (axis.values.empty()) {
      axis.values = one.values;
      axis.overrides.resize(one.values.size());
    }
    for (std::size_t i = 0; i < one.overrides.size(); ++i) axis.overrides[i].push_back(one.overrides[i]);
  }
  if (axis.label.empty()) axis.label = fmt::format("{}", fmt::join(axis.keys, " = "));
  return axis;
}

MapVariant read_variant(const YAML::Node& node, const std::string& label) {
  MapVariant variant;
  variant.origin = yaml_position(label, node.Mark());
  std::set<std::string> given;
  read_entries(node, label, "variant", {"name", "title", "set"},
               [&](const std::string& key, const YAML::Node&, const YAML::Node& value) {
                 given.insert(key);
                 if (key == "name") variant.name = scalar_text(value, label, "variant: name");
                 if (key == "title") variant.title = scalar_text(value, label, "variant: title");
                 if (key == "set") variant.overrides = read_set(value, label, "variant");
               });
  require(given, {"name"}, variant.origin, "variant");
  if (variant.title.empty()) variant.title = variant.name;
  return variant;
}

MapDefinition read_map(const YAML::Node& node, const std::string& label) {
  MapDefinition map;
  map.origin = yaml_position(label, node.Mark());
  std::set<std::string> given;
  read_entries(node, label, "map", {"name", "title", "base", "set", "x", "y", "variants"},
               [&](const std::string& key, const YAML::Node&, const YAML::Node& value) {
                 given.insert(key);
                 const std::string what = fmt::format("map '{}'", map.name);
                 if (key == "name") map.name = scalar_text(value, label, "map: name");
                 if (key == "title") map.title = scalar_text(value, label, what + ": title");
                 if (key == "set") map.overrides = read_set(value, label, what);
                 if (key == "x") map.x = read_axis(value, label, what + ": x");
                 if (key == "y") map.y = read_axis(value, label, what + ": y");
                 if (key == "variants") {
                   if (!value.IsSequence() || value.size() == 0)
                     fail(ErrorCode::kWrongShape, "{}: {}: key 'variants': expected a non-empty list of variant names",
                          yaml_position(label, value.Mark()), what);
                   for (const YAML::Node& name : value)
                     map.variants.push_back(scalar_text(name, label, what + ": variants"));
                 }
                 if (key == "base") {
                   fs::path path(scalar_text(value, label, what + ": base"));
                   if (path.is_relative()) path = fs::path(label).parent_path() / path;
                   map.base_label = path.lexically_normal().string();
                   try {
                     map.base_text = read_text_file(map.base_label, "base scenario");
                   } catch (const Error& e) {
                     fail(e.code(), "{}: key 'base': {}", yaml_position(label, value.Mark()), e.what());
                   }
                 }
               });
  require(given, {"name", "base", "x", "y"}, map.origin, fmt::format("map '{}'", map.name));
  for (const std::string& key : map.x.keys)
    if (std::find(map.y.keys.begin(), map.y.keys.end(), key) != map.y.keys.end())
      fail(ErrorCode::kDuplicateKey, "{}: map '{}': key '{}' is on both axes", map.y.origin, map.name, key);
  if (map.title.empty()) map.title = map.name;
  // The base must read by itself: a problem in it is the map file's error, not a cell's.
  read_scenario_text(map.base_text, map.base_label, {});
  return map;
}

}  // namespace

MapFile read_map_text(std::string_view text, const std::string& label) {
  MapFile file;
  file.label = label;
  const YAML::Node root = load_single_document(std::string(text), label);
  if (root.IsNull()) fail(ErrorCode::kMissingKey, "{}:1:1: a map file needs 'maps'", label);
  std::set<std::string> given;
  read_entries(root, label, "the map file", {"variants", "maps"},
               [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) {
                 given.insert(key);
                 if (!value.IsSequence() || value.size() == 0)
                   fail(ErrorCode::kWrongShape, "{}: key '{}': expected a non-empty list",
                        yaml_position(label, key_node.Mark()), key);
                 for (const YAML::Node& item : value) {
                   if (key == "variants") file.variants.push_back(read_variant(item, label));
                   if (key == "maps") file.maps.push_back(read_map(item, label));
                 }
               });
  require(given, {"maps"}, label + ":1:1", "the map file");
  if (file.variants.empty()) file.variants.push_back({"megatron", "Megatron-LM defaults", label + ":1:1", {}});
  std::set<std::string> names;
  for (const MapDefinition& map : file.maps)
    if (!names.insert(map.name).second)
      fail(ErrorCode::kDuplicateKey, "{}: map name '{}' is given twice", map.origin, map.name);
  names.clear();
  for (const MapVariant& variant : file.variants)
    if (!names.insert(variant.name).second)
      fail(ErrorCode::kDuplicateKey, "{}: variant name '{}' is given twice", variant.origin, variant.name);
  for (const MapDefinition& map : file.maps)
    for (const std::string& name : map.variants)
      if (names.count(name) == 0)
        fail(ErrorCode::kUnknownKey, "{}: map '{}': key 'variants': no variant is named '{}' (there are: {})", map.origin,
             map.name, name, fmt::join(names, ", "));
  return file;
}

bool MapDefinition::drawn_for(const MapVariant& variant) const {
  return variants.empty() || std::find(variants.begin(), variants.end(), variant.name) != variants.end();
}

MapFile read_map_file(const std::string& path) { return read_map_text(read_text_file(path, "map file"), path); }

MapFile select_maps(const MapFile& file, const std::vector<std::string>& names) {
  if (names.empty()) return file;
  MapFile out = file;
  out.maps.clear();
  std::vector<std::string> all;
  for (const MapDefinition& map : file.maps) {
    all.push_back(map.name);
    if (std::find(names.begin(), names.end(), map.name) != names.end()) out.maps.push_back(map);
  }
  for (const std::string& name : names)
    if (std::find(all.begin(), all.end(), name) == all.end())
      fail(ErrorCode::kInvalidOption, "--map-names: '{}' matches no map in {} (there are: {})", name, file.label,
           fmt::join(all, ", "));
  return out;
}

}  // namespace lynx::maps
