#pragma once
/// Measured training iterations to validate against: the vTrain single-node CSV (Bang et al.,
/// MICRO 2024; validate/data/README.md), one Megatron-DeepSpeed GPT iteration per row.
#include <string>
#include <string_view>
#include <vector>

namespace lynx::validate {

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
  double iteration_ms = 0;  ///< measured iteration time, milliseconds
};

/// Parses the vTrain CSV: 11 comma-separated columns per row (GPUs, global batch, micro batch,
/// hidden, heads, layers, sequence length, tp, dp, pp, iteration time in ms). Lines starting
/// with '#' (the header) and blank lines are skipped; CRLF line ends are accepted. Throws
/// lynx::Error "LABEL:LINE: what is wrong" for a malformed row (wrong column count, a value
/// that is not a positive integer / positive number, tp·dp·pp ≠ GPUs, a global batch not
/// divisible by micro batch · dp) and for a file without rows.
std::vector<MeasuredRun> parse_measured_runs(std::string_view text, const std::string& file_label);

/// Reads and parses `path` (see parse_measured_runs); a missing file is a lynx::Error.
std::vector<MeasuredRun> load_measured_runs(const std::string& path);

}  // namespace lynx::validate
