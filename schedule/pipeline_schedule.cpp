#include "schedule/pipeline_schedule.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace lynx::schedule {
namespace {

std::vector<PipeStep> gpipe_stage(int micro_batches) {
  std::vector<PipeStep> steps;
  for (int mb = 0; mb < micro_batches; ++mb) steps.push_back({true, mb, 0});
  for (int mb = 0; mb < micro_batches; ++mb) steps.push_back({false, mb, 0});
  return steps;
}

/// PipeDream-flush: p-k-1 warm-up forwards, then one-forward-one-backward, then cool-down.
std::vector<PipeStep> one_f_one_b_stage(int stages, int stage, int micro_batches) {
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipeStep> steps;
  int next_fwd = 0;
  int next_bwd = 0;
  for (; next_fwd < warmup; ++next_fwd) steps.push_back({true, next_fwd, 0});
  while (next_fwd < micro_batches) {
    steps.push_back({true, next_fwd++, 0});
    steps.push_back({false, next_bwd++, 0});
  }
  while (next_bwd < micro_batches) steps.push_back({false, next_bwd++, 0});
  return steps;
}

/// Megatron-LM's interleaved schedule (forward_backward_pipelining_with_interleaving): virtual
/// step k of a stage works on chunk (k / p) % v and micro-batch (k / (p·v))·p + k % p; backward
/// chunks run in reverse order.
std::vector<PipeStep> interleaved_stage(int stages, int stage, int micro_batches, int chunks) {
  const int total = micro_batches * chunks;
  auto micro_batch_of = [&](int k) { return (k / (stages * chunks)) * stages + k % stages; };
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k / stages) % chunks;
    return forward ? c : chunks - 1 - c;
  };
  int warmup = (stages - stage - 1) * 2 + (chunks - 1) * stages;
  warmup = std::min(warmup, total);
  std::vector<PipeStep> steps;
  int f = 0;
  int b = 0;
  for (; f < warmup; ++f) steps.push_back({true, micro_batch_of(f), chunk_of(f, true)});
  while (f < total) {
    steps.push_back({true, micro_batch_of(f), chunk_of(f, true)});
    ++f;
    steps.push_back({false, micro_batch_of(b), chunk_of(b, false)});
    ++b;
  }
  for (; b < total; ++b) steps.push_back({false, micro_batch_of(b), chunk_of(b, false)});
  return steps;
}

}  // namespace

std::vector<std::vector<PipeStep>> pipeline_order(ScheduleKind kind, int stages, int micro_batches,
                                                  int chunks) {
  if (stages < 1 || micro_batches < 1 || chunks < 1)
    fail(ErrorCode::kInternal, "pipeline needs >= 1 stage, micro-batch and chunk (got {}, {}, {})", stages,
         micro_batches, chunks);
  if (kind != ScheduleKind::kInterleaved && chunks != 1)
    fail(ErrorCode::kIncompatibleSettings, "parallel.virtual_stages = {} needs parallel.schedule: interleaved", chunks);
  if (kind == ScheduleKind::kInterleaved && micro_batches % stages != 0)
    fail(ErrorCode::kIndivisibleLayout, "interleaved 1F1B needs the number of micro-batches per pipeline ({}) to be a multiple "
         "of parallel.pp ({})",
         micro_batches, stages);
  std::vector<std::vector<PipeStep>> order(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    auto& steps = order[static_cast<size_t>(s)];
    switch (kind) {
      case ScheduleKind::kGpipe: steps = gpipe_stage(micro_batches); break;
      case ScheduleKind::kOneFOneB: steps = one_f_one_b_stage(stages, s, micro_batches); break;
      case ScheduleKind::kInterleaved:
        steps = interleaved_stage(stages, s, micro_batches, chunks);
        break;
    }
  }
  return order;
}

int max_in_flight_micro_batches(ScheduleKind kind, int stages, int stage, int micro_batches,
                                int chunks) {
  switch (kind) {
    case ScheduleKind::kGpipe: return micro_batches;
    case ScheduleKind::kOneFOneB: return std::min(stages - stage, micro_batches);
    case ScheduleKind::kInterleaved: {
      // Warm-up forwards plus the one in flight, counted in chunks (micro-batch × chunk pairs).
      const int warmup = (stages - stage - 1) * 2 + (chunks - 1) * stages + 1;
      return std::min(warmup, micro_batches * chunks);
    }
  }
  return micro_batches;
}

}  // namespace lynx::schedule
