#pragma once
/// Turns raw microbenchmark measurements into a hardware profile: efficiency curves, kernel
/// launch overhead, collective alpha-beta per scope mapped onto the links, and the contention
/// factor. Every estimator is documented at its function in fitter.cpp or fit_*.cpp and in
/// docs/calibration.md.
#include "calibrate/raw_csv.hpp"
#include "scenarios/scenario.hpp"

#include <string>
#include <vector>

namespace lynx::calibrate {

/// How one profile field was obtained.
struct FieldFit {
  std::string field;     ///< profile key, e.g. "gpu.gemm_efficiency"
  bool fitted = false;   ///< false: not measured, the base profile's value is kept
  int measurements = 0;  ///< rows used
  /// RMS over those rows of (predicted − measured)/measured time, with the fitted values.
  double rms_relative_error = 0.0;
  std::string value;     ///< the value now in the profile, with units
  std::string source;    ///< "fitted from RAW on DEVICE" or "not measured: ..."
};

/// Alpha-beta fit of one collective on one scope and group size: t = alpha + wire/bus_bw, with
/// ring wire bytes (2(n−1)/n·S all-reduce, (n−1)/n·S all-gather / reduce-scatter, S send/recv).
struct CollectiveFit {
  std::string collective;  ///< all_reduce, all_gather, reduce_scatter, send_recv
  std::string scope;       ///< intra, inter
  int ranks = 0;
  int nodes = 0;
  int measurements = 0;
  double alpha_us = 0.0;
  double bus_bw_bytes_per_s = 0.0;
  double rms_relative_error = 0.0;
};

/// Everything the fit decided, for the user and for docs.
struct FitReport {
  std::string device;
  std::string raw_source;
  std::vector<FieldFit> fields;
  std::vector<CollectiveFit> collectives;
  std::vector<std::string> notes;  ///< skipped rows, clamps, fallbacks

  /// The entry for `field`, or nullptr.
  const FieldFit* find(const std::string& field) const;
};

/// Fit choices.
struct FitOptions {
  /// GEMM / attention / memory-bound rows of this dtype are used; the others are reported
  /// as skipped. The profile has one set of curves ("dense bf16/fp16").
  std::string dtype = "bf16";
  /// Rows whose time minus the launch overhead is below this fraction of their time are too
  /// close to the launch floor to say anything about efficiency and are skipped.
  double min_work_fraction = 0.02;
};

/// Fits a profile from `raw`, starting from `base` (peak FLOP/s, HBM bandwidth and every field
/// without data are kept). Sets HardwareSpec::source to "fitted from <raw source> on <device>
/// (base profile <base.profile>)". `report` (optional) receives one FieldFit per profile field
/// the fitter can set, fitted or not. Throws lynx::Error when `base` lacks peak FLOP/s or HBM
/// bandwidth, which the efficiency curves are relative to.
HardwareSpec fit_profile(const RawMeasurements& raw, const HardwareSpec& base, FitReport* report,
                         const FitOptions& options = {});

/// Human-readable report: one line per field (fitted value, rows, RMS error, source) and one
/// per collective fit, then the notes.
std::string format_fit_report(const FitReport& report);

}  // namespace lynx::calibrate
