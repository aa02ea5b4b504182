// calibrate::detail: fits of one model to measurements: launch overhead, efficiency curves,
// collective alpha-beta, link bandwidth and latency.
#include "calibrate/fit_steps.hpp"
#include "hw_models/collectives.hpp"

#include <algorithm>
#include <cmath>

namespace lynx::calibrate::detail {

// ---- value formatting for the report ----------------------------------------------------

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

RingCost ring_cost(const std::string& collective, int n) {
  const double nd = n;
  using hw_models::buffer_pass_share;
  using hw_models::Collective;
  if (collective == "all_reduce") return {2.0 * (nd - 1.0) / nd, 2 * (n - 1), buffer_pass_share(Collective::kAllReduce)};
  if (collective == "all_gather") return {(nd - 1.0) / nd, n - 1, buffer_pass_share(Collective::kAllGather)};
  if (collective == "reduce_scatter") return {(nd - 1.0) / nd, n - 1, buffer_pass_share(Collective::kReduceScatter)};
  if (collective == "send_recv") return {1.0, 1, buffer_pass_share(Collective::kSendRecv)};
  fail(ErrorCode::kBadCsvRow, "unknown collective '{}' in the raw CSV (all_reduce, all_gather, reduce_scatter, "
       "send_recv)",
       collective);
}

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

}  // namespace lynx::calibrate::detail
