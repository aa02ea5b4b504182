#pragma once
/// The error catalogue: the stable short code of every user-facing lynx::Error. Codes name
/// situations (an unknown key, a value out of range, a file that cannot be written), not source
/// lines; the hundreds group them by area. error_codes.cpp gives each its name, meaning and what
/// to do (docs/errors.md is generated from it, `lynxsim errors` prints it).
#include <string>
#include <vector>

namespace lynx {

/// Every code, once: X(enumerator, number). A new code needs a row in error_codes.cpp (a test
/// fails without one) and a case in tests/errors/cases.json.
#define LYNX_ERROR_CODE_LIST(X)                                                                  \
  X(kInternal, 1)                                                                                \
  /* E1xx YAML files and keys */                                                                 \
  X(kMalformedYaml, 101)                                                                         \
  X(kExtraDocument, 102)                                                                         \
  X(kWrongShape, 103)                                                                            \
  X(kUnknownKey, 104)                                                                            \
  X(kDuplicateKey, 105)                                                                          \
  X(kMissingKey, 106)                                                                            \
  X(kBadExpression, 107)                                                                         \
  /* E2xx values: types, units, ranges */                                                        \
  X(kWrongType, 201)                                                                             \
  X(kWrongUnit, 202)                                                                             \
  X(kUnknownChoice, 203)                                                                         \
  X(kOutOfRange, 204)                                                                            \
  X(kValueOverflow, 205)                                                                         \
  X(kBadRange, 206)                                                                              \
  /* E3xx parallel layout and settings */                                                        \
  X(kIndivisibleLayout, 301)                                                                     \
  X(kTooManyGpus, 302)                                                                           \
  X(kIncompatibleSettings, 303)                                                                  \
  X(kNotModelled, 304)                                                                           \
  X(kNotInBuild, 305)                                                                            \
  /* E4xx plan files */                                                                          \
  X(kNotAPlan, 401)                                                                              \
  X(kPlanVersion, 402)                                                                           \
  X(kPlanMismatch, 403)                                                                          \
  X(kPlanUnbuildable, 404)                                                                       \
  /* E5xx hardware profiles and fitting */                                                       \
  X(kUnknownProfile, 501)                                                                        \
  X(kIncompleteProfile, 502)                                                                     \
  X(kBadHardware, 503)                                                                           \
  X(kInsufficientData, 504)                                                                             \
  /* E6xx CSV files */                                                                           \
  X(kBadCsvRow, 601)                                                                             \
  X(kBadCsvHeader, 602)                                                                          \
  X(kEmptyCsv, 603)                                                                              \
  X(kInconsistentCsvRow, 604)                                                                    \
  /* E7xx files and output streams */                                                            \
  X(kFileNotFound, 701)                                                                          \
  X(kNotRegularFile, 702)                                                                        \
  X(kFileTooLarge, 703)                                                                          \
  X(kReadFailed, 704)                                                                            \
  X(kWriteFailed, 705)                                                                           \
  X(kOutputMismatch, 706)                                                                        \
  /* E8xx command line and launch lines */                                                       \
  X(kBadUsage, 801)                                                                              \
  X(kInvalidOption, 802)                                                                         \
  X(kMissingArgument, 803)                                                                       \
  X(kConflictingOptions, 804)                                                                    \
  X(kBadLaunchLine, 805)                                                                         \
  X(kContradictingArguments, 806)                                                                \
  X(kLauncherMismatch, 807)                                                                      \
  /* E9xx work bounds, runtime limits, searches */                                               \
  X(kWorkTooLarge, 901)                                                                          \
  X(kTimeOverflow, 902)                                                                          \
  X(kSystemFailure, 903)                                                                         \
  X(kNoValidLayout, 904)                                                                         \
  X(kNothingFits, 905)

/// The code of a lynx::Error; the value is the number of its text form (kUnknownKey: E104).
enum class ErrorCode : int {
#define LYNX_ERROR_CODE_ENUMERATOR(name, number) name = number,
  LYNX_ERROR_CODE_LIST(LYNX_ERROR_CODE_ENUMERATOR)
#undef LYNX_ERROR_CODE_ENUMERATOR
};

/// One row of the catalogue.
struct ErrorCodeInfo {
  ErrorCode code;
  const char* name;     ///< kebab-case, stable ("unknown-key")
  const char* meaning;  ///< one line: the situation
  const char* remedy;   ///< one line: what the user should do
  const char* example;  ///< one message of this code, as lynxsim prints it
  /// Empty when a CLI case in tests/errors/ triggers the code; otherwise why none can (the code
  /// is then tested at library level).
  const char* no_cli_case;
};

/// The catalogue, in code order.
const std::vector<ErrorCodeInfo>& error_catalogue();
/// The row of `code`.
const ErrorCodeInfo& error_code_info(ErrorCode code);
/// The text form: "E104".
std::string error_code_id(ErrorCode code);
/// The catalogue as Markdown (docs/errors.md holds it between GENERATED markers).
std::string error_catalogue_markdown();
/// One row as plain text: "E104 unknown-key", then its meaning and what to do, indented.
std::string error_text(const ErrorCodeInfo& row);
/// The catalogue as plain text, one error_text per code (`lynxsim errors`).
std::string error_catalogue_text();

}  // namespace lynx
