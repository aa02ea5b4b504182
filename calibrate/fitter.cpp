#include "calibrate/fitter.hpp"
#include "calibrate/fit_steps.hpp"

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

namespace detail {

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

}  // namespace detail

using namespace detail;

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
