#pragma once
/// GPU kernel time: roofline × shape-dependent efficiency + launch overhead.
#include "model/gpt.hpp"
#include "scenarios/scenario.hpp"

namespace lynx::hw_models {

/// eff(w) = curve.max * w / (w + curve.half_work)  (w > 0), in (0, max].
/// Throws lynx::Error for w <= 0, max outside (0, 1] or half_work < 0.
double efficiency(const EfficiencyCurve& curve, double work);

/// Solo time of one kernel: max(flops / (peak · eff_compute(flops)),
/// bytes / (hbm_bw · eff_memory(bytes))) + kernel_launch, rounded up to whole ps; the compute
/// curve is hw.gemm for kGemm, hw.attention for kAttention; kMemoryBound ignores flops (so
/// does kCollective: its local reduction kernel is bandwidth-bound; the network part is timed
/// by the link model). The memory curve is hw.memory_bound for every kind.
/// A kernel with no flops and no bytes takes 0. Rounding: a value within 4 ulp above a whole
/// ps (floating-point noise, e.g. 800 / (1e12 · 0.8)) is not rounded up.
/// `fp8` (kGemm only): the GEMM runs on FP8 tensor cores, at hw.fp8_peak_flops_per_s with the
/// same gemm efficiency curve (assumed until calibrated).
/// Throws lynx::Error for negative work or a zero peak / bandwidth that the kernel needs.
TimePs kernel_time_ps(const HardwareSpec& hw, model::OpKind kind, double flops, double bytes,
                      bool fp8 = false);

/// Kernel times of one op's forward, input-gradient and weight-gradient kernels.
struct OpTimes {
  TimePs fwd_ps = 0;
  TimePs dgrad_ps = 0;
  TimePs wgrad_ps = 0;
};
/// Kernel times of one op on `hw` (0 for collectives, which run as link flows). A GEMM's
/// wgrad_ps includes its bwd_wgrad_accumulate_bytes kernel (memory-bound, a launch of its own).
OpTimes op_times(const HardwareSpec& hw, const model::Op& op);

}  // namespace lynx::hw_models
