#pragma once
/// GPU kernel time: roofline × shape-dependent efficiency + launch overhead.
#include "model/gpt.hpp"
#include "scenarios/scenario.hpp"

namespace lynx::hw {

/// eff(w) = curve.max * w / (w + curve.half_work)  (w > 0), in (0, max].
double efficiency(const EfficiencyCurve& curve, double work);

/// Solo time of one kernel: max(flops / (peak · eff_compute(flops)),
/// bytes / (hbm_bw · eff_memory(bytes))) + kernel_launch, rounded up to whole ps; the compute
/// curve is hw.gemm for kGemm, hw.attention for kAttention; kMemoryBound ignores flops.
/// A kernel with no flops and no bytes takes 0.
TimePs kernel_time_ps(const HardwareSpec& hw, model::OpKind kind, double flops, double bytes);

}  // namespace lynx::hw
