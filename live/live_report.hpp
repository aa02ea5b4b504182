#pragma once
/// Live mode's outputs: measured next to predicted (iteration time, peak memory per rank, time
/// per op and pass) as a table and a CSV; the measured per-op times as a calibrate raw CSV
/// (`lynxsim fit` reads it); the measured iteration as a Perfetto trace in the simulated
/// trace's format (sim::write_chrome_trace over the same program).
#include "calibrate/raw_csv.hpp"
#include "live/backend.hpp"
#include "live/op_stream.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace lynx::live {

/// Measured iterations of one live run (the first `warmup` are not counted).
struct LiveRun {
  std::string plan_label;
  std::string backend;  ///< Backend::name()
  std::string device;   ///< Backend::device()
  std::string runs_as;  ///< runs_as_note of the op stream ("": the plan as made)
  int warmup = 1;
  std::vector<Measured> iterations;  ///< every iteration run, warm-up included
};

/// One row of the comparison: an iteration, a rank's peak memory, or an (op, pass) group.
struct CompareRow {
  std::string row;   ///< iteration | peak_memory | op
  int rank = -1;     ///< peak_memory: the rank; else -1 (all ranks)
  std::string op;    ///< op rows: the workload op or task name
  std::string pass;  ///< op rows: fwd, recompute, dgrad, ...
  std::string stream;
  std::int64_t count = 0;  ///< op rows: ops per iteration over all ranks
  std::string unit;        ///< s | bytes
  double measured = 0;     ///< iteration: median over counted iterations; op: summed per iteration (median)
  double predicted = 0;
};

/// The comparison rows, iteration first, then each rank's peak, then ops by predicted time.
std::vector<CompareRow> compare_rows(const OpStream& ops, const LiveRun& run);
/// Human table of compare_rows.
void write_compare_table(std::ostream& out, const std::vector<CompareRow>& rows, const LiveRun& run);
/// CSV of compare_rows: row,rank,op,pass,stream,count,unit,measured,predicted,measured_over_predicted.
void write_compare_csv(std::ostream& out, const std::vector<CompareRow>& rows);

/// Measured op times as raw calibration rows (calibrate/raw_csv.hpp's schema): one row per
/// distinct launch (kind, name, shape, bytes, ranks) with median/p10/p90 over its instances in
/// the counted iterations. GEMMs are "gemm" rows named live:OP.PASS, batched GEMMs
/// "attention", kernels "memory_bound" named by the kernel, collectives by the collective,
/// pipeline transfers "send_recv". Markers are left out.
calibrate::RawMeasurements raw_measurements(const OpStream& ops, const LiveRun& run);

/// The last counted iteration as a Chrome-trace / Perfetto JSON, written by the simulator's
/// trace writer over the same program (receives, which have no task, are left out).
void write_live_trace(std::ostream& out, const OpStream& ops, const LiveRun& run);

}  // namespace lynx::live
