#pragma once
/// Pipeline schedules: the order in which each pipeline stage runs the forward and backward
/// passes of its micro-batches (GPipe, 1F1B / PipeDream-flush, Megatron's interleaved 1F1B,
/// and ZB-H1 of Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024).
#include "model/gpt.hpp"
#include "scenarios/scenario.hpp"

#include <algorithm>
#include <cstdint>

#include <vector>

namespace lynx::schedule {

/// One step of a stage: forward or backward of one micro-batch on one model chunk. Under ZB-H1
/// a backward step is the input-gradient pass only (B) and a `weight` step (forward false)
/// runs the layers' weight-gradient GEMMs of that micro-batch (W).
struct PipeStep {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;  ///< model chunk (virtual stage index on this GPU), 0 unless interleaved
  bool weight = false;  ///< ZB-H1's deferred weight-gradient pass (then forward is false)
  /// Interleaved steady state: a forward that shares the backward after it one exchange
  /// (Megatron's send_forward_backward_recv_forward_backward after both).
  bool paired = false;
  /// A backward step that carries pipeline traffic and gradients (not a weight pass).
  bool backward() const { return !forward && !weight; }
};

/// Steps per pipeline stage (index = stage 0..p-1) for m micro-batches and v chunks per GPU.
/// Throws lynx::Error when interleaving is asked with m not a multiple of p (Megatron's rule).
std::vector<std::vector<PipeStep>> pipeline_order(ScheduleKind kind, int stages, int micro_batches,
                                                  int chunks);

/// Blocking pipeline exchanges (parallel.pipeline_exchange blocking): whether a stage calls
/// Megatron's p2p _communicate after its step `i` (of `steps`). The interleaved schedule's steady
/// state calls it once per forward-backward pair (after the backward: the forward's output is
/// sent then); every other step, and the last, is followed by one. (A stage whose forwards are
/// all warm-up, Megatron-Core's are_all_microbatches_in_warmup, exchanges after its last
/// forward too, its first backward's gradient received before the cool-down: megatron/core/
/// pipeline_parallel/schedules.py at 00611e6eeb.)
inline bool exchanges_after(const std::vector<PipeStep>& steps, std::size_t i) {
  return i + 1 >= steps.size() || !steps[i].paired;
}

/// The steps whose inputs the exchange before steps[next] receives: next up to and including
/// the first step after which the stage exchanges again. Returns one past the last of them.
inline std::size_t exchange_inputs_end(const std::vector<PipeStep>& steps, std::size_t next) {
  std::size_t k = next;
  while (k < steps.size() && !exchanges_after(steps, k)) ++k;
  return std::min(k + 1, steps.size());
}

/// Whether the exchange before steps[next] is called when it carries nothing: the
/// non-interleaved schedule's wrappers (recv_forward on the first stage, send_backward on it,
/// ...) make no call; the interleaved one calls _communicate after every step of its loops
/// whatever it carries (and synchronizes).
inline bool calls_empty_exchange(ScheduleKind kind, std::size_t next) {
  return kind == ScheduleKind::kInterleaved && next > 0;
}

/// Number of micro-batches whose activations stage k holds at most under `kind`
/// (GPipe: m; 1F1B and ZB-H1: min(p - k, m)). Used by planners to size memory budgets.
int max_in_flight_micro_batches(ScheduleKind kind, int stages, int stage, int micro_batches,
                                int chunks);

/// ZB-H1: micro-batches whose input-gradient pass is done and whose weight pass is pending on
/// stage k while it holds max_in_flight_micro_batches full ones (its peak): min(k, m − p + k)
/// clipped at 0 — stage k defers its weight passes by k. 0 for the other schedules.
int weight_pending_micro_batches(ScheduleKind kind, int stages, int stage, int micro_batches);

/// What a deferred weight-gradient pass (ZB-H1's W) still needs of one op after its
/// input-gradient pass: the weight GEMM's input (saved in forward; Q, K, V that qkv_gemm also
/// saves are not part of it) and the gradient of its output (written by the input-gradient
/// pass). Qi et al. 2024, Table 1: 32·s·b·h per GPT layer without tensor parallelism.
struct WeightPassBytes {
  std::int64_t input = 0;        ///< part of op.saved_bytes held from B until W
  std::int64_t output_grad = 0;  ///< bf16 gradient of the GEMM output, allocated at B
  std::int64_t total() const { return input + output_grad; }
};

/// Zero for ops without a weight gradient (kernels other than kGemm with bwd_wgrad_flops > 0).
WeightPassBytes weight_pass_bytes(const model::Op& op);

}  // namespace lynx::schedule
