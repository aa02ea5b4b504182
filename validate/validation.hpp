#pragma once
/// Simulates measured training iterations and compares: each row of the measurements becomes
/// a Scenario (the fixed Megatron-DeepSpeed settings of megatron_deepspeed_overrides() plus
/// the row's shape and layout), is simulated with lynx::simulate, and is scored.
#include "scenarios/scenario.hpp"
#include "validate/measured_runs.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace lynx::validate {

/// Called after each simulated row: (rows done, rows in total).
using Progress = std::function<void(std::size_t done, std::size_t total)>;

/// Scenario keys every measured run shares (VALIDATION.md explains each): vocabulary 51200
/// (GPT-2's 50257 padded as Megatron does), FFN 4h, no flash attention, no sequence
/// parallelism, 1F1B without interleaving, no recomputation, no distributed optimizer, and the
/// data-parallel gradient all-reduce issued once after the last backward (dp_overlap end).
std::vector<std::string> megatron_deepspeed_overrides();

/// What the runs are simulated on and with.
struct BaseOptions {
  std::string profile = "dgx-a100-80gb";   ///< built-in hardware profile (if no profile_file)
  std::string profile_file;                ///< hardware profile YAML; wins over `profile`
  std::vector<std::string> overrides;      ///< user --set key=value, applied last
  /// recompute.strategy of rows without a recompute column (validate --recompute); empty:
  /// none, the fixed setting. A --set recompute.strategy in `overrides` wins over it.
  std::string recompute;
};

/// The built-in default scenario with the chosen profile, the fixed settings, the recompute
/// default and then the user's overrides. Row values (shape, batch, layout, cluster size,
/// settings columns) replace the matching fields per row (scenario_for_run), whatever the
/// overrides said.
Scenario validation_base_scenario(const BaseOptions& options);

/// `base` with the row's model shape (custom model: layers, hidden, heads, seq_len, ffn 4h),
/// layout (tp, dp, pp, micro and global batch), cluster size (ceil(GPUs / gpus_per_node)
/// nodes of the base's profile) and then its settings columns (MeasuredRun::settings; with
/// virtual_stages > 1 and no schedule column the schedule is interleaved, as Megatron-LM runs
/// it). Throws lynx::Error naming the row's line when a setting cannot be applied or the
/// layout does not fit the cluster (a hardware.nodes column can shrink it).
Scenario scenario_for_run(const Scenario& base, const MeasuredRun& run, const std::string& file_label);

/// One simulated row.
struct RowResult {
  std::size_t index = 0;      ///< position in the measurements (0-based)
  MeasuredRun run;
  double predicted_ms = 0;
  double error_percent = 0;   ///< signed: 100 · (predicted − measured) / measured
  bool oom = false;           ///< the simulator's verdict; not an error here (capacity unknown)
};

/// Simulates the rows at `indices` of `runs` on `base`'s hardware; results in the order of
/// `indices`, identical for any thread count (rows are independent simulations). `threads`
/// workers take every threads-th row; `progress` is called under a lock. Errors name
/// `file_label`:line of the row (the first failing row in `indices` order).
std::vector<RowResult> simulate_runs(const Scenario& base, const std::vector<MeasuredRun>& runs,
                                     const std::vector<std::size_t>& indices,
                                     const std::string& file_label, const Progress& progress = {},
                                     unsigned threads = 1);

/// Accuracy of a set of rows.
struct Summary {
  std::size_t rows = 0;
  double mape_percent = 0;               ///< mean absolute percentage error
  double median_ape_percent = 0;         ///< median absolute percentage error
  double mean_signed_error_percent = 0;  ///< bias: mean of RowResult::error_percent
  double mean_abs_log_error = 0;         ///< mean |ln(predicted / measured)| (fit objective)
  double kendall_tau_b = 0;              ///< rank agreement of predicted and measured times
  std::size_t oom_rows = 0;              ///< rows the simulator calls out of memory
};
/// Throws lynx::Error "ROWS_LABEL: a summary needs at least 2 rows, got N" for fewer than 2
/// rows (tau needs pairs), and names ROWS_LABEL when the times are constant (tau undefined).
/// `rows_label`: the CSV the rows come from, and which of its rows when a subset ("v.csv, the
/// odd rows held out by fold 0").
Summary summarize(const std::vector<RowResult>& rows, const std::string& rows_label);

/// The `count` rows with the largest absolute error, largest first (ties: lower index first).
std::vector<RowResult> worst_rows(const std::vector<RowResult>& rows, std::size_t count);

/// Error of the rows sharing one value of one column.
struct CategoryError {
  std::string column;  ///< "tp", "pp", "dp", "micro_batch", "hidden", "layers", "gpus",
                       ///< "micro_batches" (per pipeline, global / (micro · dp))
  int value = 0;
  std::size_t rows = 0;
  double mean_signed_error_percent = 0;
  double mape_percent = 0;
};
/// Errors grouped by each column above, columns in that order, values ascending.
std::vector<CategoryError> errors_by_category(const std::vector<RowResult>& rows);

/// The deterministic two-fold split: fold 0 = rows at even positions of the file (0, 2, 4, …),
/// fold 1 = odd positions. Throws lynx::Error for a fold other than 0 or 1.
std::vector<std::size_t> fold_rows(std::size_t row_count, int fold);
/// 0, 1, …, row_count − 1.
std::vector<std::size_t> all_rows(std::size_t row_count);

}  // namespace lynx::validate
