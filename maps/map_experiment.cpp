#include "maps/map_experiment.hpp"

#include "common/clock.hpp"
#include "common/error.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/report.hpp"
#include "runner/result_fields.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "sweep/ordered_pool.hpp"
#include "sweep/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <thread>

namespace lynx::maps {
namespace {

/// One strategy of one cell, simulated: the error that made the cell invalid, or its run.
struct RunOutcome {
  std::string error;
  StrategyRun run;
  int gpus = 0;
  int micro_batches = 0;
  std::int64_t global_batch = 0;
};

/// The cell's overrides: the map's `set:`, the variant's (which win over the map's), then the
/// axes' values (which win over both).
std::vector<std::string> cell_overrides(const MapFile& file, const MapCell& cell) {
  const MapDefinition& map = file.maps[cell.map];
  std::vector<std::string> out = map.overrides;
  const auto& variant = file.variants[cell.variant].overrides;
  out.insert(out.end(), variant.begin(), variant.end());
  for (const std::string& o : map.y.overrides[cell.y]) out.push_back(o);
  for (const std::string& o : map.x.overrides[cell.x]) out.push_back(o);
  return out;
}

/// The micro_batches value of the cell, if one of its axes is micro_batches.
std::optional<std::int64_t> micro_batches_of(const MapDefinition& map, const MapCell& cell) {
  if (map.x.micro_batches) return std::stoll(map.x.values[cell.x]);
  if (map.y.micro_batches) return std::stoll(map.y.values[cell.y]);
  return std::nullopt;
}

RunOutcome run_strategy(const MapFile& file, const MapCell& cell, std::size_t strategy, bool exact) {
  const MapDefinition& map = file.maps[cell.map];
  std::vector<std::string> overrides = cell_overrides(file, cell);
  overrides.push_back(fmt::format("recompute.strategy={}", kMapStrategies[strategy]));
  overrides.push_back(exact ? "sim.mode=exact" : "sim.mode=fast");
  RunOutcome out;
  try {
    UnresolvedScenario read = read_scenario_text(map.base_text, map.base_label, overrides);
    if (const auto m = micro_batches_of(map, cell)) {
      const ParallelSpec& p = read.scenario.parallel;
      overrides.push_back(fmt::format("parallel.global_batch={}", *m * p.micro_batch * p.dp));
      read = read_scenario_text(map.base_text, map.base_label, overrides);
    }
    const model::ResolvedScenario resolved = model::resolve_scenario(read);
    try {
      const runner::SimResult result = runner::simulate(resolved).result;
      out.run = {result.oom, result.tokens_per_s, result.strategy};
      out.gpus = result.gpus;
      out.micro_batches = result.micro_batches;
      out.global_batch = result.scenario.parallel.global_batch;
    } catch (const Error& e) {
      out.error = fmt::format("simulation failed: {}", e.what());
    }
  } catch (const Error& e) {
    out.error = e.what();
  }
  return out;
}

int thread_count(const MapRequest& request) {
  if (request.threads > 0) return request.threads;
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

/// Runs `strategies` per cell of `targets` on the pool; `take(target, strategy, outcome)` sees
/// them in order, on this thread.
void run_pool(const MapFile& file, const std::vector<MapCell>& cells, const std::vector<std::size_t>& targets,
              bool exact, int threads, const std::function<void(std::size_t, std::size_t, RunOutcome&&)>& take) {
  const std::size_t n = kMapStrategies.size();
  std::vector<std::uint64_t> items(targets.size() * n);
  for (std::size_t i = 0; i < items.size(); ++i) items[i] = i;
  sweep::OrderedPool<RunOutcome> pool(std::move(items), threads, [&](std::uint64_t i) {
    return run_strategy(file, cells[targets[i / n]], i % n, exact);
  });
  while (pool.has_next()) {
    auto [i, outcome] = pool.next();
    take(targets[i / n], i % n, std::move(outcome));
  }
}

std::string cell_label(const MapFile& file, const MapCell& cell) {
  const MapDefinition& map = file.maps[cell.map];
  return fmt::format("{} {} {}={} {}={}", map.name, file.variants[cell.variant].name, map.x.keys.front(),
                     map.x.values[cell.x], map.y.keys.front(), map.y.values[cell.y]);
}

/// The cells to confirm in exact mode: per map and variant, those with the largest and smallest
/// speedup over the best Megatron strategy and over checkmate (the first on ties).
std::vector<std::size_t> pick_confirmations(std::vector<MapCell>& cells) {
  std::map<std::pair<std::size_t, std::size_t>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < cells.size(); ++i)
    if (cells[i].invalid_reason.empty()) groups[{cells[i].map, cells[i].variant}].push_back(i);
  std::set<std::size_t> picked;
  for (const auto& [group, members] : groups) {
    for (const auto& [name, speedup] :
         {std::pair{"megatron", &CellRuns::speedup_vs_megatron}, {"checkmate", &CellRuns::speedup_vs_checkmate}}) {
      std::optional<std::size_t> best, worst;
      for (const std::size_t i : members) {
        const std::optional<double> s = (cells[i].fast.*speedup)();
        if (!s) continue;
        if (!best || *s > *(cells[*best].fast.*speedup)()) best = i;
        if (!worst || *s < *(cells[*worst].fast.*speedup)()) worst = i;
      }
      if (best) cells[*best].confirmed_as.push_back(fmt::format("best-vs-{}", name));
      if (worst) cells[*worst].confirmed_as.push_back(fmt::format("worst-vs-{}", name));
      for (const auto& i : {best, worst})
        if (i) picked.insert(*i);
    }
  }
  return {picked.begin(), picked.end()};
}

std::string real_cell(const std::optional<double>& x) {
  return x ? runner::csv_cell(runner::FieldValue::of_real(*x)) : std::string();
}

std::string text_cell(const std::string& s) { return runner::csv_cell(runner::FieldValue::of_text(s)); }

}  // namespace

std::optional<std::size_t> CellRuns::best_megatron() const {
  std::optional<std::size_t> best;
  for (std::size_t s = 0; s < kMegatronStrategies; ++s)
    if (!runs[s].oom && (!best || runs[s].tokens_per_s > runs[*best].tokens_per_s)) best = s;
  return best;
}

std::optional<double> CellRuns::speedup_vs_megatron() const {
  const auto best = best_megatron();
  if (!best || runs[kLynxHeu].oom) return std::nullopt;
  return runs[kLynxHeu].tokens_per_s / runs[*best].tokens_per_s;
}

std::optional<double> CellRuns::speedup_vs_checkmate() const {
  if (runs[kCheckmate].oom || runs[kLynxHeu].oom) return std::nullopt;
  return runs[kLynxHeu].tokens_per_s / runs[kCheckmate].tokens_per_s;
}

std::string MapCell::status() const {
  if (!invalid_reason.empty()) return "invalid";
  const bool any_fits = std::any_of(fast.runs.begin(), fast.runs.end(), [](const StrategyRun& r) { return !r.oom; });
  if (!any_fits) return "oom";
  if (fast.runs[kLynxHeu].oom) return "lynx-oom";
  if (!fast.best_megatron()) return "lynx-only";
  return "ok";
}

std::vector<MapCell> run_maps(const MapFile& file, const MapRequest& request, MapSummary* summary) {
  const WallClock::time_point start = WallClock::now();
  std::vector<MapCell> cells;
  for (std::size_t m = 0; m < file.maps.size(); ++m)
    for (std::size_t v = 0; v < file.variants.size(); ++v) {
      if (!file.maps[m].drawn_for(file.variants[v])) continue;
      for (std::size_t y = 0; y < file.maps[m].y.values.size(); ++y)
        for (std::size_t x = 0; x < file.maps[m].x.values.size(); ++x) {
          MapCell cell;
          cell.map = m;
          cell.variant = v;
          cell.x = x;
          cell.y = y;
          cells.push_back(std::move(cell));
        }
    }
  const int threads = thread_count(request);
  std::size_t done = 0, total = cells.size() * kMapStrategies.size();
  auto report = [&](const MapCell& cell, std::size_t strategy, bool exact) {
    if (request.progress)
      request.progress(++done, total,
                       fmt::format("{} {}{}", cell_label(file, cell), kMapStrategies[strategy], exact ? " exact" : ""));
  };

  std::vector<std::size_t> all(cells.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  run_pool(file, cells, all, false, threads, [&](std::size_t c, std::size_t s, RunOutcome&& outcome) {
    MapCell& cell = cells[c];
    if (!outcome.error.empty() && cell.invalid_reason.empty()) {
      cell.invalid_reason = sweep::skip_reason(outcome.error);
      cell.invalid_message = outcome.error;
    }
    if (outcome.error.empty()) {
      cell.gpus = outcome.gpus;
      cell.micro_batches = outcome.micro_batches;
      cell.global_batch = outcome.global_batch;
    }
    cell.fast.runs[s] = std::move(outcome.run);
    report(cell, s, false);
  });

  std::vector<std::size_t> confirm;
  if (request.confirm) confirm = pick_confirmations(cells);
  total += confirm.size() * kMapStrategies.size();
  run_pool(file, cells, confirm, true, threads, [&](std::size_t c, std::size_t s, RunOutcome&& outcome) {
    MapCell& cell = cells[c];
    if (!outcome.error.empty())
      fail(ErrorCode::kInternal, "{}: {} ran in fast mode but not in exact mode: {}", cell_label(file, cell),
           kMapStrategies[s], outcome.error);
    if (!cell.exact) cell.exact.emplace();
    cell.exact->runs[s] = std::move(outcome.run);
    report(cell, s, true);
  });

  if (summary) {
    summary->cells = cells.size();
    summary->invalid = static_cast<std::size_t>(
        std::count_if(cells.begin(), cells.end(), [](const MapCell& c) { return !c.invalid_reason.empty(); }));
    summary->fast_runs = cells.size() * kMapStrategies.size();
    summary->exact_runs = confirm.size() * kMapStrategies.size();
    summary->threads = threads;
    summary->seconds = seconds_since(start);
  }
  return cells;
}

const std::vector<std::string>& map_csv_columns() {
  static const std::vector<std::string> columns = [] {
    std::vector<std::string> c = {"map", "variant", "x_key", "x", "y_key", "y", "status", "reason",
                                  "gpus", "micro_batches", "global_batch"};
    for (const char* s : kMapStrategies) {
      std::string name = fmt::format("tokens_per_s_{}", s);
      std::replace(name.begin(), name.end(), '-', '_');
      c.push_back(name);
    }
    for (const char* n : {"lynx_heu_plan", "best_megatron", "speedup_vs_megatron", "speedup_vs_checkmate",
                          "confirmed_as", "exact_best_megatron", "exact_speedup_vs_megatron",
                          "exact_speedup_vs_checkmate", "title", "variant_title", "x_label", "y_label"})
      c.emplace_back(n);
    return c;
  }();
  return columns;
}

void write_map_csv(std::ostream& out, const MapFile& file, const std::vector<MapCell>& cells) {
  fmt::print(out,
             "# lynxsim {} — `lynxsim figures --maps`: {} maps x {} variants; throughput simulated, not measured "
             "(fast mode; exact_* columns: exact mode at each map's best and worst cells)\n",
             runner::lynxsim_version(), file.maps.size(), file.variants.size());
  fmt::print(out,
             "# tokens_per_s_* empty: that strategy is out of memory; speedup_vs_megatron = lynx-heu / the fastest of "
             "none, full, selective that fits; speedup_vs_checkmate = lynx-heu / checkmate\n");
  fmt::print(out, "{}\n", fmt::join(map_csv_columns(), ","));
  for (const MapCell& cell : cells) {
    const MapDefinition& map = file.maps[cell.map];
    const MapVariant& variant = file.variants[cell.variant];
    const bool valid = cell.invalid_reason.empty();
    std::vector<std::string> row = {text_cell(map.name), text_cell(variant.name),
                                    text_cell(fmt::format("{}", fmt::join(map.x.keys, "+"))), text_cell(map.x.values[cell.x]),
                                    text_cell(fmt::format("{}", fmt::join(map.y.keys, "+"))), text_cell(map.y.values[cell.y]),
                                    cell.status(), text_cell(cell.invalid_reason)};
    for (const std::int64_t n : {std::int64_t{cell.gpus}, std::int64_t{cell.micro_batches}, cell.global_batch})
      row.push_back(valid ? std::to_string(n) : std::string());
    for (const StrategyRun& run : cell.fast.runs)
      row.push_back(valid && !run.oom ? real_cell(run.tokens_per_s) : std::string());
    const auto best = valid ? cell.fast.best_megatron() : std::nullopt;
    row.push_back(valid ? text_cell(cell.fast.runs[kLynxHeu].plan) : std::string());
    row.push_back(best ? kMapStrategies[*best] : "");
    row.push_back(valid ? real_cell(cell.fast.speedup_vs_megatron()) : std::string());
    row.push_back(valid ? real_cell(cell.fast.speedup_vs_checkmate()) : std::string());
    row.push_back(fmt::format("{}", fmt::join(cell.confirmed_as, " ")));
    const auto exact_best = cell.exact ? cell.exact->best_megatron() : std::nullopt;
    row.push_back(exact_best ? kMapStrategies[*exact_best] : "");
    row.push_back(cell.exact ? real_cell(cell.exact->speedup_vs_megatron()) : std::string());
    row.push_back(cell.exact ? real_cell(cell.exact->speedup_vs_checkmate()) : std::string());
    for (const std::string* s : {&map.title, &variant.title, &map.x.label, &map.y.label}) row.push_back(text_cell(*s));
    fmt::print(out, "{}\n", fmt::join(row, ","));
  }
}

std::string confirmation_text(const MapFile& file, const std::vector<MapCell>& cells) {
  std::string out;
  for (const MapCell& cell : cells) {
    if (!cell.exact) continue;
    auto pct = [](const std::optional<double>& fast, const std::optional<double>& exact) {
      if (!fast || !exact) return fmt::format("fast {} exact {}", fast ? fmt::format("{:.3f}", *fast) : "-",
                                              exact ? fmt::format("{:.3f}", *exact) : "-");
      return fmt::format("fast {:.3f} exact {:.3f} ({:+.2f}%)", *fast, *exact, 100 * (*fast / *exact - 1));
    };
    out += fmt::format("  {} [{}]: vs Megatron {}; vs checkmate {}\n", cell_label(file, cell),
                       fmt::join(cell.confirmed_as, " "),
                       pct(cell.fast.speedup_vs_megatron(), cell.exact->speedup_vs_megatron()),
                       pct(cell.fast.speedup_vs_checkmate(), cell.exact->speedup_vs_checkmate()));
  }
  return out;
}

}  // namespace lynx::maps
