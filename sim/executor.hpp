#pragma once
/// Runs a Program on a Machine in simulated time with the event Engine: stream FIFOs,
/// cross-stream/cross-GPU dependencies, collective rendezvous, kernel contention,
/// fair-shared links and per-GPU memory tracking.
#include "sim/program.hpp"

#include <cstdint>
#include <iosfwd>
#include <utility>
#include <vector>

namespace lynx::sim {

struct ExecOptions {
  bool record_memory_timeline = false;  ///< keep (time, bytes) samples per GPU for the trace
};

struct ExecResult {
  TimePs makespan_ps = 0;                ///< end of the last task
  std::vector<TimePs> task_start_ps;     ///< per task
  std::vector<TimePs> task_end_ps;       ///< per task
  std::vector<TimePs> flow_end_ps;       ///< per flow (a flow starts with its task)
  std::vector<std::int64_t> peak_bytes;  ///< per GPU, static bytes included
  std::vector<TimePs> first_oom_ps;      ///< per GPU: first time usage exceeded capacity, -1 if never
  std::uint64_t events = 0;              ///< engine events processed
  /// Per GPU (only with record_memory_timeline): (time, bytes in use) after every change.
  std::vector<std::vector<std::pair<TimePs, std::int64_t>>> memory_timeline;
};

/// Executes `program`; throws lynx::Error on a malformed program (bad ids, a dependency cycle
/// that leaves tasks unfinished, a negative balance on a memory tag).
ExecResult execute(const Machine& machine, const Program& program, const ExecOptions& options = {});

/// Chrome-trace / Perfetto JSON: one track per GPU stream, one per link, a memory counter per
/// GPU (needs record_memory_timeline). Timestamps in microseconds.
void write_chrome_trace(std::ostream& out, const Machine& machine, const Program& program,
                        const ExecResult& result);

}  // namespace lynx::sim
