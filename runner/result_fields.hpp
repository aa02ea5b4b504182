#pragma once
/// The one table of result fields: every value `lynxsim run` reports (table, CSV, JSON) and
/// `lynxsim figures` writes, with unit and meaning. The writers iterate over this table and
/// spell out no field of their own; docs/results.md is generated from it.
#include "runner/simulate.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::runner {

/// Whether a field is written once per run or once per pipeline stage.
enum class FieldLevel { kRun, kStage };

/// One cell: a typed value each writer renders its own way (CSV text, JSON literal, table).
struct FieldValue {
  enum class Kind { kNull, kBool, kInt, kReal, kText, kIntList };
  Kind kind = Kind::kNull;
  bool flag = false;
  std::int64_t integer = 0;
  double real = 0;
  std::string text;
  std::vector<std::int64_t> list;

  static FieldValue null() { return {}; }
  static FieldValue of_bool(bool b);
  static FieldValue of_int(std::int64_t i);
  static FieldValue of_real(double x);
  static FieldValue of_text(std::string s);
  static FieldValue of_list(const std::vector<int>& values);
};

/// How a field appears in the human table (`--format table`); a null label keeps it out (the
/// configuration fields are said in words in the table's header instead).
struct TableStyle {
  const char* label = nullptr;  ///< summary-line label (run fields) or column header (stage fields)
  double scale = 1;             ///< the table shows value × scale (1/GiB, 100 for a percentage)
  int precision = 4;            ///< digits after the point for reals
  const char* suffix = "";      ///< after the value on a summary line ("s", "%", "GiB")
  bool hide_zero = false;       ///< no summary line when the value is 0 (planning of fixed strategies)
  bool explain = false;         ///< a note under the table repeats the description
};

/// One result field: name (CSV column and JSON key), unit, meaning, and how to read it.
struct ResultField {
  const char* name;
  const char* unit;         ///< SI unit, or "" for text, flags and counts
  FieldLevel level;
  const char* description;  ///< one line, for docs/results.md and table notes
  bool in_csv;              ///< false: a multi-line value, written as CSV `#` comments instead
  TableStyle table;
  /// The value in `result`; stage fields read `stage`, run fields ignore it.
  FieldValue (*value)(const SimResult& result, const StageBreakdown& stage);
  /// A wall time of this program (name ends in `_seconds`), not a simulated quantity: it
  /// differs from run to run, so `lynxsim sweep` leaves it out of its rows.
  bool wall_clock = false;
};

/// Every field, run-level ones first, in the order every writer uses.
const std::vector<ResultField>& result_fields();

/// What a result calls the model: its preset, else its Hugging Face config's file name
/// (model.hf_config), else "custom".
std::string model_name(const ModelSpec& model);

/// The fields of one level, in table order; `csv_only` drops those with in_csv false.
std::vector<const ResultField*> fields_of(FieldLevel level, bool csv_only = false);

/// A value as one CSV cell: "" for null, true/false, lists space-separated, text quoted when
/// it holds a comma, quote or line break (RFC 4180).
std::string csv_cell(const FieldValue& value);

/// A value as a JSON literal: null for null and for a non-finite number.
std::string json_literal(const FieldValue& value);

/// The value as the human table shows it (scaled, fixed precision, yes/no).
std::string table_cell(const ResultField& field, const FieldValue& value);

/// Comma-separated cells of `fields` for `result` (stage fields from `stage`).
std::string csv_cells(const std::vector<const ResultField*>& fields, const SimResult& result,
                      const StageBreakdown& stage);

/// Comma-separated names of `fields` (a CSV header, or part of one).
std::string csv_names(const std::vector<const ResultField*>& fields);

/// The table as Markdown (docs/results.md holds it between GENERATED markers).
std::string result_fields_markdown();

}  // namespace lynx::runner
