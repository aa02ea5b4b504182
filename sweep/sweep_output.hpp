#pragma once
/// The rows of a sweep and the file they go to (docs/sweep.md): CSV (a `#` header comment with
/// the grid's hash, then a column line) or JSON lines (a header object, then one object per
/// row), by the file's extension; a table on stdout without a file. Columns: `point`, the axis
/// keys, then the run-level result fields (runner/result_fields.hpp) except wall times, so the
/// bytes do not depend on threads, ranks or machine load. Also reads back an interrupted file.
#include "runner/result_fields.hpp"
#include "sweep/grid.hpp"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace lynx::sweep {

enum class OutputFormat { kTable, kCsv, kJsonLines };

/// The format for `-o PATH` by extension (.csv, .jsonl); kTable for an empty path. Throws
/// lynx::Error for any other extension.
OutputFormat output_format_for(const std::string& path);

/// Renders the header and rows of one grid's sweep.
class RowWriter {
 public:
  /// Throws lynx::Error when an axis key collides with a result column.
  RowWriter(const Grid& grid, OutputFormat format);

  OutputFormat format() const { return format_; }
  /// Everything before the first row (empty for the table): identifies the grid, the program
  /// version and the columns, so a file resumed must start with exactly these bytes.
  std::string header() const;
  /// Point `index`'s row, line break included (table: its cells joined by '\x1f').
  std::string row(std::uint64_t index, const runner::SimResult& result) const;
  /// The start of point `index`'s row: its point number and axis values.
  std::string row_start(std::uint64_t index) const;
  /// The stdout table of `rows` (from row()), aligned.
  std::string table(const std::vector<std::string>& rows) const;

 private:
  const Grid& grid_;
  OutputFormat format_;
  std::vector<const runner::ResultField*> fields_;
};

/// What an output file already holds.
struct ExistingRows {
  bool resume = false;                ///< false: write the file from scratch
  std::vector<std::uint64_t> points;  ///< the points of its complete rows, ascending
  std::uint64_t keep_bytes = 0;       ///< its size up to the last complete row
};

/// Reads `path` if it exists: checks that it starts with `writer`'s header (else lynx::Error:
/// it belongs to another grid, lynxsim version or column set) and that every complete row is
/// one of this grid's points in ascending order; a partial last line is not kept.
ExistingRows read_existing_rows(const std::string& path, const RowWriter& writer, const Grid& grid);

/// The output file: created with the header, or cut to `existing.keep_bytes` and appended to.
/// Rows are flushed one by one, so an interruption loses at most the line being written.
class OutputStream {
 public:
  OutputStream(const std::string& path, const RowWriter& writer, const ExistingRows& existing);
  /// Appends `text`; throws lynx::Error naming the file when it cannot be written.
  void write(const std::string& text);
  /// Flushes and checks.
  void close();

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace lynx::sweep
