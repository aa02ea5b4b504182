#pragma once
/// Parsing the one YAML document of a scenario, profile or plan file. yaml-cpp's Load reads the
/// first document and ignores anything after a `---`; lynxsim refuses it instead, so an edit
/// below a stray separator is never silently dropped.
#include <yaml-cpp/yaml.h>

#include <string>

namespace lynx {

/// The file's single document (a null node for an empty file). Throws lynx::Error
/// "LABEL:LINE:COL: malformed YAML: ..." or "... a second YAML document ...".
YAML::Node load_single_document(const std::string& text, const std::string& label);

/// "LABEL:LINE:COL" of a node's mark, 1-based ("LABEL:1:1" for a node without one).
std::string yaml_position(const std::string& label, const YAML::Mark& mark);

}  // namespace lynx
