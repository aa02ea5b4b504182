#pragma once
/// The map file behind `lynxsim figures --maps` (results/maps/maps.yaml, described in
/// results/maps/README.md): maps of Lynx's speedup over two axes of scenario keys, each map a
/// base scenario with overrides, drawn once per variant (a set of overrides applied to every
/// map, e.g. Megatron-Core's TP-comm overlap). Every error names the file:line:col and the key.
#include <string>
#include <string_view>
#include <vector>

namespace lynx::maps {

/// The axis key that is not a scenario key: micro-batches per pipeline. Value m sets
/// parallel.global_batch = m × parallel.micro_batch × parallel.dp of the cell's scenario, so
/// the pipeline's bubble share changes while each micro-batch's memory and kernels do not.
inline constexpr std::string_view kMicroBatchesKey = "micro_batches";

/// One axis of a map: scenario keys that take the same values together (a PCIe link and its
/// switch uplink), or micro_batches.
struct MapAxis {
  std::string label;   ///< what the plot writes on the axis (default: the keys)
  std::string origin;  ///< file:line:col of the axis in the map file
  std::vector<std::string> keys;
  std::vector<std::string> values;  ///< each value as the first key's field writes it (the CSV cell)
  /// Per value, the `KEY=VALUE` overrides that apply it (empty for micro_batches).
  std::vector<std::vector<std::string>> overrides;
  bool micro_batches = false;  ///< the micro_batches axis: values are m
};

/// Overrides applied to every map: one configuration the maps are drawn for.
struct MapVariant {
  std::string name;
  std::string title;   ///< for the plot (default: the name)
  std::string origin;  ///< file:line:col
  std::vector<std::string> overrides;  ///< its `set:` as `KEY=VALUE`
};

/// One map: a base scenario, its own overrides and two axes.
struct MapDefinition {
  std::string name;
  std::string title;  ///< for the plot (default: the name)
  std::string origin;
  std::string base_text;   ///< YAML text of the base scenario
  std::string base_label;  ///< its file, for messages
  std::vector<std::string> overrides;  ///< its `set:` as `KEY=VALUE`
  MapAxis x, y;
  /// `variants:` the names of the variants it is drawn for (every variant when empty): a model
  /// a variant's settings do not apply to (TP-comm overlap and mixtures of experts) skips it.
  std::vector<std::string> variants;
  bool drawn_for(const MapVariant& variant) const;
};

/// A read, checked map file.
struct MapFile {
  std::string label;
  std::vector<MapVariant> variants;  ///< at least one; without `variants:` one named "megatron"
  std::vector<MapDefinition> maps;   ///< at least one, names unique
};

/// Reads and checks a map file.
MapFile read_map_file(const std::string& path);
/// Same, from text; `label` names the file in messages and resolves the bases' paths.
MapFile read_map_text(std::string_view text, const std::string& label);

/// Keeps the maps named in `names` (all when empty), in file order. lynx::Error for a name
/// that matches no map.
MapFile select_maps(const MapFile& file, const std::vector<std::string>& names);

}  // namespace lynx::maps
