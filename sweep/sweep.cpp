#include "sweep/sweep.hpp"

#include "common/clock.hpp"
#include "common/error.hpp"
#include "common/progress.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "strategies/milp_planner.hpp"
#include "sweep/ordered_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <ostream>
#include <thread>

namespace lynx::sweep {
namespace {

PointOutcome skipped(ErrorCode code, const std::string& message) {
  return {PointOutcome::Kind::kSkipped, false, message, code};
}

/// Whether every filter holds for the read scenario (its model preset filled in, so keys such
/// as model.layers have their values). Empty when the model does not resolve: the point is
/// invalid and resolve_scenario says why.
std::optional<bool> filters_hold(const Grid& grid, const UnresolvedScenario& read) {
  Scenario scenario = read.scenario;
  try {
    scenario.model = model::resolve_model(scenario.model);
  } catch (const Error&) {
    return std::nullopt;
  }
  for (const Filter& filter : grid.filters)
    if (!filter.holds([&](const std::string& key) { return scenario_value(scenario, key); })) return false;
  return true;
}

/// The threads a rank uses: as asked, else its share of the machine's cores.
int thread_count(const SweepRequest& request, const Ranks& ranks) {
  if (request.threads > 0) return request.threads;
  const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  return std::max(1, cores / ranks.ranks_on_node());
}

/// Counts one outcome into the summary.
void count(SweepSummary& summary, SkipReasons& reasons, const Grid& grid, std::uint64_t index,
           const PointOutcome& outcome) {
  switch (outcome.kind) {
    case PointOutcome::Kind::kRow:
      ++summary.rows;
      if (outcome.oom) ++summary.oom_rows;
      break;
    case PointOutcome::Kind::kValid: break;
    case PointOutcome::Kind::kFiltered: ++summary.filtered; break;
    case PointOutcome::Kind::kSkipped: {
      ++summary.skipped;
      reasons.add(outcome.code, outcome.text, index,
                  [&] { return fmt::format("{}", fmt::join(grid.overrides(index), " ")); });
      break;
    }
  }
}

}  // namespace

PointRun run_point(const Grid& grid, std::uint64_t index, bool simulate) {
  UnresolvedScenario read;
  try {
    read = grid.read_point(index);
  } catch (const Error& e) {
    return {PointOutcome::Kind::kSkipped, e.what(), {}, e.code()};
  }
  if (!grid.filters.empty()) {
    const std::optional<bool> hold = filters_hold(grid, read);
    if (hold.has_value() && !*hold) return {PointOutcome::Kind::kFiltered, {}, {}};
  }
  std::optional<model::ResolvedScenario> resolved;
  try {
    resolved.emplace(model::resolve_scenario(read));
  } catch (const Error& e) {
    return {PointOutcome::Kind::kSkipped, e.what(), {}, e.code()};
  }
  if (!simulate) return {PointOutcome::Kind::kValid, {}, {}};
  try {
    return {PointOutcome::Kind::kRow, {}, runner::simulate(*resolved).result};
  } catch (const Error& e) {
    return {PointOutcome::Kind::kSkipped, fmt::format("simulation failed: {}", e.what()), {}, e.code()};
  }
}

PointOutcome evaluate_point(const Grid& grid, const RowWriter& writer, std::uint64_t index,
                            bool simulate) {
  const PointRun run = run_point(grid, index, simulate);
  if (run.kind == PointOutcome::Kind::kSkipped) return skipped(run.code, run.message);
  if (run.kind != PointOutcome::Kind::kRow) return {run.kind, false, {}};
  return {PointOutcome::Kind::kRow, run.result->oom, writer.row(index, *run.result)};
}

SweepSummary run_sweep(const SweepRequest& request, const Ranks& ranks, std::ostream& table_out) {
  const WallClock::time_point start = WallClock::now();
  const Grid grid = read_grid_file(request.grid_path);
  const RowWriter writer(grid, output_format_for(request.output_path));
  SweepSummary summary;
  summary.points = grid.point_count();
  summary.threads = thread_count(request, ranks);
  summary.ranks = ranks.size();

  // Rank 0 reads what an interrupted run left and tells every rank which points have rows.
  ExistingRows existing;
  if (ranks.is_root() && !request.output_path.empty())
    existing = read_existing_rows(request.output_path, writer, grid);
  std::vector<std::uint64_t> done = existing.points;
  ranks.broadcast(done);
  // Points before the last row that have none were filtered or skipped: they are only checked
  // again (for the summary), never simulated.
  const std::uint64_t first_new = done.empty() ? 0 : done.back() + 1;
  auto is_done = [&](std::uint64_t i) { return std::binary_search(done.begin(), done.end(), i); };
  auto owner = [&](std::uint64_t i) { return static_cast<int>(i % static_cast<std::uint64_t>(ranks.size())); };

  std::vector<std::uint64_t> mine;  // this rank's share, in point order
  for (std::uint64_t i = static_cast<std::uint64_t>(ranks.rank()); i < summary.points;
       i += static_cast<std::uint64_t>(ranks.size()))
    if (!is_done(i)) mine.push_back(i);
  // Planning MILPs on several threads solve in child processes at once; not under MPI, whose
  // transports may not survive a fork.
  const strategies::ParallelMilpSolves parallel_milp(ranks.size() == 1 ? summary.threads : 1);
  OrderedPool<PointOutcome> pool(mine, summary.threads, [&](std::uint64_t i) {
    return evaluate_point(grid, writer, i, i >= first_new);
  });
  SkipReasons reasons;

  if (!ranks.is_root()) {
    while (pool.has_next()) {
      auto [index, outcome] = pool.next();
      count(summary, reasons, grid, index, outcome);
      ranks.send_to_root(index, outcome);
    }
    summary.seconds = seconds_since(start);
    return summary;
  }

  std::optional<OutputStream> out;
  if (!request.output_path.empty()) out.emplace(request.output_path, writer, existing);
  std::vector<std::string> table_rows;
  ProgressBar progress(summary.points - done.size(), "sweep", request.progress);
  std::uint64_t handled = 0;
  for (std::uint64_t i = 0; i < summary.points; ++i) {
    if (is_done(i)) {
      ++summary.rows;
      ++summary.rows_resumed;
      continue;
    }
    PointOutcome outcome;
    if (owner(i) == 0) {
      auto [index, local] = pool.next();
      LYNX_CHECK(index == i, "pool returned point {}, expected {}", index, i);
      outcome = std::move(local);
    } else {
      outcome = ranks.receive(owner(i), i);
    }
    if (outcome.kind == PointOutcome::Kind::kValid)
      fail(ErrorCode::kOutputMismatch, "-o {}: point {} is valid but has no row, though later points have rows: the file "
           "was not written by this sweep; remove it or choose another -o",
           request.output_path, i);
    count(summary, reasons, grid, i, outcome);
    if (outcome.kind == PointOutcome::Kind::kRow) {
      if (out) out->write(outcome.text);
      else table_rows.push_back(std::move(outcome.text));
    }
    progress.update(++handled, fmt::format("point {}", i));
  }
  progress.finish();
  if (out) out->close();
  if (!out) table_out << writer.table(table_rows);

  summary.reasons = reasons.sorted();
  summary.seconds = seconds_since(start);
  return summary;
}

std::string summary_text(const SweepSummary& s) {
  const std::uint64_t simulated = s.rows - s.rows_resumed;
  std::string out = fmt::format("sweep: {} points: {} rows ({} out of memory", s.points, s.rows, s.oom_rows);
  if (s.rows_resumed > 0) out += fmt::format(", {} already in the file", s.rows_resumed);
  out += fmt::format("), {} filtered out by where, {} skipped; {} simulated in {:.2f} s ({:.1f} points/s) on {} "
                     "thread{} x {} rank{}\n",
                     s.filtered, s.skipped, simulated, s.seconds,
                     s.seconds > 0 ? static_cast<double>(simulated) / s.seconds : 0.0, s.threads,
                     s.threads == 1 ? "" : "s", s.ranks, s.ranks == 1 ? "" : "s");
  if (s.skipped > 0) out += fmt::format("skipped {}:\n", s.skipped);
  for (const SkipReason& r : s.reasons)
    out += fmt::format("  {} x {} (first: point {}: {})\n", r.count, skip_reason_text(r), r.first_point, r.first_values);
  return out;
}

}  // namespace lynx::sweep
