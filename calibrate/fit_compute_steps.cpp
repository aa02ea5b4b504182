// calibrate::detail: the fit steps of the compute fields: device name, launch overhead, the
// GEMM, attention and memory-bound curves, and the contention factors.
#include "calibrate/fit_steps.hpp"

#include <algorithm>
#include <cmath>

namespace lynx::calibrate::detail {

// ---- the fit, step by step ----------------------------------------------------------------

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

void fit_gemm_field(FitState& st, double launch_s) {
  const CurveJob job{"gpu.gemm_efficiency", MeasurementKind::kGemm, &HardwareSpec::gemm,
                     static_cast<double>(st.base.peak_flops_per_s), "FLOPs"};
  fit_curve_field(st, job,
                  with_dtype(rows_of(st.raw, job.kind), st.options.dtype,
                             std::string(to_string(job.kind)).c_str(), st.report.notes),
                  launch_s);
}

void fit_attention_field(FitState& st, double launch_s) {
  const CurveJob job{"gpu.attention_efficiency", MeasurementKind::kAttention,
                     &HardwareSpec::attention, static_cast<double>(st.base.peak_flops_per_s),
                     "FLOPs"};
  fit_curve_field(st, job,
                  with_dtype(rows_of(st.raw, job.kind), st.options.dtype,
                             std::string(to_string(job.kind)).c_str(), st.report.notes),
                  launch_s);
}

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

}  // namespace lynx::calibrate::detail
