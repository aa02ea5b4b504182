#include "hw_models/compute_model.hpp"

#include "hw_models/rounding.hpp"
#include "common/error.hpp"

#include <algorithm>
#include <cmath>

namespace lynx::hw_models {

double efficiency(const EfficiencyCurve& curve, double work) {
  if (!(work > 0.0)) fail(ErrorCode::kInternal, "efficiency curve evaluated at non-positive work {}", work);
  if (!(curve.max > 0.0 && curve.max <= 1.0))
    fail(ErrorCode::kBadHardware, "efficiency curve max must be in (0, 1], got {}", curve.max);
  if (!(curve.half_work >= 0.0))
    fail(ErrorCode::kBadHardware, "efficiency curve half_work must be >= 0, got {}", curve.half_work);
  return curve.max * work / (work + curve.half_work);
}

TimePs kernel_time_ps(const HardwareSpec& hw, model::OpKind kind, double flops, double bytes,
                      bool fp8) {
  if (!(flops >= 0.0) || !(bytes >= 0.0))
    fail(ErrorCode::kInternal, "kernel with negative or NaN work: {} FLOPs, {} bytes", flops, bytes);
  // Memory-bound kernels are timed by bytes alone; so are collectives' local kernels (NCCL's
  // reductions are bandwidth-bound; the network part is timed by the link model).
  const bool compute_bound = kind == model::OpKind::kGemm || kind == model::OpKind::kAttention;
  const double counted_flops = compute_bound ? flops : 0.0;
  if (counted_flops == 0.0 && bytes == 0.0) return 0;

  constexpr double kPsPerSecond = 1e12;
  double compute_ps = 0.0;
  if (counted_flops > 0.0) {
    const bool on_fp8 = fp8 && kind == model::OpKind::kGemm;
    const std::uint64_t peak = on_fp8 ? hw.fp8_peak_flops_per_s : hw.peak_flops_per_s;
    if (peak == 0)
      fail(ErrorCode::kBadHardware, "hardware '{}' has zero {}peak FLOP/s", hw.profile, on_fp8 ? "FP8 " : "");
    const EfficiencyCurve& curve = kind == model::OpKind::kGemm ? hw.gemm : hw.attention;
    compute_ps = counted_flops * kPsPerSecond / (static_cast<double>(peak) * efficiency(curve, counted_flops));
  }
  double memory_ps = 0.0;
  if (bytes > 0.0) {
    if (hw.hbm_bw_bytes_per_s == 0) fail(ErrorCode::kBadHardware, "hardware '{}' has zero HBM bandwidth", hw.profile);
    memory_ps = bytes * kPsPerSecond /
                (static_cast<double>(hw.hbm_bw_bytes_per_s) * efficiency(hw.memory_bound, bytes));
  }
  const TimePs roofline_ps = ceil_to_int64(std::max(compute_ps, memory_ps),
                                             "a kernel's time in ps (its FLOPs / hardware.gpu.peak, its "
                                             "bytes / hardware.gpu.hbm_bw)");
  return checked_add(roofline_ps, hw.kernel_launch_ps,
                     "a kernel's time (hardware.gpu.kernel_launch + its roofline time)");
}

OpTimes op_times(const HardwareSpec& hw, const model::Op& op) {
  if (op.kind == model::OpKind::kCollective) return {};
  TimePs wgrad_ps = kernel_time_ps(hw, op.kind, op.bwd_wgrad_flops, op.bwd_wgrad_bytes, op.fp8);
  // Gradient-accumulation fusion off: the add into the gradient buffer is a kernel of its own,
  // memory-bound, after the GEMM (its launch overhead included).
  if (op.bwd_wgrad_accumulate_bytes > 0)
    wgrad_ps = checked_add(wgrad_ps, kernel_time_ps(hw, model::OpKind::kMemoryBound, 0, op.bwd_wgrad_accumulate_bytes),
                           "a weight gradient's time (its GEMM + the accumulation into the gradient buffer)");
  return {kernel_time_ps(hw, op.kind, op.fwd_flops, op.fwd_bytes, op.fp8),
          kernel_time_ps(hw, op.kind, op.bwd_dgrad_flops, op.bwd_dgrad_bytes, op.fp8), wgrad_ps};
}

}  // namespace lynx::hw_models
