#pragma once
/// `lynxsim fit`: raw CSV(s) + a base profile -> fitted profile YAML, fit report, and tables
/// comparing the fitted profile with the base (datasheet) one. The CLI only parses options
/// into FitCommandOptions and prints FitCommandResult::text.
#include "calibrate/fitter.hpp"
#include "calibrate/raw_csv.hpp"
#include "scenarios/scenario.hpp"

#include <string>
#include <vector>

namespace lynx::calibrate {

/// Options of `lynxsim fit RAW.csv [RAW2.csv ...] --base PROFILE --out FITTED.yaml
/// [--name NAME] [--dtype bf16|fp16]`.
struct FitCommandOptions {
  std::vector<std::string> raw_csv_paths;  ///< at least one; merged in order
  std::string base_profile = "h200-sxm-141gb";  ///< built-in profile name or YAML file path
  std::string output_path;   ///< fitted profile YAML; empty: not written
  std::string profile_name;  ///< name in the fitted profile; empty: "<base>-calibrated"
  FitOptions fit;
};

/// Everything `lynxsim fit` computes.
struct FitCommandResult {
  HardwareSpec base;
  HardwareSpec fitted;
  FitReport report;
  std::string profile_yaml;  ///< hardware_profile_to_yaml(fitted), checked to load back
  std::string text;          ///< report + comparison tables, what the CLI prints
};

/// Runs the fit; writes options.output_path when set. Throws lynx::Error (unreadable or
/// malformed CSV with its line number, unknown base profile, unwritable output ...).
FitCommandResult run_fit_command(const FitCommandOptions& options);

/// A built-in profile by name, or a profile YAML file when `name_or_path` is an existing
/// file; throws lynx::Error listing the built-in names otherwise.
HardwareSpec resolve_hardware_profile(const std::string& name_or_path);

/// Table of every field the fitter can set: base value, fitted value, fitted/base.
std::string profile_comparison_table(const HardwareSpec& base, const HardwareSpec& fitted);

/// Per kind of measurement, how well each profile predicts the measured times through the
/// simulator's own models (hw_models::kernel_time_ps for kernels; steps·path latency +
/// wire/(path bandwidth·collective_efficiency) for single-node rings): rows, RMS and median
/// relative error for base and fitted. GEMM/attention/memory rows of `dtype` only.
std::string prediction_error_table(const RawMeasurements& raw, const HardwareSpec& base,
                                   const HardwareSpec& fitted, const std::string& dtype);

}  // namespace lynx::calibrate
