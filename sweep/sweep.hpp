#pragma once
/// `lynxsim sweep`: every point of a grid simulated (runner::simulate) on a thread pool and,
/// under MPI, on every rank; rows written by rank 0 in point order, so the output's bytes are
/// the same for any thread or rank count. Invalid points are counted with their reason, never
/// fatal; an interrupted sweep resumes from its output file.
#include "runner/simulate.hpp"
#include "sweep/grid.hpp"
#include "sweep/point_outcome.hpp"
#include "sweep/ranks.hpp"
#include "sweep/skip_reasons.hpp"
#include "sweep/sweep_output.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace lynx::sweep {

/// What `lynxsim sweep` was asked.
struct SweepRequest {
  std::string grid_path;
  std::string output_path;  ///< .csv or .jsonl; empty: a table on stdout
  int threads = 0;          ///< per rank; 0: the machine's cores shared by its ranks
  bool progress = true;     ///< progress on stderr (rank 0)
};

/// How a sweep went (complete on rank 0).
struct SweepSummary {
  std::uint64_t points = 0;
  std::uint64_t rows = 0;          ///< rows in the output, resumed ones included
  std::uint64_t rows_resumed = 0;  ///< already in the output file, not simulated again
  std::uint64_t oom_rows = 0;      ///< of the rows simulated now
  std::uint64_t filtered = 0;
  std::uint64_t skipped = 0;
  std::vector<SkipReason> reasons;  ///< by count, then first point
  double seconds = 0;
  int threads = 1;
  int ranks = 1;
};

/// Point `index` of `grid` read, filtered, resolved and (with `simulate`) simulated.
struct PointRun {
  PointOutcome::Kind kind = PointOutcome::Kind::kRow;
  std::string message;                    ///< kSkipped: the loader's (or simulation's) message
  std::optional<runner::SimResult> result;  ///< kRow: the simulated result
  ErrorCode code = ErrorCode::kInternal;  ///< kSkipped: the code of that error
};

/// Point `index` of `grid` as a PointRun (evaluate_point renders it; the Python module keeps
/// the result).
PointRun run_point(const Grid& grid, std::uint64_t index, bool simulate);

/// Point `index` of `grid`: the base with the point's values applied as --set overrides,
/// filtered, resolved and (with `simulate`) simulated; its row rendered by `writer`.
PointOutcome evaluate_point(const Grid& grid, const RowWriter& writer, std::uint64_t index,
                            bool simulate);

/// Runs the sweep. Rank 0 writes the rows (the table to `table_out` without an output path)
/// and returns the summary; the other ranks return theirs with only their own counts.
SweepSummary run_sweep(const SweepRequest& request, const Ranks& ranks, std::ostream& table_out);

/// The summary for people: counts, rate, and each skip reason with its error code and count.
std::string summary_text(const SweepSummary& summary);

}  // namespace lynx::sweep
