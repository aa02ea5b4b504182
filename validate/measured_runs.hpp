#pragma once
/// Measured training iterations to validate against, one GPT iteration per row: the vTrain
/// single-node CSV (Bang et al., MICRO 2024; validate/data/README.md) or any CSV with a header
/// line naming its columns (core columns plus per-row scenario settings).
#include "scenarios/fields.hpp"

#include <string>
#include <utility>
#include <string_view>
#include <vector>

namespace lynx::validate {

/// A scenario field one row sets (a settings column of a headed CSV), e.g. recompute.strategy.
struct RowSetting {
  std::string key;     ///< scenario key (FieldDesc::scenario_key), e.g. "recompute.strategy"
  std::string column;  ///< the column's name as the header wrote it, e.g. "recompute"
  std::string value;   ///< the cell, checked by the field's parser when the row was read
};

/// One measured iteration (one CSV row). Shapes in elements, batches in sequences.
struct MeasuredRun {
  int line = 0;          ///< 1-based line of the row in its file (for messages)
  int gpus = 0;          ///< GPUs used, = tp · dp · pp
  int global_batch = 0;  ///< sequences per iteration
  int micro_batch = 0;   ///< sequences per micro-batch
  int hidden = 0;
  int heads = 0;
  int layers = 0;
  int seq_len = 0;
  int tp = 0;
  int dp = 0;
  int pp = 0;
  double iteration_ms = 0;  ///< measured iteration time, milliseconds (0: not measured)
  /// One transformer layer's measured forward / backward time, milliseconds (0: not measured;
  /// headed files with the columns layer_forward_ms and layer_backward_ms).
  double layer_forward_ms = 0;
  double layer_backward_ms = 0;
  /// The row's settings columns in header order (empty cells left out); applied after the
  /// shape and layout, so they win over every default (validate::scenario_for_run).
  std::vector<RowSetting> settings;
};

/// Parses a CSV of measured runs. Two forms, told apart by the first line that is neither
/// blank nor a '#' comment:
/// - vTrain (that line starts with a number): 11 comma-separated columns per row (GPUs, global
///   batch, micro batch, hidden, heads, layers, sequence length, tp, dp, pp, iteration time in
///   ms), the header as a '#' comment;
/// - headed (otherwise): that line names the columns, in any order. Core columns, all
///   required: gpus, global_batch, micro_batch, hidden, heads, layers, seq_len, tp, dp, pp, and
///   one of iteration_ms / iteration_s, or the per-layer pair layer_forward_ms,
///   layer_backward_ms (either or both). Settings columns, optional: a scenario key
///   (`lynxsim fields`, e.g. parallel.sequence_parallel, model.ffn_hidden) or one of
///   row_setting_aliases(); an empty cell leaves the field at its default. Scenario keys the
///   core columns, the model preset or the profile choice own are refused.
/// Lines starting with '#' and blank lines are skipped; CRLF line ends are accepted. Throws
/// lynx::Error "LABEL:LINE: what is wrong" for an unknown, duplicated or missing column, a
/// malformed row (wrong column count, a value that is not a positive integer / positive number
/// or that the setting's field refuses, tp·dp·pp ≠ GPUs, a global batch not divisible by micro
/// batch · dp) and for a file without rows.
std::vector<MeasuredRun> parse_measured_runs(std::string_view text, const std::string& file_label);


/// Short settings-column names and the scenario keys they stand for (Megatron-LM's option
/// names where it has one): recompute → recompute.strategy, sequence_parallel,
/// virtual_stages, schedule, distributed_optimizer (parallel.*), ffn_hidden, vocab,
/// flash_attention (model.*), recompute_method, recompute_num_layers (recompute.*).
const std::vector<std::pair<std::string, std::string>>& row_setting_aliases();

/// The scenario field a RowSetting's key names (one of scenario_field_table()); throws
/// lynx::Error for a key that is not a settings column.
const FieldDesc& row_setting_field(const std::string& key);

/// Reads and parses `path` (see parse_measured_runs); a missing file is a lynx::Error.
std::vector<MeasuredRun> load_measured_runs(const std::string& path);

/// Throws lynx::Error naming the first row without a measured iteration time.
void require_iteration_times(const std::vector<MeasuredRun>& runs, const std::string& file_label);
/// Throws lynx::Error naming the first row without measured per-layer times.
void require_layer_times(const std::vector<MeasuredRun>& runs, const std::string& file_label);

}  // namespace lynx::validate
