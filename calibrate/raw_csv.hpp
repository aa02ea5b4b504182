#pragma once
/// The raw-measurement CSV that `lynxsim-calibrate` writes and the fitter reads: the one
/// definition of its schema. A file is
///
///   # device: NVIDIA H200            <- header comment lines "# key: value" (metadata)
///   # sm_count: 132
/// kind,name,dtype,m,n,k,batch,bytes,ranks,nodes,scope,time_us_median,time_us_p10,time_us_p90,reps
///   gemm,gpt-1.3b:tp1:mb1:qkv_gemm.fwd,bf16,2048,6144,2048,1,33554432,1,1,device,41.2,40.9,41.8,20
///   ...
///
/// One row per measurement. Columns (units in the names):
///   kind     gemm | attention | memory_bound | launch | collective | contention
///   name     free text without commas: the op and pass (gemm, attention), the kernel
///            (memory_bound: layernorm, bias_gelu, ...), "empty_kernel" (launch), the collective
///            (all_reduce, all_gather, reduce_scatter, send_recv), or the contention role
///            (gemm_alone, gemm_concurrent, comm_alone, comm_concurrent)
///   dtype    bf16 | fp16 | fp32 | "" (not applicable)
///   m,n,k,batch  GEMM shape C[m×n] = A[m×k]·B[k×n], `batch` of them; memory_bound: rows, cols
///            in m, n (k = 0); 0 where not applicable
///   bytes    gemm/attention: operand bytes (A + B + C); memory_bound: HBM bytes read + written;
///            collective: the payload S (full tensor for all-reduce, the full gathered tensor
///            for all-gather / reduce-scatter, the message for send/recv); contention: the
///            communication payload
///   ranks    GPUs taking part (1 for single-GPU kernels)
///   nodes    nodes those ranks span
///   scope    device (one GPU) | intra (one node) | inter (across nodes) | standin (contention
///            measured against a device-to-device copy kernel instead of NCCL: one GPU)
///   time_us_median, time_us_p10, time_us_p90   per-operation time in microseconds over `reps`
///            timed repetitions (after warm-up)
///   reps     timed repetitions
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lynx::calibrate {

/// What a row measured.
enum class MeasurementKind : std::uint8_t {
  kGemm,         ///< one cuBLAS GEMM
  kAttention,    ///< a strided-batched cuBLAS GEMM (attention QK^T / ·V and their gradients)
  kMemoryBound,  ///< one of our memory-bound kernels (LayerNorm, GeLU, softmax, ...)
  kLaunch,       ///< an empty kernel: the fixed per-kernel cost
  kCollective,   ///< one NCCL collective or send/recv
  kContention,   ///< a GEMM and a communication kernel, alone or concurrently
};

/// The CSV spelling of a kind ("gemm", "memory_bound", ...).
std::string_view to_string(MeasurementKind kind);
/// Inverse of to_string; throws lynx::Error listing the valid kinds.
MeasurementKind parse_measurement_kind(std::string_view text);

/// One row of the raw CSV; field meanings in the file comment above.
struct Measurement {
  MeasurementKind kind = MeasurementKind::kGemm;
  std::string name;
  std::string dtype;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  std::uint64_t bytes = 0;
  int ranks = 1;
  int nodes = 1;
  std::string scope = "device";
  double time_us_median = 0.0;
  double time_us_p10 = 0.0;
  double time_us_p90 = 0.0;
  int reps = 0;

  bool operator==(const Measurement&) const = default;
};

/// A whole raw file (or several merged): metadata from its header comments and its rows.
struct RawMeasurements {
  /// "# key: value" header lines in file order (device, sm_count, driver, runtime, cublas,
  /// nccl, date, ...).
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<Measurement> rows;
  /// Where the rows came from (file path(s), comma-separated), for reports and profile sources.
  std::string source_label;

  /// Value of metadata `key`, or "" when absent.
  std::string metadata_value(std::string_view key) const;
  /// The device name from the header ("device" key), or "unknown device".
  std::string device_name() const;

  bool operator==(const RawMeasurements&) const = default;
};

/// The column names in file order.
const std::vector<std::string>& raw_csv_columns();
/// The header line (column names joined by commas, no newline).
std::string raw_csv_header_line();
/// One row as a CSV line (no newline). Times are written in shortest round-trip form, so
/// reading the line back gives the same doubles. Throws lynx::Error if a text field holds a
/// comma, quote or line break.
std::string format_raw_csv_row(const Measurement& row);

/// Writes metadata comments, the header and every row.
void write_raw_csv(std::ostream& out, const RawMeasurements& raw);
/// Same, to a file (throws lynx::Error if it cannot be written).
void write_raw_csv_file(const std::string& path, const RawMeasurements& raw);

/// Parses CSV text; `label` names it in errors, which read "LABEL:LINE: what is wrong" with
/// the 1-based line number (a missing or wrong header, a wrong column count, a bad number, an
/// unknown kind, negative or non-finite times, p10 > median > p90, reps < 1 ...).
RawMeasurements parse_raw_csv(std::string_view text, const std::string& label);
/// Reads and parses a raw CSV file; source_label = path.
RawMeasurements read_raw_csv(const std::string& path);
/// Concatenates several raw files: rows in order, metadata of the first (keys of later files
/// that differ are kept with a "fileN." prefix), source labels joined.
RawMeasurements merge_raw(const std::vector<RawMeasurements>& parts);

/// Streams rows to a CSV file as they are measured, flushing each, so a run that is cut off
/// (time limit, crash) still leaves every finished measurement on disk.
class RawCsvWriter {
 public:
  /// Opens `path` (truncating) and writes the metadata comments and the header.
  RawCsvWriter(const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& metadata);
  ~RawCsvWriter();
  RawCsvWriter(const RawCsvWriter&) = delete;
  RawCsvWriter& operator=(const RawCsvWriter&) = delete;

  /// Appends one row and flushes.
  void append(const Measurement& row);
  /// Rows appended so far.
  std::size_t rows_written() const { return rows_written_; }
  const std::string& path() const { return path_; }

 private:
  struct File;
  std::string path_;
  std::unique_ptr<File> file_;
  std::size_t rows_written_ = 0;
};

}  // namespace lynx::calibrate
