#include "calibrate/fit_command.hpp"

#include "calibrate/stats.hpp"
#include "hw_models/compute_model.hpp"
#include "hw_models/collectives.hpp"
#include "hw_models/topology.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/error.hpp"
#include "common/files.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <vector>

namespace lynx::calibrate {

namespace {

std::string gb_per_s(std::uint64_t bw) {
  return fmt::format("{:.1f} GB/s", static_cast<double>(bw) / 1e9);
}
std::string us(TimePs t) { return fmt::format("{:.3f} us", ps_to_us(t)); }

std::string ratio(double base, double fitted) {
  if (base == 0.0) return "-";
  return fmt::format("{:.3f}", fitted / base);
}

struct ComparisonRow {
  std::string field;
  std::string base_text, fitted_text;
  double base_value, fitted_value;
};

/// Relative error of `predicted` against `measured` (both seconds).
double relative_error(double predicted, double measured) {
  return (predicted - measured) / measured;
}

struct ErrorStats {
  int rows = 0;
  double rms = 0.0;
  double median_abs = 0.0;
};

ErrorStats error_stats(const std::vector<double>& errors) {
  ErrorStats s;
  if (errors.empty()) return s;
  double sum = 0.0;
  std::vector<double> abs_errors;
  for (double e : errors) {
    sum += e * e;
    abs_errors.push_back(std::fabs(e));
  }
  s.rows = static_cast<int>(errors.size());
  s.rms = std::sqrt(sum / static_cast<double>(errors.size()));
  s.median_abs = median(abs_errors);
  return s;
}

/// The simulator's idle single-node time for a collective row: its own plan of the collective
/// on the first `ranks` GPUs (hw_models/collectives.hpp; alpha-beta or NCCL protocols, as the
/// profile says). Empty for rows it does not model (one rank, other scopes, a node smaller
/// than the ring).
std::optional<double> ring_time_s(const HardwareSpec& hw, const Measurement& row) {
  if (row.scope != "intra" || row.ranks < 2 || row.ranks > hw.gpus_per_node) return std::nullopt;
  hw_models::Collective kind = hw_models::Collective::kAllReduce;
  if (row.name == "all_reduce") kind = hw_models::Collective::kAllReduce;
  else if (row.name == "all_gather") kind = hw_models::Collective::kAllGather;
  else if (row.name == "reduce_scatter") kind = hw_models::Collective::kReduceScatter;
  else if (row.name == "send_recv") kind = hw_models::Collective::kSendRecv;
  else return std::nullopt;
  HardwareSpec one_node = hw;
  one_node.nodes = 1;
  const hw_models::Topology topo(one_node);
  std::vector<hw_models::Rank> ranks;
  for (int r = 0; r < (kind == hw_models::Collective::kSendRecv ? 2 : row.ranks); ++r) ranks.push_back(r);
  return ps_to_s(hw_models::idle_collective_time_ps(
      topo, hw_models::plan_collective(topo, one_node, kind, hw_models::Algorithm::kRing, ranks, row.bytes)));
}

}  // namespace

HardwareSpec resolve_hardware_profile(const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec))
    return load_hardware_profile_file(name_or_path);
  for (const std::string& name : builtin_profile_names())
    if (name == name_or_path) return builtin_hardware_profile(name);
  std::string names;
  for (const std::string& name : builtin_profile_names()) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  fail(ErrorCode::kUnknownProfile, "base profile '{}' is neither a file nor a built-in profile (built-in: {})", name_or_path,
       names);
}

std::string profile_comparison_table(const HardwareSpec& base, const HardwareSpec& fitted) {
  const auto bw_row = [](std::string field, std::uint64_t b, std::uint64_t f) {
    return ComparisonRow{std::move(field), gb_per_s(b), gb_per_s(f), static_cast<double>(b),
                         static_cast<double>(f)};
  };
  const auto time_row = [](std::string field, TimePs b, TimePs f) {
    return ComparisonRow{std::move(field), us(b), us(f), static_cast<double>(b),
                         static_cast<double>(f)};
  };
  const auto num_row = [](std::string field, double b, double f) {
    return ComparisonRow{std::move(field), fmt::format("{:.4g}", b), fmt::format("{:.4g}", f), b,
                         f};
  };
  const std::vector<ComparisonRow> rows{
      num_row("gpu.peak (TFLOP/s)", static_cast<double>(base.peak_flops_per_s) / 1e12,
              static_cast<double>(fitted.peak_flops_per_s) / 1e12),
      bw_row("gpu.hbm_bw", base.hbm_bw_bytes_per_s, fitted.hbm_bw_bytes_per_s),
      time_row("gpu.kernel_launch", base.kernel_launch_ps, fitted.kernel_launch_ps),
      num_row("gpu.gemm_efficiency.max", base.gemm.max, fitted.gemm.max),
      num_row("gpu.gemm_efficiency.half", base.gemm.half_work, fitted.gemm.half_work),
      num_row("gpu.attention_efficiency.max", base.attention.max, fitted.attention.max),
      num_row("gpu.attention_efficiency.half", base.attention.half_work,
              fitted.attention.half_work),
      num_row("gpu.memory_bound_efficiency.max", base.memory_bound.max, fitted.memory_bound.max),
      num_row("gpu.memory_bound_efficiency.half", base.memory_bound.half_work,
              fitted.memory_bound.half_work),
      num_row("gpu.contention", base.contention_factor, fitted.contention_factor),
      num_row("gpu.comm_contention", base.comm_contention, fitted.comm_contention),
      bw_row("node.nvlink.bw", base.nvlink.bw_bytes_per_s, fitted.nvlink.bw_bytes_per_s),
      time_row("node.nvlink.latency", base.nvlink.latency_ps, fitted.nvlink.latency_ps),
      bw_row("node.pcie.bw", base.pcie.bw_bytes_per_s, fitted.pcie.bw_bytes_per_s),
      time_row("node.pcie.latency", base.pcie.latency_ps, fitted.pcie.latency_ps),
      bw_row("node.nic.bw", base.nic.bw_bytes_per_s, fitted.nic.bw_bytes_per_s),
      time_row("node.nic.latency", base.nic.latency_ps, fitted.nic.latency_ps),
      num_row("collective_efficiency", base.collective_efficiency, fitted.collective_efficiency),
  };
  std::string out = fmt::format("base = {}, fitted = {}\n", base.profile, fitted.profile);
  out += fmt::format("{:<34} {:>16} {:>16} {:>12}\n", "field", "base", "fitted", "fitted/base");
  for (const ComparisonRow& r : rows)
    out += fmt::format("{:<34} {:>16} {:>16} {:>12}\n", r.field, r.base_text, r.fitted_text,
                       ratio(r.base_value, r.fitted_value));
  return out;
}

std::string prediction_error_table(const RawMeasurements& raw, const HardwareSpec& base,
                                   const HardwareSpec& fitted, const std::string& dtype) {
  struct Category {
    const char* label;
    std::function<std::optional<double>(const HardwareSpec&, const Measurement&)> predict;
  };
  const auto kernel = [](model::OpKind kind, MeasurementKind measured, bool use_flops,
                         std::string wanted_dtype) {
    return [=](const HardwareSpec& hw, const Measurement& row) -> std::optional<double> {
      if (row.kind != measured || row.dtype != wanted_dtype) return std::nullopt;
      const double flops = use_flops ? 2.0 * static_cast<double>(row.m) *
                                           static_cast<double>(row.n) *
                                           static_cast<double>(row.k) *
                                           static_cast<double>(row.batch)
                                     : 0.0;
      return ps_to_s(hw_models::kernel_time_ps(hw, kind, flops, static_cast<double>(row.bytes)));
    };
  };
  const std::vector<Category> categories{
      {"gemm", kernel(model::OpKind::kGemm, MeasurementKind::kGemm, true, dtype)},
      {"attention", kernel(model::OpKind::kAttention, MeasurementKind::kAttention, true, dtype)},
      {"memory_bound",
       kernel(model::OpKind::kMemoryBound, MeasurementKind::kMemoryBound, false, dtype)},
      {"collective (1 node)",
       [](const HardwareSpec& hw, const Measurement& row) -> std::optional<double> {
         if (row.kind != MeasurementKind::kCollective) return std::nullopt;
         return ring_time_s(hw, row);
       }},
  };
  std::string out = fmt::format("{:<20} {:>5} {:>14} {:>14} {:>14} {:>14}\n", "prediction error",
                                "rows", "base rms", "base median", "fitted rms", "fitted median");
  for (const Category& category : categories) {
    std::vector<double> base_errors, fitted_errors;
    for (const Measurement& row : raw.rows) {
      const std::optional<double> b = category.predict(base, row);
      const std::optional<double> f = category.predict(fitted, row);
      if (!b || !f) continue;
      const double measured = row.time_us_median * 1e-6;
      base_errors.push_back(relative_error(*b, measured));
      fitted_errors.push_back(relative_error(*f, measured));
    }
    const ErrorStats bs = error_stats(base_errors), fs = error_stats(fitted_errors);
    if (bs.rows == 0) {
      out += fmt::format("{:<20} {:>5} {:>14} {:>14} {:>14} {:>14}\n", category.label, 0, "-", "-",
                         "-", "-");
      continue;
    }
    out += fmt::format("{:<20} {:>5} {:>13.1f}% {:>13.1f}% {:>13.1f}% {:>13.1f}%\n", category.label,
                       bs.rows, 100.0 * bs.rms, 100.0 * bs.median_abs, 100.0 * fs.rms,
                       100.0 * fs.median_abs);
  }
  return out;
}

FitCommandResult run_fit_command(const FitCommandOptions& options) {
  if (options.raw_csv_paths.empty()) fail(ErrorCode::kMissingArgument, "lynxsim fit: no raw CSV given");
  std::vector<RawMeasurements> parts;
  for (const std::string& path : options.raw_csv_paths) parts.push_back(read_raw_csv(path));
  const RawMeasurements raw = merge_raw(parts);
  if (raw.rows.empty()) fail(ErrorCode::kEmptyCsv, "lynxsim fit: {} holds no measurements", raw.source_label);

  FitCommandResult result;
  result.base = resolve_hardware_profile(options.base_profile);
  result.fitted = fit_profile(raw, result.base, &result.report, options.fit);
  result.fitted.profile =
      options.profile_name.empty() ? result.base.profile + "-calibrated" : options.profile_name;
  result.fitted.profile_file.clear();
  result.profile_yaml = hardware_profile_to_yaml(result.fitted);
  // The profile must load back: a fitted value the loader rejects is a fitter bug, not a file
  // for the user to discover later.
  (void)load_hardware_profile_text(result.profile_yaml, "<fitted profile>");

  if (!options.output_path.empty()) {
    write_text_file(options.output_path, result.profile_yaml, "lynxsim fit -o");
  }

  result.text = format_fit_report(result.report);
  result.text += "\nfitted vs base profile:\n";
  result.text += profile_comparison_table(result.base, result.fitted);
  result.text += "\nhow well each profile predicts the measurements (simulator's models):\n";
  result.text += prediction_error_table(raw, result.base, result.fitted, options.fit.dtype);
  if (!options.output_path.empty())
    result.text += fmt::format("\nwrote {} (profile '{}')\n", options.output_path,
                               result.fitted.profile);
  return result;
}

}  // namespace lynx::calibrate
