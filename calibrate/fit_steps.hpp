#pragma once
/// What the fitter's .cpp files share (calibrate::fit_profile): the fits of one model to
/// measurements (fit_primitives.cpp), and the steps of the fit of a profile, field by field
/// (fit_compute_steps.cpp: launch, kernel curves, contention; fit_comm_steps.cpp: collectives
/// and links). Internal to calibrate/.
#include "calibrate/fitter.hpp"

#include "calibrate/least_squares.hpp"
#include "calibrate/stats.hpp"
#include "hw_models/topology.hpp"
#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>

#include <string>
#include <vector>

namespace lynx::calibrate::detail {

constexpr double kUsPerS = 1e6;

constexpr double kPsPerS = 1e12;

inline std::string format_bw(double bytes_per_s) { return fmt::format("{:.1f} GB/s", bytes_per_s / 1e9); }

inline std::string format_us(double seconds) { return fmt::format("{:.3f} us", seconds * kUsPerS); }

inline std::string format_curve(const EfficiencyCurve& curve, const char* unit) {
  return fmt::format("max {:.4f}, half_work {:.4g} {}", curve.max, curve.half_work, unit);
}

/// RMS of (predicted − measured)/measured.
double rms_relative(const std::vector<double>& predicted, const std::vector<double>& measured);

FieldFit not_measured(std::string field, std::string value, std::string why);

struct LaunchFit {
  bool fitted = false;
  double launch_s = 0.0;
  int measurements = 0;
  double rms = 0.0;
  std::string how;
};

/// Launch overhead L, the fixed time every kernel pays (HardwareSpec::kernel_launch_ps).
///
/// Estimator: the median of the `launch,empty_kernel` rows — an empty kernel (one block, no
/// memory traffic) timed exactly like every other kernel (CUDA events around one launch, the
/// stream fed back to back). That is
/// the intercept of the time-vs-work line at zero work, measured instead of extrapolated:
/// under the profile's model t = L + (w + half)/(peak·max) the intercept of a line fitted
/// through small kernels is L + half/(peak·max), so L and half_work cannot be separated by
/// extrapolation; the empty kernel separates them.
///
/// Fallback without launch rows: the intercept of a weighted line t = c0 + c1·bytes through
/// the smallest memory-bound kernels (the quarter with the fewest bytes, at least 2 and at
/// most 8 rows, weights 1/t²), clamped to [0, the smallest time]. It includes the memory
/// curve's half_work/(bw·max) term, so that curve's half_work then fits to about 0 — the sum
/// (what predictions use) stays right.
LaunchFit fit_launch(const std::vector<const Measurement*>& launch_rows,
                     const std::vector<const Measurement*>& memory_rows);

struct CurvePoint {
  double work = 0.0;    ///< FLOPs or bytes
  double time_s = 0.0;  ///< measured median
};

struct CurveFit {
  bool fitted = false;
  EfficiencyCurve curve;
  int measurements = 0;
  double rms = 0.0;
  std::vector<std::string> notes;
};

/// Fits eff(w) = max·w/(w + half) to kernels with work w (FLOPs against `peak`, or bytes
/// against the HBM bandwidth) and measured time t.
///
/// Model (hw_models/compute_model.hpp): t = w/(peak·eff(w)) + L, so the efficiency a kernel
/// achieved is eff = w/(peak·(t − L)), and 1/eff = 1/max + (half/max)·(1/w) is linear in 1/w.
/// We fit y = 1/eff against x = 1/w by weighted least squares and read max = 1/intercept,
/// half = slope/intercept. Weights: timings have roughly constant relative noise ε, so
/// σ(y)/y = ε·t/(t − L); the inverse-variance weight is ((t − L)/(t·y))² (the constant ε
/// drops out). x is scaled by the median work to keep the normal equations well conditioned.
/// Rows with t − L below `min_fraction`·t are skipped (at the launch floor they carry no
/// efficiency information). Constraints of the compute model: 0 < max <= 1 and half >= 0 —
/// a fitted half < 0 (efficiency falling with size) refits max alone with half = 0; a max
/// above 1 (the datasheet peak is below what was measured) refits half with max = 1. Both are
/// reported. The residual is the RMS relative error of the predicted times over the rows used.
CurveFit fit_efficiency_curve(const std::vector<CurvePoint>& points, double peak, double launch_s,
                              double min_fraction, const std::string& what);

/// Ring bytes each rank sends for a payload S (collectives.hpp's convention for S) and the
/// number of ring steps, for a ring of n members.
struct RingCost {
  double wire_factor = 0.0;  ///< wire bytes / S
  int steps = 0;
  double buffer_share = 0.0;  ///< the call's buffer pass / S (hw_models::buffer_pass_share)
};

RingCost ring_cost(const std::string& collective, int n);

/// Alpha-beta fit of one group: t = alpha + wire/bw with weights 1/t² (relative errors, so
/// 1 KiB and 1 GiB messages count alike). A negative alpha is clamped to 0 (bw refitted).
std::optional<CollectiveFit> fit_alpha_beta(const std::vector<const Measurement*>& rows,
                                            std::vector<std::string>& notes);

/// One row prepared for the joint per-scope link fit t' = λ·steps + wire/bw.
struct LinkRow {
  double steps = 0.0;
  double wire = 0.0;
  double time_s = 0.0;  ///< measured time minus any modelled part that is not this link's
  double measured_s = 0.0;
  double offset_s = 0.0;
};

struct LinkFit {
  bool fitted = false;
  double step_latency_s = 0.0;
  double bw = 0.0;
  int measurements = 0;
  double rms = 0.0;
};

/// Joint least squares over every collective of a scope: t = λ·steps + wire/bw, weights 1/t².
/// λ is the latency of one ring step (the path latency in the simulator), bw the achieved
/// per-rank ring bandwidth. λ < 0 is clamped to 0 (bw refitted).
LinkFit fit_link(const std::vector<LinkRow>& rows, const std::string& what,
                 std::vector<std::string>& notes);

/// Path latency between two GPUs as an affine function of one link's latency ℓ:
/// path(ℓ) = fixed + count·ℓ, read off the simulator's own topology (so the mapping follows
/// whatever links hw_models/topology.cpp puts on the path).
struct PathLatencyModel {
  double fixed_s = 0.0;
  int count = 0;
};

PathLatencyModel path_latency_model(HardwareSpec hw, LinkSpec HardwareSpec::*link, int nodes,
                                    hw_models::Rank src, hw_models::Rank dst);

TimePs seconds_to_ps(double seconds);

std::uint64_t to_bw(double bytes_per_s);

/// Sets a link from a joint scope fit: bandwidth = fitted ring bandwidth ÷ the profile's
/// collective_efficiency (kept), so the simulator's effective collective bandwidth equals the
/// measured one; latency from λ = fixed + count·ℓ along the simulator's path.
FieldFit apply_link_fit(const LinkFit& fit, const PathLatencyModel& path, LinkSpec& link,
                        const HardwareSpec& hw, const std::string& field,
                        const std::string& source, std::vector<std::string>& notes);

std::vector<const Measurement*> rows_of(const RawMeasurements& raw, MeasurementKind kind);

std::vector<const Measurement*> with_dtype(const std::vector<const Measurement*>& rows,
                                           const std::string& dtype, const char* what,
                                           std::vector<std::string>& notes);

/// What every step of fit_profile shares: the input, the profile being fitted, and the report
/// (fields and notes are appended in the order the steps run).
struct FitState {
  const RawMeasurements& raw;
  const HardwareSpec& base;
  const FitOptions& options;
  FitReport& report;
  HardwareSpec& fitted;
  std::string source;  ///< "fitted from RAW on DEVICE", the source of every fitted field
};

/// Collectives measured on >= 2 ranks, by (collective, scope, ranks, nodes).
using CollectiveGroups =
    std::map<std::tuple<std::string, std::string, int, int>, std::vector<const Measurement*>>;

/// The efficiency curves are relative to peak FLOP/s and HBM bandwidth, so the base needs both.
void check_base_profile(const HardwareSpec& base);

/// gpu.name from the raw CSV's `device` header, if it has one.
void fit_device_name(FitState& st);

/// gpu.kernel_launch (fit_launch); returns the launch time in seconds the curves subtract
/// (the base's when nothing was measured).
double fit_launch_field(FitState& st, const std::vector<const Measurement*>& memory_rows);

/// One efficiency curve of the profile and the rows it is fitted to.
struct CurveJob {
  const char* field;
  MeasurementKind kind;
  EfficiencyCurve HardwareSpec::*curve;
  double roof;       ///< peak FLOP/s or HBM bytes/s
  const char* unit;  ///< of the work: "FLOPs" or "bytes"
};

/// One efficiency curve (fit_efficiency_curve) from `rows`, after the launch overhead.
void fit_curve_field(FitState& st, const CurveJob& job, const std::vector<const Measurement*>& rows,
                     double launch_s);

/// gpu.gemm_efficiency from the GEMM rows of the chosen dtype.
void fit_gemm_field(FitState& st, double launch_s);

/// gpu.attention_efficiency from the attention rows of the chosen dtype.
void fit_attention_field(FitState& st, double launch_s);

/// gpu.memory_bound_efficiency from `memory_rows` (already filtered by dtype).
void fit_memory_bound_field(FitState& st, const std::vector<const Measurement*>& memory_rows,
                            double launch_s);

/// gpu.contention from the GEMM bursts alone / beside a communication burst; gpu.comm_contention
/// from the communication burst alone / beside one GEMM stream (1 + f · 1), per (GEMM size, bytes).
void fit_contention_field(FitState& st);

/// Groups the collective rows on >= 2 ranks and reports one alpha-beta fit per group.
CollectiveGroups fit_collectives(FitState& st);

/// The intra-node link (NVLink, or PCIe on PCIe-only nodes): one joint fit over every intra
/// collective, t = λ·steps + wire/bw. Returns the fit (unfitted when not set).
LinkFit fit_intra_link(FitState& st, const CollectiveGroups& groups);

/// collective_model nccl: the intra-node scope as NCCL's protocols (hw_models/collectives.hpp):
/// a row of ring steps s and per-rank wire bytes w takes t = c_p + s·λ_p + w/(B·f_p) on the
/// protocol p the model finds fastest, where c_p = nccl.p.base + the hardware path latency,
/// λ_p = nccl.p.step_nvlink (step_pcie on PCIe nodes), B = link bw × collective_efficiency and
/// f_p = nccl.p.bw_fraction (the wire format's, not fitted). Rows are assigned to protocols
/// with the base profile's values, then (c_p, λ_p, 1/B) are fitted jointly by weighted least
/// squares (1/t²) and the rows reassigned, until the assignment repeats (at most 20 rounds).
/// λ_p is fitted only where its rows have >= 2 step counts (several group sizes), c_p where a
/// protocol has >= 1 row; the rest keep the base's values. The link latency is kept.
LinkFit fit_nccl_intra(FitState& st, const CollectiveGroups& groups);

/// The inter-node NIC link, hierarchical as the simulator plans it (hw_models/collectives.hpp):
/// with k ranks on each of N nodes, all-reduce = intra reduce-scatter + inter ring all-reduce
/// of the S/k shard + intra all-gather; reduce-scatter and all-gather have one intra phase.
/// The intra phases are predicted with the (just fitted, else base) intra link and subtracted;
/// the rest is fitted as t' = λ·steps + wire_nic/bw, where wire_nic = ceil(k/nics)·
/// factor(N)·S/k is what one NIC carries (rings of ranks with the same local index share
/// their rail's NIC). Send/recv across nodes is one flow, one step.
void fit_inter_link(FitState& st, const CollectiveGroups& groups, const LinkFit& intra);

/// collective_efficiency is kept by design: measured ring bandwidth goes into the links.
void report_collective_efficiency(FitState& st);

/// The fitted profile's source: how it was made, and which fields kept the base's values.
std::string fitted_source(const FitState& st);

}  // namespace lynx::calibrate::detail
