#include "validate/dataset_manifest.hpp"

#include "common/error.hpp"
#include "common/files.hpp"
#include "scenarios/yaml_document.hpp"

#include <filesystem>

namespace lynx::validate {

namespace {

/// "LABEL:LINE:COL" of a node (yaml-cpp marks are 0-based); the file's start for a node
/// without a position (an empty document).
std::string at(const std::string& label, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.is_null()) return label + ":1:1";
  return fmt::format("{}:{}:{}", label, m.line + 1, m.column + 1);
}

std::string scalar(const YAML::Node& node, const std::string& label, const std::string& key) {
  if (!node.IsScalar() || node.Scalar().empty())
    fail(ErrorCode::kWrongType, "{}: key '{}': expected a non-empty text value", at(label, node), key);
  return node.Scalar();
}

std::vector<std::string> scalar_list(const YAML::Node& node, const std::string& label,
                                     const std::string& key) {
  if (!node.IsSequence()) fail(ErrorCode::kWrongType, "{}: key '{}': expected a list", at(label, node), key);
  std::vector<std::string> out;
  for (const YAML::Node& item : node) out.push_back(scalar(item, label, key));
  return out;
}

std::string resolved(const std::string& path, const std::string& folder) {
  const std::filesystem::path p(path);
  return p.is_absolute() || folder.empty() ? path : (std::filesystem::path(folder) / p).string();
}

Dataset parse_entry(const YAML::Node& node, const std::string& label, const std::string& folder) {
  if (!node.IsMap()) fail(ErrorCode::kWrongShape, "{}: a data set must be a map (name, file, profiles, ...)", at(label, node));
  Dataset d;
  bool has_name = false, has_file = false, has_profiles = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    const YAML::Node& value = kv.second;
    if (key == "name") {
      d.name = scalar(value, label, key);
      has_name = true;
    } else if (key == "file") {
      d.file = resolved(scalar(value, label, key), folder);
      has_file = true;
    } else if (key == "source") {
      d.source = scalar(value, label, key);
    } else if (key == "profiles") {
      for (std::string& p : scalar_list(value, label, key))
        d.profiles.push_back(is_profile_file(p) ? resolved(p, folder) : p);
      if (d.profiles.empty()) fail(ErrorCode::kMissingKey, "{}: key 'profiles': give at least one profile", at(label, value));
      has_profiles = true;
    } else if (key == "recompute") {
      d.recompute = scalar(value, label, key);
    } else if (key == "set") {
      d.overrides = scalar_list(value, label, key);
    } else {
      fail(ErrorCode::kUnknownKey, "{}: unknown key '{}' in a data set (expected name, file, source, profiles, "
           "recompute, set)",
           at(label, kv.first), key);
    }
  }
  for (const auto& [present, key] : {std::pair{has_name, "name"}, std::pair{has_file, "file"},
                                     std::pair{has_profiles, "profiles"}})
    if (!present) fail(ErrorCode::kMissingKey, "{}: the data set has no '{}'", at(label, node), key);
  return d;
}

}  // namespace

bool is_profile_file(const std::string& profile) {
  return profile.size() > 5 && profile.compare(profile.size() - 5, 5, ".yaml") == 0;
}

std::vector<Dataset> parse_dataset_manifest(std::string_view text, const std::string& label,
                                            const std::string& folder) {
  const YAML::Node root = load_single_document(std::string(text), label);
  if (!root.IsMap()) fail(ErrorCode::kWrongShape, "{}: expected a map with the key 'datasets'", at(label, root));
  std::vector<Dataset> out;
  bool has_datasets = false;
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (key != "datasets")
      fail(ErrorCode::kUnknownKey, "{}: unknown key '{}' (expected datasets)", at(label, kv.first), key);
    if (!kv.second.IsSequence() || kv.second.size() == 0)
      fail(ErrorCode::kWrongType, "{}: key 'datasets': expected a non-empty list of data sets", at(label, kv.second));
    for (const YAML::Node& entry : kv.second) out.push_back(parse_entry(entry, label, folder));
    has_datasets = true;
  }
  if (!has_datasets) fail(ErrorCode::kMissingKey, "{}:1:1: key 'datasets': missing (the list of data sets)", label);
  return out;
}

std::vector<Dataset> load_dataset_manifest(const std::string& path) {
  return parse_dataset_manifest(read_text_file(path, "data set manifest"), path,
                                std::filesystem::path(path).parent_path().string());
}

}  // namespace lynx::validate
