#pragma once
/// The markdown validation report (`lynxsim validate --report MANIFEST`): per data set and per
/// profile MAPE, median APE, bias and Kendall tau-b, the error by category side by side for
/// the profiles, and the worst rows of each profile. VALIDATION.md's results are its output.
#include "validate/components.hpp"
#include "validate/dataset_manifest.hpp"
#include "validate/validation.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace lynx::validate {

/// One data set's rows simulated on one profile.
struct ProfileRows {
  std::string profile;          ///< as the manifest names it
  std::vector<RowResult> rows;  ///< every row of the data set, in file order
};

/// A per-layer data set's rows (validate --components) simulated on one profile.
struct ProfileLayers {
  std::string profile;
  std::vector<ComponentRow> rows;
};

/// One data set and its results on each of its profiles (in the manifest's order): iteration
/// times in `profiles`, or, for a file of per-layer times, `layer_profiles`.
struct DatasetResults {
  Dataset dataset;
  std::vector<ProfileRows> profiles;
  std::vector<ProfileLayers> layer_profiles;
};

struct MarkdownOptions {
  std::string command;          ///< the command line that regenerates the report
  std::string version;          ///< lynxsim version that wrote it
  std::size_t worst_count = 5;  ///< rows in each worst-rows table
};

/// Writes the report: a comment naming the command, a summary table (one line per data set and
/// profile), then per data set its source, the error by category (bias and MAPE per profile)
/// and per profile its worst rows; then each per-layer data set: per profile the mean absolute
/// and mean signed error of the forward, backward and combined layer time, and every row.
/// Throws lynx::Error for an iteration data set with fewer than 2 rows.
void write_markdown_report(std::ostream& out, const std::vector<DatasetResults>& results,
                           const MarkdownOptions& options);

}  // namespace lynx::validate
