#pragma once
/// The data sets `lynxsim validate --report` scores: a YAML manifest (validate/data/datasets.yaml)
/// naming each measurements CSV, where its numbers come from, the hardware profiles to score it
/// on and the settings its rows share. A new data set slots in as one more entry.
#include <string>
#include <string_view>
#include <vector>

namespace lynx::validate {

/// One entry of the manifest.
struct Dataset {
  std::string name;                    ///< its title in the report
  std::string file;                    ///< measurements CSV, relative paths resolved against the manifest's folder
  std::string source;                  ///< where the measurements come from (one line; may be empty)
  /// Profiles to score it on: a built-in name, or a profile file (a name ending in .yaml,
  /// resolved like `file`).
  std::vector<std::string> profiles;
  std::string recompute;               ///< recompute.strategy of rows without a recompute column ("": none)
  std::vector<std::string> overrides;  ///< --set key=value for every row of this data set
};

/// Whether a manifest profile entry is a profile file (it ends in .yaml) rather than a
/// built-in profile name.
bool is_profile_file(const std::string& profile);

/// Parses a manifest: a map with one key, `datasets`, a non-empty list of maps with keys
/// name, file, profiles (required; profiles a non-empty list) and source, recompute, set
/// (optional; set a list of key=value). `folder` resolves relative file and profile paths.
/// Throws lynx::Error "LABEL:LINE:COL: ..." for malformed YAML, an unknown or missing key or a
/// value of the wrong kind.
std::vector<Dataset> parse_dataset_manifest(std::string_view text, const std::string& label,
                                            const std::string& folder);

/// Reads and parses the manifest at `path` (relative paths inside it: against its folder).
std::vector<Dataset> load_dataset_manifest(const std::string& path);

}  // namespace lynx::validate
