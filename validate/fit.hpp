#pragma once
/// Calibration of a few global hardware-profile parameters against measured runs: cyclic
/// coordinate descent, each coordinate searched by golden section over a fixed interval, on
/// the mean absolute log error of the predicted iteration times. Deterministic; no per-row or
/// per-configuration terms.
#include "scenarios/scenario.hpp"
#include "validate/measured_runs.hpp"
#include "validate/validation.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace lynx::validate {

/// One fittable parameter of a hardware profile, in the unit it is reported in.
struct FitParameter {
  std::string key;      ///< profile key, e.g. "gpu.kernel_launch"
  std::string unit;     ///< unit of the values below ("us", "FLOP", "B", "" for ratios)
  std::string meaning;  ///< what it stands for physically
  double lower = 0;     ///< search interval, in `unit`
  double upper = 0;
  bool log_scale = false;  ///< search over log(value) (scale parameters spanning decades)
  double (*get)(const HardwareSpec&) = nullptr;  ///< value in `unit`
  void (*set)(HardwareSpec&, double) = nullptr;  ///< from a value in `unit`
};

/// Every parameter `--fit-param` accepts (kernel launch, host issue costs, GEMM/attention/
/// memory-bound efficiency curves, NVLink latency, collective efficiency, contention).
const std::vector<FitParameter>& fittable_parameters();
/// The parameter with this profile key; throws lynx::Error listing the known keys.
const FitParameter& fittable_parameter(const std::string& key);
/// The five parameters `lynxsim validate --fit` fits by default (VALIDATION.md says why):
/// gpu.host_kernel, gpu.host_collective, gpu.gemm_efficiency.max, gpu.gemm_efficiency.half_flops,
/// gpu.memory_bound_efficiency.max (the host model replaces the kernel-launch and NVLink-latency
/// stand-ins of earlier fits).
std::vector<std::string> default_fit_keys();

/// `value` rounded to `digits` significant decimal digits (0 stays 0).
double round_significant(double value, int digits);

struct FitOptions {
  std::vector<std::string> keys = default_fit_keys();  ///< at most 5, no duplicates
  int sweeps = 3;             ///< passes over all coordinates
  int golden_steps = 12;      ///< golden-section interval reductions per coordinate
  /// Inner loop subsample: the optimiser scores every `inner_stride`-th training row
  /// (1 = all); the final objective is reported on all training rows.
  std::size_t inner_stride = 4;
  int significant_digits = 3;  ///< fitted values are rounded to this many digits at the end
  unsigned threads = 1;        ///< simulate_runs workers per evaluation (results do not depend on it)
};

struct FitResult {
  HardwareSpec hardware;             ///< the base hardware with the fitted values set
  std::vector<std::string> keys;
  std::vector<double> start_values;  ///< in each parameter's unit
  std::vector<double> values;        ///< fitted, rounded
  double start_objective = 0;        ///< mean |ln(pred/meas)| on all training rows, before
  double objective = 0;              ///< ... and after the fit (rounded values)
  std::size_t inner_rows = 0;        ///< rows the optimiser scored
  int evaluations = 0;               ///< objective evaluations (each simulates inner_rows rows)
};

/// Fits `options.keys` of base.hardware on the rows `train` of `runs` (mean absolute log
/// error). `progress` is called with (evaluations done, evaluation budget). Throws lynx::Error
/// for an unknown or repeated key, more than 5 keys, or an empty training set.
FitResult fit_hardware(const Scenario& base, const std::vector<MeasuredRun>& runs,
                       const std::vector<std::size_t>& train, const std::string& file_label,
                       const FitOptions& options, const Progress& progress = {});

}  // namespace lynx::validate
