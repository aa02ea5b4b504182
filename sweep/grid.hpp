#pragma once
/// A sweep grid file (docs/sweep.md): a base scenario, axes of values for scenario keys and
/// `where:` filters. Points are the cartesian product of the axes in file order, the last axis
/// varying fastest (nested loops written top to bottom); point i's values are the mixed-radix
/// digits of i. Every error names the grid's file:line:col and the key.
#include "scenarios/scenario.hpp"
#include "scenarios/scenario_loader.hpp"
#include "sweep/filter.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lynx::sweep {

/// One axis: a scenario key and the values it takes, in order.
struct Axis {
  std::string key;
  std::string origin;  ///< file:line:col of the key in the grid
  /// Each value as an override `KEY=VALUE` applies it (quoted when YAML would misread it).
  std::vector<std::string> overrides;
  /// Each value as the scenario field writes it back (units normalised): the row's cell.
  std::vector<std::string> values;
};

/// A parsed, checked grid.
struct Grid {
  std::string label;       ///< the grid file, for messages
  std::string base_text;   ///< YAML text of the base scenario
  std::string base_label;  ///< its file (or the grid file for an inline base: positions match)
  /// base_text parsed once: every point is read from it with its overrides.
  std::shared_ptr<const ParsedScenario> base;
  std::vector<Axis> axes;
  std::vector<Filter> filters;
  /// 16 hex digits of a hash of the grid text and the base file's text (resume checks it).
  std::string hash;

  /// Points in the product (1 without axes).
  std::uint64_t point_count() const;
  /// Point `index`'s value index on each axis.
  std::vector<std::size_t> digits(std::uint64_t index) const;
  /// The `--set`-style overrides of point `index`, one per axis.
  std::vector<std::string> overrides(std::uint64_t index) const;
  /// Point `index`'s scenario as the loader reads it (the base with the point's overrides).
  UnresolvedScenario read_point(std::uint64_t index) const;
  /// The row cells of point `index`, one per axis.
  std::vector<std::string> values(std::uint64_t index) const;
};

/// Most points a grid may have (a product beyond it is an error, not an endless run).
inline constexpr std::uint64_t kMaxGridPoints = std::uint64_t{1} << 40;

/// The value of scenario key `key` in `scenario`, as its field writes it ("2", "600GB/s").
std::string scenario_value(const Scenario& scenario, const std::string& key);

/// Reads one axis `key_node: value` (a list of values, a range or one value), each value checked
/// by its scenario field's parser; errors name `label`:line:col. The map file reuses it.
Axis read_axis(const YAML::Node& key_node, const YAML::Node& value, const std::string& label);

/// Reads and checks a grid file.
Grid read_grid_file(const std::string& path);
/// Same, from text; `label` is the file name used in messages and to resolve a base path.
Grid read_grid_text(std::string_view text, const std::string& label);

}  // namespace lynx::sweep
