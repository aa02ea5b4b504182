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

namespace lynx::calibrate {

namespace {

constexpr double kUsPerS = 1e6;
constexpr double kPsPerS = 1e12;

// ---- value formatting for the report ----------------------------------------------------

std::string format_bw(double bytes_per_s) { return fmt::format("{:.1f} GB/s", bytes_per_s / 1e9); }
std::string format_us(double seconds) { return fmt::format("{:.3f} us", seconds * kUsPerS); }
std::string format_curve(const EfficiencyCurve& curve, const char* unit) {
  return fmt::format("max {:.4f}, half_work {:.4g} {}", curve.max, curve.half_work, unit);
}

/// RMS of (predicted − measured)/measured.
double rms_relative(const std::vector<double>& predicted, const std::vector<double>& measured) {
  LYNX_CHECK(predicted.size() == measured.size(), "{} vs {}", predicted.size(), measured.size());
  if (measured.empty()) return 0.0;
  double sum = 0.0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double rel = (predicted[i] - measured[i]) / measured[i];
    sum += rel * rel;
  }
  return std::sqrt(sum / static_cast<double>(measured.size()));
}

FieldFit not_measured(std::string field, std::string value, std::string why) {
  FieldFit f;
  f.field = std::move(field);
  f.value = std::move(value);
  f.source = "not measured: kept the base profile's value (" + why + ")";
  return f;
}

// ---- kernel launch overhead -------------------------------------------------------------

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
                     const std::vector<const Measurement*>& memory_rows) {
  LaunchFit fit;
  if (!launch_rows.empty()) {
    std::vector<double> times;
    for (const Measurement* row : launch_rows) times.push_back(row->time_us_median / kUsPerS);
    fit.launch_s = median(times);
    fit.measurements = static_cast<int>(times.size());
    fit.rms = rms_relative(std::vector<double>(times.size(), fit.launch_s), times);
    fit.fitted = true;
    fit.how = "median of the empty-kernel rows";
    return fit;
  }
  if (memory_rows.size() >= 2) {
    std::vector<const Measurement*> sorted = memory_rows;
    std::sort(sorted.begin(), sorted.end(), [](const Measurement* a, const Measurement* b) {
      return std::tie(a->bytes, a->time_us_median) < std::tie(b->bytes, b->time_us_median);
    });
    const std::size_t count = std::clamp<std::size_t>(sorted.size() / 4, 2, 8);
    std::vector<double> bytes, times, weights;
    for (std::size_t i = 0; i < count; ++i) {
      bytes.push_back(static_cast<double>(sorted[i]->bytes));
      times.push_back(sorted[i]->time_us_median / kUsPerS);
      weights.push_back(1.0 / (times.back() * times.back()));
    }
    const double smallest = *std::min_element(times.begin(), times.end());
    try {
      const LineFit line = fit_line_weighted(bytes, times, weights);
      fit.launch_s = std::clamp(line.intercept, 0.0, smallest);
    } catch (const Error&) {
      fit.launch_s = smallest;  // all the smallest kernels have one size: their time bounds L
    }
    fit.measurements = static_cast<int>(count);
    fit.rms = rms_relative(std::vector<double>(count, fit.launch_s), times);
    fit.fitted = true;
    fit.how = fmt::format(
        "no empty-kernel rows: intercept of the {} smallest memory-bound kernels (includes "
        "the memory curve's half_work term)",
        count);
  }
  return fit;
}

// ---- efficiency curves ------------------------------------------------------------------

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
                              double min_fraction, const std::string& what) {
  CurveFit fit;
  std::vector<double> x, y, w, used_work, used_time;
  int skipped = 0;
  for (const CurvePoint& p : points) {
    const double net = p.time_s - launch_s;
    if (!(p.work > 0.0) || net < min_fraction * p.time_s) {
      ++skipped;
      continue;
    }
    const double inverse_eff = peak * net / p.work;
    x.push_back(1.0 / p.work);
    y.push_back(inverse_eff);
    const double relative = net / (p.time_s * inverse_eff);
    w.push_back(relative * relative);
    used_work.push_back(p.work);
    used_time.push_back(p.time_s);
  }
  if (skipped > 0)
    fit.notes.push_back(fmt::format("{}: skipped {} row(s) within {:.0f}% of the launch floor",
                                    what, skipped, 100.0 * min_fraction));
  if (used_work.size() < 2) {
    fit.notes.push_back(fmt::format("{}: {} usable row(s), need 2 distinct sizes", what,
                                    used_work.size()));
    return fit;
  }
  const double work_scale = median(used_work);
  std::vector<double> x_scaled;
  for (double xi : x) x_scaled.push_back(xi * work_scale);

  double inverse_max = 0.0, half = 0.0;
  try {
    const LineFit line = fit_line_weighted(x_scaled, y, w);
    inverse_max = line.intercept;
    half = line.slope * work_scale / line.intercept;
  } catch (const Error& e) {
    fit.notes.push_back(fmt::format("{}: {}", what, e.what()));
    return fit;
  }
  if (!(inverse_max > 0.0) || half < 0.0) {
    // Efficiency does not grow with size here: the best constant efficiency.
    fit.notes.push_back(fmt::format(
        "{}: the fitted curve is not increasing (1/max {:.4g}, half {:.4g}); fitted a constant "
        "efficiency (half_work = 0)",
        what, inverse_max, half));
    double sum_w = 0.0, sum_wy = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      sum_w += w[i];
      sum_wy += w[i] * y[i];
    }
    inverse_max = sum_wy / sum_w;
    half = 0.0;
  }
  double max = 1.0 / inverse_max;
  if (max > 1.0) {
    // 1/eff − 1 = half·(1/w) with max pinned at 1.
    std::vector<double> y_minus_one;
    for (double yi : y) y_minus_one.push_back(yi - 1.0);
    const double slope = fit_proportional_weighted(x_scaled, y_minus_one, w);
    fit.notes.push_back(fmt::format(
        "{}: fitted max {:.4f} exceeds 1 (measured faster than the base profile's peak); "
        "clamped to 1 and refitted half_work",
        what, max));
    max = 1.0;
    half = std::max(0.0, slope * work_scale);
  }
  fit.curve.max = max;
  fit.curve.half_work = half;
  std::vector<double> predicted;
  for (double work : used_work) predicted.push_back(launch_s + (work + half) / (peak * max));
  fit.rms = rms_relative(predicted, used_time);
  fit.measurements = static_cast<int>(used_work.size());
  fit.fitted = true;
  return fit;
}

// ---- collectives ------------------------------------------------------------------------

/// Ring bytes each rank sends for a payload S (collectives.hpp's convention for S) and the
/// number of ring steps, for a ring of n members.
struct RingCost {
  double wire_factor = 0.0;  ///< wire bytes / S
  int steps = 0;
};

RingCost ring_cost(const std::string& collective, int n) {
  const double nd = n;
  if (collective == "all_reduce") return {2.0 * (nd - 1.0) / nd, 2 * (n - 1)};
  if (collective == "all_gather" || collective == "reduce_scatter") return {(nd - 1.0) / nd, n - 1};
  if (collective == "send_recv") return {1.0, 1};
  fail(ErrorCode::kBadCsvRow, "unknown collective '{}' in the raw CSV (all_reduce, all_gather, reduce_scatter, "
       "send_recv)",
       collective);
}

/// Alpha-beta fit of one group: t = alpha + wire/bw with weights 1/t² (relative errors, so
/// 1 KiB and 1 GiB messages count alike). A negative alpha is clamped to 0 (bw refitted).
std::optional<CollectiveFit> fit_alpha_beta(const std::vector<const Measurement*>& rows,
                                            std::vector<std::string>& notes) {
  const Measurement& first = *rows.front();
  CollectiveFit fit;
  fit.collective = first.name;
  fit.scope = first.scope;
  fit.ranks = first.ranks;
  fit.nodes = first.nodes;
  const RingCost cost = ring_cost(first.name, first.ranks);
  std::vector<double> wire, time, weight;
  for (const Measurement* row : rows) {
    wire.push_back(cost.wire_factor * static_cast<double>(row->bytes));
    time.push_back(row->time_us_median / kUsPerS);
    weight.push_back(1.0 / (time.back() * time.back()));
  }
  double alpha = 0.0, inverse_bw = 0.0;
  try {
    const LineFit line = fit_line_weighted(wire, time, weight);
    alpha = line.intercept;
    inverse_bw = line.slope;
    if (alpha < 0.0) {
      alpha = 0.0;
      inverse_bw = fit_proportional_weighted(wire, time, weight);
    }
  } catch (const Error& e) {
    notes.push_back(fmt::format("{} {} n={}: {}", fit.collective, fit.scope, fit.ranks, e.what()));
    return std::nullopt;
  }
  if (!(inverse_bw > 0.0)) {
    notes.push_back(fmt::format("{} {} n={}: time does not grow with size; no bandwidth fitted",
                                fit.collective, fit.scope, fit.ranks));
    return std::nullopt;
  }
  std::vector<double> predicted;
  for (double bytes : wire) predicted.push_back(alpha + bytes * inverse_bw);
  fit.measurements = static_cast<int>(rows.size());
  fit.alpha_us = alpha * kUsPerS;
  fit.bus_bw_bytes_per_s = 1.0 / inverse_bw;
  fit.rms_relative_error = rms_relative(predicted, time);
  return fit;
}

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
                 std::vector<std::string>& notes) {
  LinkFit fit;
  if (rows.size() < 2) {
    if (!rows.empty())
      notes.push_back(fmt::format("{}: only {} usable row(s), need 2", what, rows.size()));
    return fit;
  }
  std::vector<double> steps, wire, time, weight;
  for (const LinkRow& r : rows) {
    steps.push_back(r.steps);
    wire.push_back(r.wire);
    time.push_back(r.time_s);
    weight.push_back(1.0 / (r.measured_s * r.measured_s));
  }
  double lambda = 0.0, inverse_bw = 0.0;
  try {
    const TwoTermFit two = fit_two_terms_weighted(steps, wire, time, weight);
    lambda = two.a;
    inverse_bw = two.b;
    if (lambda < 0.0) {
      lambda = 0.0;
      inverse_bw = fit_proportional_weighted(wire, time, weight);
    }
  } catch (const Error& e) {
    notes.push_back(fmt::format("{}: {}", what, e.what()));
    return fit;
  }
  if (!(inverse_bw > 0.0)) {
    notes.push_back(fmt::format("{}: time does not grow with size; link not fitted", what));
    return fit;
  }
  std::vector<double> predicted, measured;
  for (const LinkRow& r : rows) {
    predicted.push_back(r.offset_s + lambda * r.steps + r.wire * inverse_bw);
    measured.push_back(r.measured_s);
  }
  fit.fitted = true;
  fit.step_latency_s = lambda;
  fit.bw = 1.0 / inverse_bw;
  fit.measurements = static_cast<int>(rows.size());
  fit.rms = rms_relative(predicted, measured);
  return fit;
}

/// Path latency between two GPUs as an affine function of one link's latency ℓ:
/// path(ℓ) = fixed + count·ℓ, read off the simulator's own topology (so the mapping follows
/// whatever links hw_models/topology.cpp puts on the path).
struct PathLatencyModel {
  double fixed_s = 0.0;
  int count = 0;
};

PathLatencyModel path_latency_model(HardwareSpec hw, LinkSpec HardwareSpec::*link, int nodes,
                                    hw_models::Rank src, hw_models::Rank dst) {
  hw.nodes = nodes;
  (hw.*link).latency_ps = 0;
  const TimePs fixed = hw_models::Topology(hw).path_latency_ps(src, dst);
  (hw.*link).latency_ps = 1;
  const TimePs with_one = hw_models::Topology(hw).path_latency_ps(src, dst);
  return {static_cast<double>(fixed) / kPsPerS, static_cast<int>(with_one - fixed)};
}

TimePs seconds_to_ps(double seconds) {
  LYNX_CHECK(seconds >= 0.0 && seconds < 9e6, "time {} s out of range", seconds);
  return static_cast<TimePs>(std::llround(seconds * kPsPerS));
}

std::uint64_t to_bw(double bytes_per_s) {
  LYNX_CHECK(bytes_per_s > 0.0 && bytes_per_s < 1.8e19, "bandwidth {} out of range", bytes_per_s);
  return static_cast<std::uint64_t>(std::llround(bytes_per_s));
}

/// Sets a link from a joint scope fit: bandwidth = fitted ring bandwidth ÷ the profile's
/// collective_efficiency (kept), so the simulator's effective collective bandwidth equals the
/// measured one; latency from λ = fixed + count·ℓ along the simulator's path.
FieldFit apply_link_fit(const LinkFit& fit, const PathLatencyModel& path, LinkSpec& link,
                        const HardwareSpec& hw, const std::string& field,
                        const std::string& source, std::vector<std::string>& notes) {
  FieldFit out;
  out.field = field;
  out.fitted = true;
  out.measurements = fit.measurements;
  out.rms_relative_error = fit.rms;
  out.source = source;
  link.bw_bytes_per_s = to_bw(fit.bw / hw.collective_efficiency);
  if (path.count > 0) {
    const double latency_s = (fit.step_latency_s - path.fixed_s) / path.count;
    if (latency_s < 0.0)
      notes.push_back(fmt::format(
          "{}: the fitted step latency {} is below the other links' share of the path ({}); "
          "latency set to 0",
          field, format_us(fit.step_latency_s), format_us(path.fixed_s)));
    link.latency_ps = seconds_to_ps(std::max(0.0, latency_s));
  } else {
    notes.push_back(fmt::format("{}: the link is not on the simulated path; latency kept", field));
  }
  out.value = fmt::format("bw {}, latency {} (ring {} achieved, step latency {}; "
                          "collective_efficiency {} kept)",
                          format_bw(static_cast<double>(link.bw_bytes_per_s)),
                          format_us(static_cast<double>(link.latency_ps) / kPsPerS),
                          format_bw(fit.bw), format_us(fit.step_latency_s),
                          hw.collective_efficiency);
  return out;
}

// ---- helpers ----------------------------------------------------------------------------

std::vector<const Measurement*> rows_of(const RawMeasurements& raw, MeasurementKind kind) {
  std::vector<const Measurement*> out;
  for (const Measurement& row : raw.rows)
    if (row.kind == kind) out.push_back(&row);
  return out;
}

std::vector<const Measurement*> with_dtype(const std::vector<const Measurement*>& rows,
                                           const std::string& dtype, const char* what,
                                           std::vector<std::string>& notes) {
  std::vector<const Measurement*> out;
  std::map<std::string, int> other;
  for (const Measurement* row : rows) {
    if (row->dtype == dtype)
      out.push_back(row);
    else
      ++other[row->dtype.empty() ? "(none)" : row->dtype];
  }
  for (const auto& [name, count] : other)
    notes.push_back(fmt::format("{}: {} {} row(s) not used (the fit uses {})", what, count, name,
                                dtype));
  return out;
}

// ---- the fit, step by step ----------------------------------------------------------------

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
void check_base_profile(const HardwareSpec& base) {
  if (base.peak_flops_per_s == 0)
    fail(ErrorCode::kBadHardware, "fit: base profile '{}' has no gpu.peak; the efficiency curves are relative to it",
         base.profile);
  if (base.hbm_bw_bytes_per_s == 0)
    fail(ErrorCode::kBadHardware, "fit: base profile '{}' has no gpu.hbm_bw; the memory-bound curve is relative to it",
         base.profile);
  if (!(base.collective_efficiency > 0.0 && base.collective_efficiency <= 1.0))
    fail(ErrorCode::kBadHardware, "fit: base profile '{}' has collective_efficiency {} outside (0, 1]", base.profile,
         base.collective_efficiency);
}

/// gpu.name from the raw CSV's `device` header, if it has one.
void fit_device_name(FitState& st) {
  if (st.raw.metadata_value("device").empty()) return;
  st.fitted.gpu_name = st.raw.metadata_value("device");
  FieldFit name;
  name.field = "gpu.name";
  name.fitted = true;
  name.value = st.fitted.gpu_name;
  name.source = "device name from the raw CSV header";
  st.report.fields.push_back(name);
}

/// gpu.kernel_launch (fit_launch); returns the launch time in seconds the curves subtract
/// (the base's when nothing was measured).
double fit_launch_field(FitState& st, const std::vector<const Measurement*>& memory_rows) {
  std::vector<const Measurement*> launch_rows;
  int other_launch_rows = 0;
  for (const Measurement* row : rows_of(st.raw, MeasurementKind::kLaunch)) {
    if (row->name == "empty_kernel")
      launch_rows.push_back(row);
    else
      ++other_launch_rows;
  }
  if (other_launch_rows > 0)
    st.report.notes.push_back(
        fmt::format("gpu.kernel_launch: {} launch row(s) other than empty_kernel "
                    "(e.g. host-paced) recorded, not fitted",
                    other_launch_rows));
  const LaunchFit launch = fit_launch(launch_rows, memory_rows);
  double launch_s = static_cast<double>(st.base.kernel_launch_ps) / kPsPerS;
  if (launch.fitted) {
    launch_s = launch.launch_s;
    st.fitted.kernel_launch_ps = seconds_to_ps(launch_s);
    FieldFit f;
    f.field = "gpu.kernel_launch";
    f.fitted = true;
    f.measurements = launch.measurements;
    f.rms_relative_error = launch.rms;
    f.value = format_us(launch_s);
    f.source = st.source + " (" + launch.how + ")";
    st.report.fields.push_back(f);
  } else {
    st.report.fields.push_back(not_measured("gpu.kernel_launch", format_us(launch_s),
                                            "no launch or memory-bound rows"));
  }
  return launch_s;
}

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
                     double launch_s) {
  std::vector<CurvePoint> points;
  for (const Measurement* row : rows) {
    CurvePoint p;
    p.work = job.kind == MeasurementKind::kMemoryBound
                 ? static_cast<double>(row->bytes)
                 : 2.0 * static_cast<double>(row->m) * static_cast<double>(row->n) *
                       static_cast<double>(row->k) * static_cast<double>(row->batch);
    p.time_s = row->time_us_median / kUsPerS;
    points.push_back(p);
  }
  CurveFit fit =
      fit_efficiency_curve(points, job.roof, launch_s, st.options.min_work_fraction, job.field);
  st.report.notes.insert(st.report.notes.end(), fit.notes.begin(), fit.notes.end());
  if (fit.fitted) {
    st.fitted.*job.curve = fit.curve;
    FieldFit f;
    f.field = job.field;
    f.fitted = true;
    f.measurements = fit.measurements;
    f.rms_relative_error = fit.rms;
    f.value = format_curve(fit.curve, job.unit);
    f.source = st.source;
    st.report.fields.push_back(f);
  } else {
    st.report.fields.push_back(not_measured(job.field, format_curve(st.base.*job.curve, job.unit),
                                            points.empty() ? "no rows" : "too few usable rows"));
  }
}

/// gpu.gemm_efficiency from the GEMM rows of the chosen dtype.
void fit_gemm_field(FitState& st, double launch_s) {
  const CurveJob job{"gpu.gemm_efficiency", MeasurementKind::kGemm, &HardwareSpec::gemm,
                     static_cast<double>(st.base.peak_flops_per_s), "FLOPs"};
  fit_curve_field(st, job,
                  with_dtype(rows_of(st.raw, job.kind), st.options.dtype,
                             std::string(to_string(job.kind)).c_str(), st.report.notes),
                  launch_s);
}

/// gpu.attention_efficiency from the attention rows of the chosen dtype.
void fit_attention_field(FitState& st, double launch_s) {
  const CurveJob job{"gpu.attention_efficiency", MeasurementKind::kAttention,
                     &HardwareSpec::attention, static_cast<double>(st.base.peak_flops_per_s),
                     "FLOPs"};
  fit_curve_field(st, job,
                  with_dtype(rows_of(st.raw, job.kind), st.options.dtype,
                             std::string(to_string(job.kind)).c_str(), st.report.notes),
                  launch_s);
}

/// gpu.memory_bound_efficiency from `memory_rows` (already filtered by dtype).
void fit_memory_bound_field(FitState& st, const std::vector<const Measurement*>& memory_rows,
                            double launch_s) {
  const CurveJob job{"gpu.memory_bound_efficiency", MeasurementKind::kMemoryBound,
                     &HardwareSpec::memory_bound, static_cast<double>(st.base.hbm_bw_bytes_per_s),
                     "bytes"};
  fit_curve_field(st, job, memory_rows, launch_s);
}

/// A slowdown factor from (alone, concurrent) row pairs: median over the pairs of
/// t_concurrent / t_alone − 1, clamped >= 0, written to `target` and reported as `field`
/// (gpu.contention from the GEMM side, gpu.comm_contention from the communication side).
template <typename Pairs>
void fit_slowdown_field(FitState& st, const Pairs& pairs, const char* field, const char* pair_names,
                        double base_value, double& target) {
  std::vector<double> factors, alone, concurrent;
  bool standin = false;
  for (const auto& [key, pair] : pairs) {
    if (pair.first == nullptr || pair.second == nullptr) continue;
    if (!(pair.first->time_us_median > 0.0) || !(pair.second->time_us_median > 0.0)) continue;
    factors.push_back(pair.second->time_us_median / pair.first->time_us_median - 1.0);
    alone.push_back(pair.first->time_us_median);
    concurrent.push_back(pair.second->time_us_median);
    standin = standin || pair.first->scope == "standin";
  }
  if (factors.empty()) {
    st.report.fields.push_back(not_measured(field, fmt::format("{:.4f}", base_value),
                                            fmt::format("no {} pairs", pair_names)));
    return;
  }
  double f = median(factors);
  if (f < 0.0) {
    st.report.notes.push_back(fmt::format("{}: median slowdown {:.4f} < 0 clamped to 0", field, f));
    f = 0.0;
  }
  target = f;
  std::vector<double> predicted;
  for (double t : alone) predicted.push_back(t * (1.0 + f));
  FieldFit fit;
  fit.field = field;
  fit.fitted = true;
  fit.measurements = static_cast<int>(factors.size());
  fit.rms_relative_error = rms_relative(predicted, concurrent);
  fit.value = fmt::format("{:.4f}", f);
  fit.source = st.source + (standin ? " (against a device-to-device copy kernel standing in for "
                                      "NCCL: one GPU)"
                                    : "");
  st.report.fields.push_back(fit);
}

/// gpu.contention from the GEMM bursts alone / beside a communication burst; gpu.comm_contention
/// from the communication burst alone / beside one GEMM stream (1 + f · 1), per (GEMM size, bytes).
void fit_contention_field(FitState& st) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::string,
                      std::string>,
           std::pair<const Measurement*, const Measurement*>>
      gemm;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::uint64_t, std::string>,
           std::pair<const Measurement*, const Measurement*>>
      comm;
  for (const Measurement* row : rows_of(st.raw, MeasurementKind::kContention)) {
    const auto key = std::make_tuple(row->m, row->n, row->k, row->batch, row->dtype, row->scope);
    if (row->name == "gemm_alone") gemm[key].first = row;
    if (row->name == "gemm_concurrent") gemm[key].second = row;
    const auto comm_key = std::make_tuple(row->m, row->n, row->k, row->bytes, row->scope);
    if (row->name == "comm_alone") comm[comm_key].first = row;
    if (row->name == "comm_concurrent") comm[comm_key].second = row;
  }
  fit_slowdown_field(st, gemm, "gpu.contention", "gemm_alone/gemm_concurrent", st.base.contention_factor,
                     st.fitted.contention_factor);
  fit_slowdown_field(st, comm, "gpu.comm_contention", "comm_alone/comm_concurrent", st.base.comm_contention,
                     st.fitted.comm_contention);
}

/// Groups the collective rows on >= 2 ranks and reports one alpha-beta fit per group.
CollectiveGroups fit_collectives(FitState& st) {
  CollectiveGroups groups;
  int single_rank_rows = 0;
  for (const Measurement* row : rows_of(st.raw, MeasurementKind::kCollective)) {
    if (row->ranks < 2) {
      ++single_rank_rows;
      continue;
    }
    (void)ring_cost(row->name, row->ranks);  // rejects unknown collective names
    groups[{row->name, row->scope, row->ranks, row->nodes}].push_back(row);
  }
  if (single_rank_rows > 0)
    st.report.notes.push_back(fmt::format(
        "collectives: {} row(s) on 1 rank (n=1: a local copy, no link crossed) recorded but "
        "not fitted",
        single_rank_rows));
  for (const auto& [key, rows] : groups)
    if (auto fit = fit_alpha_beta(rows, st.report.notes)) st.report.collectives.push_back(*fit);
  return groups;
}

/// The intra-node link (NVLink, or PCIe on PCIe-only nodes): one joint fit over every intra
/// collective, t = λ·steps + wire/bw. Returns the fit (unfitted when not set).
LinkFit fit_intra_link(FitState& st, const CollectiveGroups& groups) {
  const HardwareSpec& base = st.base;
  const bool pcie_nodes = base.intra_node == IntraNode::kPcie;
  LinkSpec HardwareSpec::*intra_link = pcie_nodes ? &HardwareSpec::pcie : &HardwareSpec::nvlink;
  const std::string intra_field = pcie_nodes ? "node.pcie" : "node.nvlink";
  std::vector<LinkRow> intra_rows;
  for (const auto& [key, rows] : groups) {
    for (const Measurement* row : rows) {
      if (row->scope != "intra") continue;
      const RingCost cost = ring_cost(row->name, row->ranks);
      LinkRow r;
      r.steps = cost.steps;
      r.wire = cost.wire_factor * static_cast<double>(row->bytes);
      r.measured_s = row->time_us_median / kUsPerS;
      r.time_s = r.measured_s;
      intra_rows.push_back(r);
    }
  }
  LinkFit intra = fit_link(intra_rows, intra_field, st.report.notes);
  if (intra.fitted && base.gpus_per_node < 2) {
    st.report.notes.push_back(intra_field + ": the base profile has 1 GPU per node; link not set");
    intra.fitted = false;
  }
  if (intra.fitted) {
    const PathLatencyModel path = path_latency_model(base, intra_link, 1, 0, 1);
    st.report.fields.push_back(apply_link_fit(intra, path, st.fitted.*intra_link, base,
                                              intra_field, st.source, st.report.notes));
  } else {
    const LinkSpec& link = base.*intra_link;
    st.report.fields.push_back(not_measured(
        intra_field,
        fmt::format("bw {}, latency {}", format_bw(static_cast<double>(link.bw_bytes_per_s)),
                    format_us(static_cast<double>(link.latency_ps) / kPsPerS)),
        "no intra-node collectives on >= 2 GPUs"));
  }
  return intra;
}

/// collective_model nccl: the intra-node scope as NCCL's protocols (hw_models/collectives.hpp):
/// a row of ring steps s and per-rank wire bytes w takes t = c_p + s·λ_p + w/(B·f_p) on the
/// protocol p the model finds fastest, where c_p = nccl.p.base + the hardware path latency,
/// λ_p = nccl.p.step_nvlink (step_pcie on PCIe nodes), B = link bw × collective_efficiency and
/// f_p = nccl.p.bw_fraction (the wire format's, not fitted). Rows are assigned to protocols
/// with the base profile's values, then (c_p, λ_p, 1/B) are fitted jointly by weighted least
/// squares (1/t²) and the rows reassigned, until the assignment repeats (at most 20 rounds).
/// λ_p is fitted only where its rows have >= 2 step counts (several group sizes), c_p where a
/// protocol has >= 1 row; the rest keep the base's values. The link latency is kept.
LinkFit fit_nccl_intra(FitState& st, const CollectiveGroups& groups) {
  const HardwareSpec& base = st.base;
  const bool pcie_nodes = base.intra_node == IntraNode::kPcie;
  LinkSpec HardwareSpec::*intra_link = pcie_nodes ? &HardwareSpec::pcie : &HardwareSpec::nvlink;
  TimePs NcclProtocol::*step_field = pcie_nodes ? &NcclProtocol::step_pcie_ps : &NcclProtocol::step_nvlink_ps;
  const std::string link_field = pcie_nodes ? "node.pcie" : "node.nvlink";
  const std::string step_name = pcie_nodes ? "step_pcie" : "step_nvlink";
  struct Row {
    double steps, wire, buffer, time;  ///< buffer: the bytes of the call's buffer pass (0: send/recv)
  };
  std::vector<Row> rows;
  for (const auto& [key, group] : groups)
    for (const Measurement* row : group) {
      if (row->scope != "intra") continue;
      const RingCost cost = ring_cost(row->name, row->ranks);
      rows.push_back({static_cast<double>(cost.steps), cost.wire_factor * static_cast<double>(row->bytes),
                      row->name == "send_recv" ? 0.0 : static_cast<double>(row->bytes), row->time_us_median / kUsPerS});
    }
  LinkFit out;
  if (rows.size() < 2 || base.gpus_per_node < 2) {
    const LinkSpec& link = base.*intra_link;
    st.report.fields.push_back(not_measured(
        link_field,
        fmt::format("bw {}", format_bw(static_cast<double>(link.bw_bytes_per_s))),
        "fewer than 2 intra-node collectives on >= 2 GPUs"));
    return out;
  }
  HardwareSpec one_node = base;
  one_node.nodes = 1;
  const double path_s = static_cast<double>(hw_models::Topology(one_node).path_latency_ps(0, 1)) / kPsPerS;
  struct Proto {
    const char* name;
    NcclProtocol* fitted;
    double f, c, lambda;
  };
  std::vector<Proto> protos;
  for (auto [name, member] : {std::pair{"simple", &NcclSpec::simple}, std::pair{"ll128", &NcclSpec::ll128},
                              std::pair{"ll", &NcclSpec::ll}}) {
    NcclProtocol& p = st.fitted.nccl.*member;
    if (p.bw_fraction > 0.0)
      protos.push_back({name, &p, p.bw_fraction, static_cast<double>(p.base_ps) / kPsPerS + path_s,
                        static_cast<double>(p.*step_field) / kPsPerS});
  }
  double inv_b = 1.0 / (static_cast<double>((base.*intra_link).bw_bytes_per_s) * base.collective_efficiency);
  // 1 / nccl.buffer_bw (0: no buffer pass), fitted when rows of several sizes have one.
  double inv_buffer = base.nccl.buffer_bw_bytes_per_s > 0 ? 1.0 / static_cast<double>(base.nccl.buffer_bw_bytes_per_s) : 0.0;
  const bool fit_buffer = std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.buffer != rows.front().buffer; });
  std::vector<std::size_t> assigned(rows.size(), SIZE_MAX);
  int rounds = 0;
  for (; rounds < 20; ++rounds) {
    bool changed = false;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::size_t best = 0;
      double best_t = 0.0;
      for (std::size_t p = 0; p < protos.size(); ++p) {
        const double t = protos[p].c + rows[i].steps * protos[p].lambda + rows[i].wire * inv_b / protos[p].f +
                         rows[i].buffer * inv_buffer;
        if (p == 0 || t < best_t) {
          best = p;
          best_t = t;
        }
      }
      changed = changed || assigned[i] != best;
      assigned[i] = best;
    }
    if (!changed) break;
    // Columns: c_p and λ_p of each protocol that can be fitted, then 1/B.
    std::vector<std::vector<double>> columns;
    std::vector<std::pair<std::size_t, bool>> what;  // (protocol, is λ)
    for (std::size_t p = 0; p < protos.size(); ++p) {
      std::vector<double> one(rows.size(), 0.0), steps(rows.size(), 0.0);
      double first_steps = -1.0;
      bool several_steps = false, any = false;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (assigned[i] != p) continue;
        any = true;
        one[i] = 1.0;
        steps[i] = rows[i].steps;
        if (first_steps < 0.0) first_steps = rows[i].steps;
        several_steps = several_steps || rows[i].steps != first_steps;
      }
      if (!any) continue;
      columns.push_back(one);
      what.push_back({p, false});
      if (several_steps) {
        columns.push_back(steps);
        what.push_back({p, true});
      }
    }
    std::vector<double> wire(rows.size()), y(rows.size()), weight(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Proto& pr = protos[assigned[i]];
      wire[i] = rows[i].wire / pr.f;
      y[i] = rows[i].time;
      weight[i] = 1.0 / (rows[i].time * rows[i].time);
      // Terms kept from the base move to the left-hand side.
      bool lambda_fitted = false;
      for (const auto& [p, is_lambda] : what) lambda_fitted = lambda_fitted || (p == assigned[i] && is_lambda);
      if (!lambda_fitted) y[i] -= rows[i].steps * pr.lambda;
      if (!fit_buffer) y[i] -= rows[i].buffer * inv_buffer;
    }
    if (fit_buffer) {
      std::vector<double> buffer(rows.size());
      for (std::size_t i = 0; i < rows.size(); ++i) buffer[i] = rows[i].buffer;
      columns.push_back(buffer);
    }
    columns.push_back(wire);
    std::vector<double> coef;
    try {
      coef = fit_columns_weighted(columns, y, weight);
    } catch (const Error& e) {
      st.report.notes.push_back(fmt::format("nccl: {}; kept the base profile's values", e.what()));
      return out;
    }
    for (std::size_t j = 0; j < what.size(); ++j) {
      Proto& pr = protos[what[j].first];
      (what[j].second ? pr.lambda : pr.c) = std::max(0.0, coef[j]);
    }
    if (!(coef.back() > 0.0)) {
      st.report.notes.push_back("nccl: time does not grow with size; kept the base profile's values");
      return out;
    }
    inv_b = coef.back();
    if (fit_buffer) inv_buffer = std::max(0.0, coef[coef.size() - 2]);
  }
  std::vector<double> predicted, measured;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Proto& pr = protos[assigned[i]];
    predicted.push_back(pr.c + rows[i].steps * pr.lambda + rows[i].wire * inv_b / pr.f + rows[i].buffer * inv_buffer);
    measured.push_back(rows[i].time);
  }
  const double rms = rms_relative(predicted, measured);
  LinkSpec& link = st.fitted.*intra_link;
  link.bw_bytes_per_s = to_bw(1.0 / inv_b / base.collective_efficiency);
  FieldFit bw;
  bw.field = link_field;
  bw.fitted = true;
  bw.measurements = static_cast<int>(rows.size());
  bw.rms_relative_error = rms;
  bw.value = fmt::format("bw {} (ring {} achieved; collective_efficiency {} kept; latency kept)",
                         format_bw(static_cast<double>(link.bw_bytes_per_s)), format_bw(1.0 / inv_b),
                         base.collective_efficiency);
  bw.source = st.source + " (NCCL protocol fit)";
  st.report.fields.push_back(bw);
  if (fit_buffer && inv_buffer > 0.0) {
    st.fitted.nccl.buffer_bw_bytes_per_s = to_bw(1.0 / inv_buffer);
    FieldFit f;
    f.field = "nccl.buffer_bw";
    f.fitted = true;
    f.measurements = static_cast<int>(rows.size());
    f.rms_relative_error = rms;
    f.value = format_bw(1.0 / inv_buffer);
    f.source = st.source + " (NCCL protocol fit)";
    st.report.fields.push_back(f);
  } else {
    st.report.fields.push_back(not_measured("nccl.buffer_bw", fit_buffer ? "0 (fitted none)" : "kept",
                                            fit_buffer ? "the fit found no buffer pass" : "rows of one size only"));
    if (fit_buffer) st.fitted.nccl.buffer_bw_bytes_per_s = 0;
  }
  for (const Proto& pr : protos) {
    int used = 0;
    for (std::size_t a : assigned) used += protos[a].fitted == pr.fitted ? 1 : 0;
    if (used == 0) {
      st.report.fields.push_back(not_measured(fmt::format("nccl.{}", pr.name), "kept",
                                              "no row is fastest on this protocol"));
      continue;
    }
    pr.fitted->base_ps = seconds_to_ps(std::max(0.0, pr.c - path_s));
    pr.fitted->*step_field = seconds_to_ps(pr.lambda);
    FieldFit f;
    f.field = fmt::format("nccl.{}", pr.name);
    f.fitted = true;
    f.measurements = used;
    f.rms_relative_error = rms;
    f.value = fmt::format("base {}, {} {} ({} rounds)", format_us(std::max(0.0, pr.c - path_s)), step_name,
                          format_us(pr.lambda), rounds);
    f.source = st.source + " (NCCL protocol fit)";
    st.report.fields.push_back(f);
  }
  out.fitted = true;
  out.bw = 1.0 / inv_b;
  for (const Proto& pr : protos)
    if (pr.fitted == &st.fitted.nccl.simple) out.step_latency_s = pr.lambda;
  out.measurements = static_cast<int>(rows.size());
  out.rms = rms;
  return out;
}

/// The inter-node NIC link, hierarchical as the simulator plans it (hw_models/collectives.hpp):
/// with k ranks on each of N nodes, all-reduce = intra reduce-scatter + inter ring all-reduce
/// of the S/k shard + intra all-gather; reduce-scatter and all-gather have one intra phase.
/// The intra phases are predicted with the (just fitted, else base) intra link and subtracted;
/// the rest is fitted as t' = λ·steps + wire_nic/bw, where wire_nic = ceil(k/nics)·
/// factor(N)·S/k is what one NIC carries (rings of ranks with the same local index share
/// their rail's NIC). Send/recv across nodes is one flow, one step.
void fit_inter_link(FitState& st, const CollectiveGroups& groups, const LinkFit& intra) {
  const HardwareSpec& base = st.base;
  std::vector<std::string>& notes = st.report.notes;
  std::vector<LinkRow> inter_rows;
  bool inter_seen = false;
  int gpus_per_node_seen = 0;
  for (const auto& [key, rows] : groups) {
    for (const Measurement* row : rows) {
      if (row->scope != "inter") continue;
      inter_seen = true;
      if (row->nodes < 2 || row->ranks % row->nodes != 0) {
        notes.push_back(fmt::format(
            "node.nic: {} over {} ranks on {} nodes is not an even hierarchical layout; skipped",
            row->name, row->ranks, row->nodes));
        continue;
      }
      const int k = row->ranks / row->nodes;
      gpus_per_node_seen = std::max(gpus_per_node_seen, k);
      const double s = static_cast<double>(row->bytes);
      LinkRow r;
      r.measured_s = row->time_us_median / kUsPerS;
      if (row->name == "send_recv") {
        r.steps = 1;
        r.wire = s;
      } else {
        const RingCost inter_cost = ring_cost(row->name, row->nodes);
        const int nics = std::max(1, base.nics_per_node);
        const double rings_per_nic = std::ceil(static_cast<double>(k) / nics);
        r.steps = inter_cost.steps;
        r.wire = rings_per_nic * inter_cost.wire_factor * s / k;
        if (k > 1) {
          // One intra ring phase: (k−1)/k·S at the intra ring bandwidth, k−1 steps.
          double intra_bw = 0.0, intra_step = 0.0;
          if (intra.fitted) {
            intra_bw = intra.bw;
            intra_step = intra.step_latency_s;
          } else {
            HardwareSpec one_node = base;
            one_node.nodes = 1;
            const hw_models::Topology topo(one_node);
            intra_bw = static_cast<double>(topo.path_bw_bytes_per_s(0, 1)) *
                       base.collective_efficiency;
            intra_step = static_cast<double>(topo.path_latency_ps(0, 1)) / kPsPerS;
          }
          const double phase = (k - 1.0) / k * s / intra_bw + (k - 1) * intra_step;
          r.offset_s = (row->name == "all_reduce" ? 2.0 : 1.0) * phase;
        }
      }
      r.time_s = r.measured_s - r.offset_s;
      if (r.time_s <= 0.0) {
        notes.push_back(fmt::format(
            "node.nic: {} of {} bytes: the modelled intra-node phases ({}) exceed the measured "
            "time ({}); skipped",
            row->name, row->bytes, format_us(r.offset_s), format_us(r.measured_s)));
        continue;
      }
      inter_rows.push_back(r);
    }
  }
  LinkFit inter = fit_link(inter_rows, "node.nic", notes);
  if (!inter.fitted) {
    st.report.fields.push_back(not_measured(
        "node.nic",
        fmt::format("bw {}, latency {}", format_bw(static_cast<double>(base.nic.bw_bytes_per_s)),
                    format_us(static_cast<double>(base.nic.latency_ps) / kPsPerS)),
        inter_seen ? "inter-node rows unusable (see notes)" : "no inter-node collectives"));
    return;
  }
  HardwareSpec two_nodes = base;
  if (gpus_per_node_seen > 0 && two_nodes.gpus_per_node < gpus_per_node_seen)
    notes.push_back(fmt::format("node.nic: measured {} ranks per node, the base profile has {}",
                                gpus_per_node_seen, base.gpus_per_node));
  const PathLatencyModel path =
      path_latency_model(two_nodes, &HardwareSpec::nic, 2, 0, base.gpus_per_node);
  st.report.fields.push_back(
      apply_link_fit(inter, path, st.fitted.nic, base, "node.nic", st.source, notes));
  const double pcie_bw = static_cast<double>(st.fitted.pcie.bw_bytes_per_s);
  if (static_cast<double>(st.fitted.nic.bw_bytes_per_s) > pcie_bw)
    notes.push_back(fmt::format(
        "node.nic: fitted {} exceeds node.pcie ({}), which the simulated GPUDirect path also "
        "crosses: inter-node transfers stay limited by PCIe",
        format_bw(static_cast<double>(st.fitted.nic.bw_bytes_per_s)), format_bw(pcie_bw)));
}

/// collective_efficiency is kept by design: measured ring bandwidth goes into the links.
void report_collective_efficiency(FitState& st) {
  FieldFit eff;
  eff.field = "collective_efficiency";
  eff.value = fmt::format("{}", st.base.collective_efficiency);
  eff.source = "kept from the base profile by design: measured ring bandwidth goes into the "
               "link bandwidths (divided by this factor)";
  st.report.fields.push_back(eff);
}

/// The fitted profile's source: how it was made, and which fields kept the base's values.
std::string fitted_source(const FitState& st) {
  std::vector<std::string> missing;
  for (const FieldFit& f : st.report.fields)
    if (!f.fitted && f.field != "collective_efficiency") missing.push_back(f.field);
  std::string source =
      fmt::format("{} by lynxsim fit (base profile {})", st.source, st.base.profile);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) {
      if (!list.empty()) list += ", ";
      list += m;
    }
    source += "; not measured, kept from base: " + list;
  }
  return source;
}

}  // namespace

const FieldFit* FitReport::find(const std::string& field) const {
  for (const FieldFit& f : fields)
    if (f.field == field) return &f;
  return nullptr;
}

HardwareSpec fit_profile(const RawMeasurements& raw, const HardwareSpec& base, FitReport* report,
                         const FitOptions& options) {
  check_base_profile(base);
  FitReport local_report;
  FitReport& rep = report != nullptr ? *report : local_report;
  rep = FitReport{};
  rep.device = raw.device_name();
  rep.raw_source = raw.source_label.empty() ? std::string("raw measurements") : raw.source_label;
  HardwareSpec fitted = base;
  FitState st{raw, base, options, rep, fitted,
              fmt::format("fitted from {} on {}", rep.raw_source, rep.device)};

  fit_device_name(st);
  // The memory-bound rows also give the launch fallback; launch comes first, as every curve
  // subtracts it.
  const std::vector<const Measurement*> memory_rows = with_dtype(
      rows_of(raw, MeasurementKind::kMemoryBound), options.dtype, "memory_bound", rep.notes);
  const double launch_s = fit_launch_field(st, memory_rows);
  fit_gemm_field(st, launch_s);
  fit_attention_field(st, launch_s);
  fit_memory_bound_field(st, memory_rows, launch_s);
  fit_contention_field(st);
  const CollectiveGroups groups = fit_collectives(st);
  const LinkFit intra = base.collective_model == CollectiveModel::kNccl ? fit_nccl_intra(st, groups)
                                                                       : fit_intra_link(st, groups);
  fit_inter_link(st, groups, intra);
  report_collective_efficiency(st);
  fitted.source = fitted_source(st);
  return fitted;
}

std::string format_fit_report(const FitReport& report) {
  std::string out = fmt::format("calibration fit: {} on {}\n", report.raw_source, report.device);
  out += fmt::format("{:<28} {:>5} {:>9}  {}\n", "field", "rows", "rms err", "value / source");
  for (const FieldFit& f : report.fields) {
    const std::string rms = f.fitted && f.measurements > 0
                                ? fmt::format("{:.2f}%", 100.0 * f.rms_relative_error)
                                : std::string("-");
    out += fmt::format("{:<28} {:>5} {:>9}  {}\n", f.field, f.fitted ? f.measurements : 0, rms,
                       f.value);
    out += fmt::format("{:<28} {:>5} {:>9}  [{}]\n", "", "", "", f.source);
  }
  if (!report.collectives.empty()) {
    out += "collective alpha-beta fits (t = alpha + wire/bus_bw, ring wire bytes):\n";
    out += fmt::format("  {:<15} {:<6} {:>5} {:>5} {:>5} {:>11} {:>12} {:>8}\n", "collective",
                       "scope", "ranks", "nodes", "rows", "alpha", "bus bw", "rms err");
    for (const CollectiveFit& c : report.collectives)
      out += fmt::format("  {:<15} {:<6} {:>5} {:>5} {:>5} {:>8.2f} us {:>7.1f} GB/s {:>7.2f}%\n",
                         c.collective, c.scope, c.ranks, c.nodes, c.measurements, c.alpha_us,
                         c.bus_bw_bytes_per_s / 1e9, 100.0 * c.rms_relative_error);
  }
  if (!report.notes.empty()) {
    out += "notes:\n";
    for (const std::string& note : report.notes) out += "  - " + note + "\n";
  }
  return out;
}

}  // namespace lynx::calibrate
