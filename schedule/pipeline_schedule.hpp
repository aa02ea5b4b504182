#pragma once
/// Pipeline schedules: the order in which each pipeline stage runs the forward and backward
/// passes of its micro-batches (GPipe, 1F1B / PipeDream-flush, Megatron's interleaved 1F1B).
#include "scenarios/scenario.hpp"

#include <vector>

namespace lynx::schedule {

/// One step of a stage: forward or backward of one micro-batch on one model chunk.
struct PipeStep {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;  ///< model chunk (virtual stage index on this GPU), 0 unless interleaved
};

/// Steps per pipeline stage (index = stage 0..p-1) for m micro-batches and v chunks per GPU.
/// Throws lynx::Error when interleaving is asked with m not a multiple of p (Megatron's rule).
std::vector<std::vector<PipeStep>> pipeline_order(ScheduleKind kind, int stages, int micro_batches,
                                                  int chunks);

/// Number of micro-batches whose activations stage k holds at most under `kind`
/// (GPipe: m; 1F1B: min(p - k, m)). Used by planners to size memory budgets.
int max_in_flight_micro_batches(ScheduleKind kind, int stages, int stage, int micro_batches,
                                int chunks);

}  // namespace lynx::schedule
