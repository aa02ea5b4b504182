#pragma once
/// `lynxsim figures --maps`: every cell of every map (map file: maps/map_file.hpp) under each
/// variant simulated with none, full, selective, checkmate and lynx-heu in fast mode, on an
/// ordered thread pool (the same bytes for any thread count); each map's best and worst cells
/// run again in exact mode. Written as one CSV (one row per cell) that results/plot_maps.py
/// draws.
#include "maps/map_file.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace lynx::maps {

/// The strategies of a cell, in CSV order: Megatron's three, then checkmate and lynx-heu.
inline constexpr std::array<const char*, 5> kMapStrategies = {"none", "full", "selective", "checkmate", "lynx-heu"};
/// Megatron's strategies are the first kMegatronStrategies of kMapStrategies.
inline constexpr std::size_t kMegatronStrategies = 3;
inline constexpr std::size_t kCheckmate = 3;
inline constexpr std::size_t kLynxHeu = 4;

/// One strategy's simulation in one cell.
struct StrategyRun {
  bool oom = false;
  double tokens_per_s = 0;
  std::string plan;  ///< the plan that ran (SimResult::strategy)
};

/// One simulation mode's runs of a cell's strategies.
struct CellRuns {
  std::array<StrategyRun, kMapStrategies.size()> runs;

  /// The fastest Megatron strategy that fits (index into kMapStrategies), if any.
  std::optional<std::size_t> best_megatron() const;
  /// lynx-heu's tokens/s ÷ the best Megatron strategy's that fits; empty when either OOMs.
  std::optional<double> speedup_vs_megatron() const;
  /// lynx-heu's tokens/s ÷ checkmate's; empty when either OOMs.
  std::optional<double> speedup_vs_checkmate() const;
};

/// One cell of one map under one variant.
struct MapCell {
  std::size_t map = 0, variant = 0, x = 0, y = 0;  ///< indices into the file's lists and axes
  /// Why the cell has no runs (sweep::skip_reason of the loader's message); empty when valid.
  std::string invalid_reason;
  std::string invalid_message;  ///< the whole message
  int gpus = 0;
  int micro_batches = 0;
  std::int64_t global_batch = 0;
  CellRuns fast;
  std::optional<CellRuns> exact;  ///< the map's best and worst cells only
  std::vector<std::string> confirmed_as;  ///< why it ran exact: "best-vs-megatron", ...

  /// ok, invalid, oom (nothing fits), lynx-only (no Megatron strategy fits), lynx-oom.
  std::string status() const;
};

/// What the run did, for its summary.
struct MapSummary {
  std::size_t cells = 0, invalid = 0, fast_runs = 0, exact_runs = 0;
  int threads = 1;
  double seconds = 0;
};

/// How to run the maps.
struct MapRequest {
  int threads = 0;      ///< 0: the machine's cores
  bool confirm = true;  ///< run the best and worst cells in exact mode
  /// Called from the taking thread with (done, total, what) after each simulation.
  std::function<void(std::size_t, std::size_t, const std::string&)> progress;
};

/// Every cell of `file`: maps in file order, then variants, then y, then x.
std::vector<MapCell> run_maps(const MapFile& file, const MapRequest& request, MapSummary* summary = nullptr);

/// The CSV header's columns, in order.
const std::vector<std::string>& map_csv_columns();

/// The CSV: `#` comment lines, the header, one row per cell. No wall times: the same cells give
/// the same bytes.
void write_map_csv(std::ostream& out, const MapFile& file, const std::vector<MapCell>& cells);

/// Per map and variant, fast against exact mode at the confirmed cells, for people.
std::string confirmation_text(const MapFile& file, const std::vector<MapCell>& cells);

}  // namespace lynx::maps
