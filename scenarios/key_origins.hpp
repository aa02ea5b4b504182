#pragma once
/// Where each key of a scenario (or profile) was given, so that a check made after loading can
/// still point at it: "FILE:LINE:COL" for a value or section in a file, "FILE: --set key=value"
/// for a command-line override.
#include <map>
#include <string>
#include <vector>

namespace lynx {

/// The origins of one file's keys (plus its overrides); empty for a scenario built in code.
class KeyOrigins {
 public:
  /// `top`: the origin of the whole scenario, used for keys never given ("FILE:1:1", or a
  /// label such as a test name for a scenario built in code).
  explicit KeyOrigins(std::string top = "<scenario>");

  /// Records where `key`'s value was given; `by_override`: a --set override, not the file.
  void set_value(const std::string& key, std::string origin, bool by_override);
  /// Records where the section `key` ("parallel", "hardware.node") starts.
  void set_section(const std::string& key, std::string origin);

  /// Whether `key` was given, in the file or by an override.
  bool given(const std::string& key) const;
  /// Where `key` was given; else where its nearest enclosing section starts; else the top.
  std::string origin_of(const std::string& key) const;
  /// The key to point at for a problem that involves `keys` (in the order its message names
  /// them): the first set by an override (the change that broke the file), else the first
  /// given, else the first.
  std::string blame(const std::vector<std::string>& keys) const;

 private:
  struct Value {
    std::string origin;
    bool by_override = false;
  };
  std::string top_;
  std::map<std::string, Value> values_;
  std::map<std::string, std::string> sections_;
};

}  // namespace lynx
