#pragma once
/// The one table of scenario and hardware-profile fields: key path, type and unit, default,
/// meaning, and how to parse a value into the Scenario struct and write it back. The loader,
/// `--set`, scenario_to_yaml, hardware_profile_to_yaml and scenario_fields_markdown all read
/// this table; no other list of keys exists.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "scenarios/scenario.hpp"

namespace lynx {

/// How a field's text is read.
enum class FieldType : std::uint8_t {
  kString,
  kInteger,
  kBool,
  kChoice,     ///< one word out of FieldDesc::choices
  kSize,       ///< bytes, e.g. "80GiB"
  kBandwidth,  ///< bytes per second, e.g. "600GB/s" or "200Gb/s"
  kTime,       ///< picoseconds, e.g. "1.5us"
  kFlopRate,   ///< FLOP per second, e.g. "312TFLOPS"
  kNumber,     ///< plain number
  kRatio,      ///< number in [0, 1] or a percentage
};

/// Which files a field appears in, and under which key.
enum class FieldPlace : std::uint8_t {
  kScenario,          ///< scenario files only, at `key`
  kHardware,          ///< profile files at `key`; scenario files at "hardware." + key
  kHardwareScenario,  ///< scenario files only, at "hardware." + key (nodes, profile, profile_file)
  kProfile,           ///< profile files only, at `key` (the profile's name)
};

/// One field: its documentation and how to set / get it on a Scenario (hardware fields act on
/// Scenario::hardware).
struct FieldDesc {
  std::string key;  ///< path inside its file kind, e.g. "parallel.tp" or "gpu.peak"
  FieldPlace place = FieldPlace::kScenario;
  FieldType type = FieldType::kString;
  std::vector<std::string> choices;  ///< kChoice: the allowed words
  std::string lower_bound;           ///< e.g. ">= 1", "> 0"; empty when any value is fine
  std::string default_text;          ///< what the field is when a file omits it
  std::string meaning;
  /// Selects the hardware profile to start from (hardware.profile, hardware.profile_file, a
  /// profile file's base): the loader resolves these before any other field.
  bool selects_profile = false;
  /// A hardware field a profile without `base` may leave out (its default_text applies).
  bool optional_in_profile = false;
  /// Parses `text` and stores it; throws lynx::Error (no position: the loader adds it).
  std::function<void(Scenario&, std::string_view text)> set;
  /// The field's value as text that `set` reads back to the same value.
  std::function<std::string(const Scenario&)> get;

  bool in_scenario() const { return place != FieldPlace::kProfile; }
  bool in_profile() const {
    return place == FieldPlace::kHardware || place == FieldPlace::kProfile;
  }
  /// Key in a scenario file ("hardware.gpu.peak"); empty if the field is profile-only.
  std::string scenario_key() const;
  /// Key in a profile file ("gpu.peak"); empty if the field is scenario-only.
  std::string profile_key() const;
};

/// Every field, in the order files are written and documented; built once (readers of
/// thousands of candidate scenarios ask for it on every read).
const std::vector<FieldDesc>& scenario_field_table();

/// The scenario fields (in_scenario) by scenario key; built once.
const std::map<std::string, FieldDesc>& scenario_fields_by_key();

/// Unit (or value form) of a field type for documentation, e.g. "size (bytes)".
std::string field_type_text(const FieldDesc& field);

}  // namespace lynx
