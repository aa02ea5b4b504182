#pragma once
/// Pipeline schedules: the order in which each pipeline stage runs the forward and backward
/// passes of its micro-batches (GPipe, 1F1B / PipeDream-flush, Megatron's interleaved 1F1B,
/// and ZB-H1 of Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024).
#include "model/gpt.hpp"
#include "scenarios/scenario.hpp"

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
  /// A backward step that carries pipeline traffic and gradients (not a weight pass).
  bool backward() const { return !forward && !weight; }
};

/// Steps per pipeline stage (index = stage 0..p-1) for m micro-batches and v chunks per GPU.
/// Throws lynx::Error when interleaving is asked with m not a multiple of p (Megatron's rule).
std::vector<std::vector<PipeStep>> pipeline_order(ScheduleKind kind, int stages, int micro_batches,
                                                  int chunks);

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
