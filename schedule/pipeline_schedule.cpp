#include "schedule/pipeline_schedule.hpp"

#include "common/bytes.hpp"
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
    steps.push_back({true, micro_batch_of(f), chunk_of(f, true), false, /*paired=*/true});
    ++f;
    steps.push_back({false, micro_batch_of(b), chunk_of(b, false)});
    ++b;
  }
  for (; b < total; ++b) steps.push_back({false, micro_batch_of(b), chunk_of(b, false)});
  return steps;
}

/// ZB-H1 (Qi et al. 2024, Sec. 3.1 and Fig. 3): 1F1B's order of forward (F) and input-gradient
/// (B) passes, with stage k's weight-gradient passes (W) deferred by k micro-batches: a W
/// follows a B once more than k B passes are waiting for theirs, and the last k fill the
/// cool-down. Every stage then has p micro-batches between F and W (1F1B's stage 0 count),
/// B passes reach stage 0 sooner, and the deferred W fill the tail bubble: with
/// T_F = T_B = T_W and free communication the bubble is (p − 1)(T_F + T_B − T_W), a third of
/// 1F1B's (p − 1)(T_F + T_B + T_W) (tested on the engine).
std::vector<PipeStep> zb_h1_stage(int stages, int stage, int micro_batches) {
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipeStep> steps;
  int next_fwd = 0;
  int next_bwd = 0;
  int next_weight = 0;
  auto backward_then_weight = [&] {
    steps.push_back({false, next_bwd++, 0});
    if (next_bwd - next_weight > stage) steps.push_back({false, next_weight++, 0, true});
  };
  for (; next_fwd < warmup; ++next_fwd) steps.push_back({true, next_fwd, 0});
  while (next_fwd < micro_batches) {
    steps.push_back({true, next_fwd++, 0});
    backward_then_weight();
  }
  while (next_bwd < micro_batches) backward_then_weight();
  while (next_weight < micro_batches) steps.push_back({false, next_weight++, 0, true});
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
      case ScheduleKind::kZbH1: steps = zb_h1_stage(stages, s, micro_batches); break;
    }
  }
  return order;
}

int max_in_flight_micro_batches(ScheduleKind kind, int stages, int stage, int micro_batches,
                                int chunks) {
  switch (kind) {
    case ScheduleKind::kGpipe: return micro_batches;
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kZbH1: return std::min(stages - stage, micro_batches);
    case ScheduleKind::kInterleaved: {
      // Warm-up forwards plus the one in flight, counted in chunks (micro-batch × chunk pairs).
      const int warmup = (stages - stage - 1) * 2 + (chunks - 1) * stages + 1;
      return std::min(warmup, micro_batches * chunks);
    }
  }
  return micro_batches;
}

int weight_pending_micro_batches(ScheduleKind kind, int stages, int stage, int micro_batches) {
  if (kind != ScheduleKind::kZbH1) return 0;
  // At the peak (after a steady-state forward) min(p − k, m) wait for B; of the B done by then
  // (m − (p − k) at most, as the steady state has m − (p − k − 1) forwards), k wait for W.
  return std::max(0, std::min(stage, micro_batches - (stages - stage)));
}

WeightPassBytes weight_pass_bytes(const model::Op& op) {
  WeightPassBytes out;
  if (op.kind != model::OpKind::kGemm || op.bwd_wgrad_flops <= 0) return out;
  const std::int64_t output =
      static_cast<std::int64_t>(kBytesPerElement) * op.gemm_m * op.gemm_n * op.gemm_batch;
  const auto saved = static_cast<std::int64_t>(op.saved_bytes);
  out.input = op.saves == model::Saves::kInput           ? saved
              : op.saves == model::Saves::kInputAndOutput ? std::max<std::int64_t>(0, saved - output)
                                                          : 0;
  out.output_grad = output;
  return out;
}

}  // namespace lynx::schedule
