#include "scenarios/scenario_loader.hpp"
#include "scenarios/yaml_document.hpp"
#include "scenarios/hf_config.hpp"

#include "common/files.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "scenarios/embedded_files.hpp"
#include "scenarios/fields.hpp"
#include "common/checked.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace lynx {
namespace {

namespace fs = std::filesystem;

enum class FileKind : std::uint8_t { kScenario, kProfile };

/// One value read from a file or a --set override, with where it came from.
struct Assignment {
  std::string text;
  std::string origin;  ///< "FILE:LINE:COL" or "FILE: --set key=value"
};

/// The keys of one file kind: the leaves (fields) and every section above them.
struct KeySet {
  std::set<std::string> leaves;
  std::set<std::string> sections;
};

/// What a file (plus overrides) says, before anything is applied to a Scenario.
struct FileValues {
  std::string label;
  std::map<std::string, Assignment> values;  ///< by key path
  KeyOrigins origins;                        ///< where each value and section was given

  explicit FileValues(const std::string& file_label)
      : label(file_label), origins(file_label + ":1:1") {}
  /// Records `key = text`, given at `origin` (in the file, or by an override).
  void assign(const std::string& key, std::string text, const std::string& origin,
              bool by_override) {
    values[key] = Assignment{std::move(text), origin};
    origins.set_value(key, origin, by_override);
  }
  /// Where `key` was given; else the nearest enclosing section; else the top of the file.
  std::string origin_of(const std::string& key) const { return origins.origin_of(key); }
  /// The value of `key` if it was given and is non-empty.
  const Assignment* given(const std::string& key) const {
    const auto it = values.find(key);
    return it == values.end() || it->second.text.empty() ? nullptr : &it->second;
  }
};

std::string key_of(const FieldDesc& field, FileKind kind) {
  return kind == FileKind::kScenario ? field.scenario_key() : field.profile_key();
}

KeySet build_key_set(FileKind kind) {
  KeySet keys;
  for (const FieldDesc& field : scenario_field_table()) {
    const std::string key = key_of(field, kind);
    if (key.empty()) continue;
    keys.leaves.insert(key);
    for (std::size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', dot + 1)) {
      keys.sections.insert(key.substr(0, dot));
    }
  }
  return keys;
}

/// The keys and sections of a scenario or profile file; built once per kind.
const KeySet& key_set(FileKind kind) {
  static const KeySet scenario = build_key_set(FileKind::kScenario);
  static const KeySet profile = build_key_set(FileKind::kProfile);
  return kind == FileKind::kScenario ? scenario : profile;
}

std::string position(const std::string& label, const YAML::Mark& mark) {
  if (mark.is_null()) return label + ":1:1";
  return fmt::format("{}:{}:{}", label, mark.line + 1, mark.column + 1);  // yaml-cpp is 0-based
}

/// Runs `read`; a lynx::Error it throws comes out with its message on one line. Messages quote
/// the user's keys, values and profile names, and any of them may hold a line break.
template <typename Read>
auto with_one_line_errors(Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(e.code(), one_line(e.what()));
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string last_component(const std::string& key) {
  const std::size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    const std::size_t dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot - begin));
    if (dot == std::string::npos) return parts;
    begin = dot + 1;
  }
}

/// How many trailing key components two keys share ("hardware.nic.bw", "hardware.node.nic.bw": 2).
std::size_t shared_tail(const std::string& a, const std::string& b) {
  const std::vector<std::string> pa = split_key(a);
  const std::vector<std::string> pb = split_key(b);
  std::size_t n = 0;
  while (n < pa.size() && n < pb.size() && pa[pa.size() - 1 - n] == pb[pb.size() - 1 - n]) ++n;
  return n;
}

/// "; did you mean 'x'?" for a close known key: a small typo first, else the key that ends in
/// the most of the same words (a field put in the wrong section).
std::string suggestion(const std::string& unknown, const KeySet& keys) {
  // No key is this long; edit distances to every key would cost length² each (fuzz_plan).
  if (unknown.size() > 256) return {};
  // Keys whose meaning changed with a new name, so that an old file cannot silently mean
  // something else.
  static constexpr std::string_view kOldHostOp = "gpu.host_op";
  if (unknown.size() >= kOldHostOp.size() && unknown.ends_with(kOldHostOp) &&
      (unknown.size() == kOldHostOp.size() || unknown[unknown.size() - kOldHostOp.size() - 1] == '.'))
    return fmt::format("; it was renamed '{}gpu.host_kernel' and is now the host time per launched CUDA kernel, "
                       "not per op (an op costs its kernel count times it: docs/host.md)",
                       unknown.substr(0, unknown.size() - kOldHostOp.size()));
  std::vector<std::string> candidates(keys.leaves.begin(), keys.leaves.end());
  candidates.insert(candidates.end(), keys.sections.begin(), keys.sections.end());
  const std::string* best = nullptr;
  std::size_t best_distance = 0;
  for (const std::string& candidate : candidates) {
    const std::size_t d = edit_distance(unknown, candidate);
    if (best == nullptr || d < best_distance) {
      best = &candidate;
      best_distance = d;
    }
  }
  const std::size_t allowed = std::max<std::size_t>(2, last_component(unknown).size() / 3);
  if (best != nullptr && best_distance <= allowed)
    return fmt::format("; did you mean '{}'?", *best);
  best = nullptr;
  std::size_t best_tail = 0;
  for (const std::string& candidate : candidates) {
    const std::size_t tail = shared_tail(unknown, candidate);
    if (tail > best_tail) {
      best = &candidate;
      best_tail = tail;
    }
  }
  if (best != nullptr) return fmt::format("; did you mean '{}'?", *best);
  return {};
}

std::string node_kind(const YAML::Node& node) {
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "nothing";
  return fmt::format("'{}'", node.Scalar());
}

/// Collects every leaf of `node` into `out`, rejecting unknown keys, duplicates and values of
/// the wrong shape (a map where a value belongs, or the reverse).
void collect(const YAML::Node& node, const std::string& prefix, const KeySet& keys,
             FileValues& out) {
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;  // copies: the iterator yields temporaries
    const YAML::Node value = it->second;
    const std::string key_origin = position(out.label, key_node.Mark());
    if (!key_node.IsScalar()) fail(ErrorCode::kWrongShape, "{}: keys must be plain words", key_origin);
    const std::string key = prefix.empty() ? key_node.Scalar() : prefix + "." + key_node.Scalar();
    if (!seen.insert(key).second) fail(ErrorCode::kDuplicateKey, "{}: key '{}': given twice", key_origin, key);
    if (keys.leaves.count(key) != 0) {
      if (value.IsNull()) fail(ErrorCode::kMissingKey, "{}: key '{}': no value given", key_origin, key);
      if (!value.IsScalar()) {
        fail(ErrorCode::kWrongShape, "{}: key '{}': expected a single value, got {}", key_origin, key, node_kind(value));
      }
      const std::string value_origin =
          value.Mark().is_null() ? key_origin : position(out.label, value.Mark());
      out.assign(key, value.Scalar(), value_origin, false);
    } else if (keys.sections.count(key) != 0) {
      out.origins.set_section(key, key_origin);
      if (value.IsNull()) continue;  // an empty section
      if (!value.IsMap()) {
        fail(ErrorCode::kWrongShape, "{}: key '{}': expected a section of keys (a map), got {}", key_origin, key,
             node_kind(value));
      }
      collect(value, key, keys, out);
    } else {
      fail(ErrorCode::kUnknownKey, "{}: unknown key '{}'{}", key_origin, key, suggestion(key, keys));
    }
  }
}

/// Parses YAML text (file:line:col on syntax errors) and collects its keys.
FileValues read_values(std::string_view text, const std::string& label, const KeySet& keys) {
  FileValues out(label);
  const YAML::Node root = load_single_document(std::string(text), label);
  if (root.IsNull()) return out;
  if (!root.IsMap())
    fail(ErrorCode::kWrongShape, "{}:1:1: expected a map of keys at the top, got {}", label, node_kind(root));
  try {
    collect(root, "", keys, out);
  } catch (const YAML::Exception& e) {
    fail(ErrorCode::kMalformedYaml, "{}: malformed YAML: {}", position(label, e.mark), e.msg);
  }
  return out;
}

/// True when YAML reads `text` as the plain scalar `text` itself: it starts with a letter or
/// digit, holds only letters, digits and . _ + - / (no indicator, space or quote), and is not
/// one of YAML's spellings of null.
bool is_plain_word(std::string_view text) {
  if (text.empty() || std::isalnum(static_cast<unsigned char>(text.front())) == 0) return false;
  for (const char c : text)
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && std::string_view("._+-/").find(c) == std::string_view::npos)
      return false;
  return text != "null" && text != "Null" && text != "NULL";
}

/// Applies "key.path=value" overrides on top of what the file says.
void apply_overrides(const std::vector<std::string>& overrides, const KeySet& keys,
                     FileValues& values) {
  for (const std::string& override_text : overrides) {
    const std::string origin = fmt::format("{}: --set {}", values.label, override_text);
    const std::size_t equals = override_text.find('=');
    if (equals == std::string::npos) fail(ErrorCode::kInvalidOption, "{}: expected key.path=value", origin);
    std::string key = override_text.substr(0, equals);
    key.erase(0, key.find_first_not_of(" \t"));
    key.erase(key.find_last_not_of(" \t") + 1);
    if (keys.sections.count(key) != 0) {
      fail(ErrorCode::kWrongShape, "{}: key '{}' is a section; set one of its fields, e.g. '{}.{}'", origin, key, key,
           last_component(*std::find_if(
               keys.leaves.begin(), keys.leaves.end(),
               [&](const std::string& leaf) { return leaf.rfind(key + ".", 0) == 0; })));
    }
    if (keys.leaves.count(key) == 0) {
      fail(ErrorCode::kUnknownKey, "{}: unknown key '{}'{}", origin, key, suggestion(key, keys));
    }
    const std::string text = override_text.substr(equals + 1);
    if (is_plain_word(text)) {  // what YAML reads as itself: skip the parser (`best` sets thousands)
      values.assign(key, text, origin, true);
      continue;
    }
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      fail(ErrorCode::kMalformedYaml, "{}: key '{}': malformed value: {}", origin, key, e.msg);
    }
    if (value.IsMap() || value.IsSequence()) {
      fail(ErrorCode::kWrongShape, "{}: key '{}': expected a single value, got {}", origin, key, node_kind(value));
    }
    values.assign(key, value.IsNull() ? std::string() : value.Scalar(), origin, true);
  }
}

/// Sets every given field (except the profile selectors) on `scenario`.
void apply_values(const std::vector<FieldDesc>& table, FileKind kind, const FileValues& values,
                  Scenario& scenario) {
  for (const FieldDesc& field : table) {
    if (field.selects_profile) continue;
    const std::string key = key_of(field, kind);
    if (key.empty()) continue;
    const auto it = values.values.find(key);
    if (it == values.values.end()) continue;
    try {
      field.set(scenario, it->second.text);
    } catch (const Error& e) {
      fail(e.code(), "{}: key '{}': {}", it->second.origin, key, e.what());
    }
  }
}

/// `key` itself, after checking that the field table has it (messages never name stale keys).
std::string known_key(const KeySet& keys, const std::string& key) {
  LYNX_CHECK(keys.leaves.count(key) != 0 || keys.sections.count(key) != 0,
             "check names key '{}' that the field table lacks", key);
  return key;
}

/// Checks a hardware description; keys in messages get `key_prefix` ("hardware." in scenarios).
void check_hardware(const HardwareSpec& hw, const FileValues& values, const KeySet& keys,
                    const std::string& key_prefix) {
  auto fail_at = [&](const std::string& key, const std::string& message) {
    const std::string full_key = known_key(keys, key_prefix + key);
    fail(ErrorCode::kBadHardware, "{}: key '{}': {}", values.origin_of(full_key), full_key, message);
  };
  auto require_positive = [&](const std::string& key, bool positive) {
    if (!positive) fail_at(key, "not set; a hardware profile must give it (> 0)");
  };
  require_positive("gpu.peak", hw.peak_flops_per_s > 0);
  require_positive("gpu.hbm_bw", hw.hbm_bw_bytes_per_s > 0);
  require_positive("gpu.memory", hw.memory_bytes > 0);
  if (hw.memory_reserve_bytes >= hw.memory_bytes) {
    fail_at("gpu.reserve", fmt::format("the reserve ({} bytes) must be smaller than gpu.memory "
                                       "({} bytes)",
                                       hw.memory_reserve_bytes, hw.memory_bytes));
  }
  require_positive("gpu.gemm_efficiency.max", hw.gemm.max > 0);
  require_positive("gpu.attention_efficiency.max", hw.attention.max > 0);
  require_positive("gpu.memory_bound_efficiency.max", hw.memory_bound.max > 0);
  require_positive("collective_efficiency", hw.collective_efficiency > 0);
  if (hw.intra_node == IntraNode::kNvSwitch && hw.nvlink.bw_bytes_per_s == 0) {
    fail_at("node.nvlink.bw", "must be > 0 when node.intra is nvswitch");
  }
  require_positive("node.pcie.bw", hw.pcie.bw_bytes_per_s > 0);
  require_positive("node.pcie_host.bw", hw.pcie_host.bw_bytes_per_s > 0);
  require_positive("node.nic.bw", hw.nic.bw_bytes_per_s > 0);
  if (hw.collective_model == CollectiveModel::kNccl) {
    const std::pair<const char*, const NcclProtocol*> protocols[] = {
        {"nccl.ll", &hw.nccl.ll}, {"nccl.ll128", &hw.nccl.ll128}, {"nccl.simple", &hw.nccl.simple}};
    for (const auto& [name, proto] : protocols)
      if (proto->bw_fraction > 1.0)
        fail_at(std::string(name) + ".bw_fraction", fmt::format("must be <= 1, got {}", proto->bw_fraction));
    if (!(hw.nccl.simple.bw_fraction > 0.0))
      fail_at("nccl.simple.bw_fraction", "must be > 0 when collective_model is nccl (the protocol every size can use)");
  }
  if (hw.nvlink_domain_gpus > 0) {
    if (hw.intra_node != IntraNode::kNvSwitch)
      fail_at("node.nvlink_domain_gpus", "an NVLink domain needs node.intra nvswitch");
    if (hw.nvlink_domain_gpus % hw.gpus_per_node != 0)
      fail_at("node.nvlink_domain_gpus",
              fmt::format("{} GPUs are not a whole number of nodes of {} GPUs (gpus_per_node)",
                          hw.nvlink_domain_gpus, hw.gpus_per_node));
  }
  if (hw.intra_node == IntraNode::kPcie && hw.gpus_per_node % hw.gpus_per_pcie_switch != 0) {
    fail_at("node.gpus_per_pcie_switch",
            fmt::format("{} GPUs per node do not split evenly over switches of {} GPUs",
                        hw.gpus_per_node, hw.gpus_per_pcie_switch));
  }
}

std::string file_stem(const std::string& label) {
  return fs::path(label).stem().string();
}

std::string builtin_names_text() {
  std::vector<std::string> names = builtin_profile_names();
  return fmt::format("{}", fmt::join(names, ", "));
}

/// How deep profiles may name each other as `base` (a cycle stops here).
constexpr int kMaxBaseDepth = 8;

HardwareSpec builtin_profile(const std::string& name, int depth);

/// Refuses a profile without `base` that leaves hardware fields out, naming all of them: a
/// missing field must not fall back to a perfect-GPU struct default (efficiency 1, no launch
/// overhead, no contention).
void require_every_field(const std::vector<FieldDesc>& table, const FileValues& values) {
  std::vector<std::string> missing;
  std::size_t fields = 0;
  for (const FieldDesc& field : table) {
    if (field.place != FieldPlace::kHardware || field.optional_in_profile) continue;
    ++fields;
    if (values.values.count(field.profile_key()) == 0) missing.push_back(field.profile_key());
  }
  if (missing.empty()) return;
  fail(ErrorCode::kIncompleteProfile, 
      "{}:1:1: hardware profile lacks {} of its {} fields: {}; give them, or start from a "
      "built-in profile with 'base: NAME' and give only what differs (built-in profiles: {})",
      values.label, missing.size(), fields, fmt::join(missing, ", "), builtin_names_text());
}

/// Reads one profile (file or embedded) into a HardwareSpec and checks it. With `base`, the
/// named built-in profile supplies every field the file does not give; without, the file must
/// give them all. `depth` counts the profiles that named this one as their base.
HardwareSpec read_profile(std::string_view text, const std::string& label, int depth = 0) {
  const std::vector<FieldDesc>& table = scenario_field_table();
  const KeySet& keys = key_set(FileKind::kProfile);
  const FileValues values = read_values(text, label, keys);
  Scenario holder;
  if (const Assignment* base = values.given("base")) {
    if (depth >= kMaxBaseDepth)
      fail(ErrorCode::kInternal, "{}: key 'base': profiles name each other as base more than {} deep (a cycle?)",
           base->origin, kMaxBaseDepth);
    try {
      holder.hardware = builtin_profile(base->text, depth + 1);
    } catch (const Error& e) {
      fail(e.code(), "{}: key 'base': {}", base->origin, e.what());
    }
    if (values.values.count("source") == 0) {
      std::vector<std::string> overridden;
      for (const FieldDesc& field : table)
        if (field.place == FieldPlace::kHardware && values.values.count(field.profile_key()) != 0)
          overridden.push_back(field.profile_key());
      holder.hardware.source =
          overridden.empty()
              ? fmt::format("base profile {}: {}", base->text, holder.hardware.source)
              : fmt::format("base profile {} with {} from {}; the base's source: {}", base->text,
                            fmt::join(overridden, ", "), file_stem(label), holder.hardware.source);
    }
  } else {
    require_every_field(table, values);
  }
  holder.hardware.profile = file_stem(label);
  holder.hardware.profile_file.clear();
  apply_values(table, FileKind::kProfile, values, holder);
  check_hardware(holder.hardware, values, keys, "");
  return holder.hardware;
}

/// The built-in profile `name`; throws lynx::Error listing the known names (and a close one).
HardwareSpec builtin_profile(const std::string& name, int depth) {
  // Built-in profiles are compiled in, so each reads to the same spec every time: read each once
  // (`best` and sweeps resolve thousands of candidate scenarios naming the same profile).
  static std::mutex cache_mutex;
  static std::map<std::string, HardwareSpec, std::less<>> cache;
  {
    const std::lock_guard<std::mutex> lock(cache_mutex);
    if (const auto it = cache.find(name); it != cache.end()) return it->second;
  }
  for (const detail::EmbeddedFile& file : detail::embedded_profiles()) {
    if (file.name != name) continue;
    HardwareSpec spec = read_profile(file.text, std::string(file.path), depth);
    const std::lock_guard<std::mutex> lock(cache_mutex);
    return cache.emplace(name, std::move(spec)).first->second;
  }
  // The closest known name by edit distance, among those within 3 edits or containing it.
  std::string hint;
  std::size_t best_distance = SIZE_MAX;
  for (const std::string& known : builtin_profile_names()) {
    const std::size_t d = edit_distance(known, name);
    if ((d <= 3 || (!name.empty() && known.find(name) != std::string::npos)) && d < best_distance) {
      best_distance = d;
      hint = fmt::format("; did you mean '{}'?", known);
    }
  }
  fail(ErrorCode::kUnknownProfile, "unknown hardware profile '{}' (built-in profiles: {}){}", name, builtin_names_text(), hint);
}

/// True when the scenario writes every profile field under hardware. itself, as the resolved
/// scenario embedded in a plan file does: it is then complete and needs no base profile.
bool gives_every_hardware_field(const FileValues& values) {
  for (const FieldDesc& field : scenario_field_table())
    if (field.place == FieldPlace::kHardware && values.values.count(field.scenario_key()) == 0) return false;
  return true;
}

/// `path` as an absolute path; a relative one is relative to the folder of the file `label`.
std::string relative_to_file(const std::string& path, const std::string& label) {
  fs::path p(path);
  if (p.is_relative()) p = fs::path(label).parent_path() / p;
  return fs::absolute(p).lexically_normal().string();
}

/// Sets the model.* fields a Hugging Face config.json gives (model.hf_config); the scenario's
/// own model keys are applied after, so they override it, as they override a preset.
void apply_hf_config(const std::vector<FieldDesc>& table, const FileValues& values, Scenario& scenario) {
  const Assignment* config = values.given("model.hf_config");
  if (config == nullptr) return;
  if (const Assignment* preset = values.given("model.preset"))
    fail(ErrorCode::kIncompatibleSettings, "{}: key 'model.hf_config': give either model.hf_config or model.preset "
         "(at {}), not both", config->origin, preset->origin);
  std::vector<HfModelValue> read;
  try {
    read = read_hf_config(relative_to_file(config->text, values.label));
  } catch (const Error& e) {
    fail(e.code(), "{}: key 'model.hf_config': {}", config->origin, e.what());
  }
  for (const HfModelValue& value : read) {
    const auto field = std::find_if(table.begin(), table.end(),
                                    [&](const FieldDesc& f) { return f.scenario_key() == value.key; });
    LYNX_CHECK(field != table.end(), "the Hugging Face reader fills key '{}' that the field table lacks", value.key);
    try {
      field->set(scenario, value.text);
    } catch (const Error& e) {
      fail(e.code(), "{}: key 'model.hf_config': {} (as {}): {}", config->origin, value.origin, value.key, e.what());
    }
  }
}

/// The hardware a scenario starts from: a built-in profile or a profile file, or nothing when
/// the scenario gives every hardware field (hardware.profile / profile_file then only name it,
/// so a plan file runs without the profile file it was made from).
HardwareSpec base_hardware(const FileValues& values) {
  const Assignment* profile = values.given("hardware.profile");
  const Assignment* profile_file = values.given("hardware.profile_file");
  if (profile != nullptr && profile_file != nullptr) {
    fail(ErrorCode::kIncompatibleSettings, 
        "{}: key 'hardware.profile_file': give either hardware.profile or "
        "hardware.profile_file, not both",
        profile_file->origin);
  }
  if (gives_every_hardware_field(values)) {
    HardwareSpec hw;  // every field is applied from the scenario next
    hw.profile = profile != nullptr        ? profile->text
                 : profile_file != nullptr ? file_stem(profile_file->text)
                                           : file_stem(values.label);
    if (profile_file != nullptr) hw.profile_file = profile_file->text;
    return hw;
  }
  if (profile != nullptr) {
    try {
      return builtin_hardware_profile(profile->text);
    } catch (const Error& e) {
      fail(e.code(), "{}: key 'hardware.profile': {}", profile->origin, e.what());
    }
  }
  if (profile_file != nullptr) {
    const std::string path = relative_to_file(profile_file->text, values.label);
    std::string text;
    try {
      text = read_text_file(path, "hardware profile");
    } catch (const Error& e) {
      fail(e.code(), "{}: key 'hardware.profile_file': {}", profile_file->origin, e.what());
    }
    HardwareSpec hw = read_profile(text, path);
    hw.profile_file = path;
    return hw;
  }
  fail(ErrorCode::kMissingKey, 
      "{}: key 'hardware.profile': no hardware given; set hardware.profile to a built-in "
      "profile ({}) or hardware.profile_file to a profile file",
      values.origin_of("hardware.profile"), builtin_names_text());
}

/// Nested YAML written from dotted key paths, keeping first-seen order.
struct YamlTree {
  std::string key;
  std::string value;
  std::vector<YamlTree> children;

  void insert(const std::string& path, const std::string& leaf_value) {
    const std::size_t dot = path.find('.');
    const std::string head = path.substr(0, dot);
    auto it = std::find_if(children.begin(), children.end(),
                           [&](const YamlTree& c) { return c.key == head; });
    if (it == children.end()) {
      children.push_back(YamlTree{head, {}, {}});
      it = children.end() - 1;
    }
    if (dot == std::string::npos) {
      it->value = leaf_value;
    } else {
      it->insert(path.substr(dot + 1), leaf_value);
    }
  }

  void emit(YAML::Emitter& out) const {
    out << YAML::BeginMap;
    for (const YamlTree& child : children) {
      out << YAML::Key << child.key << YAML::Value;
      if (child.children.empty()) {
        out << child.value;
      } else {
        child.emit(out);
      }
    }
    out << YAML::EndMap;
  }
};

std::string emit_yaml(const YamlTree& tree, const std::string& comment) {
  YAML::Emitter out;
  out << YAML::Comment(comment) << YAML::Newline;
  tree.emit(out);
  return std::string(out.c_str()) + "\n";
}

}  // namespace

struct ParsedScenario::Parsed {
  const std::vector<FieldDesc>& table = scenario_field_table();
  const KeySet& keys = key_set(FileKind::kScenario);
  FileValues values;
  Parsed(std::string_view yaml_text, const std::string& file_label)
      : values(read_values(yaml_text, file_label, keys)) {}
};

ParsedScenario::ParsedScenario(std::string_view yaml_text, const std::string& file_label)
    : parsed_(with_one_line_errors([&] { return std::make_shared<const Parsed>(yaml_text, file_label); })) {}

UnresolvedScenario ParsedScenario::read(const std::vector<std::string>& overrides) const {
  return with_one_line_errors([&] {
    FileValues values = parsed_->values;
    apply_overrides(overrides, parsed_->keys, values);

    Scenario scenario;
    scenario.name = file_stem(values.label);
    scenario.source_file = values.label;
    scenario.hardware = base_hardware(values);
    apply_hf_config(parsed_->table, values, scenario);  // explicit model keys override it next
    apply_values(parsed_->table, FileKind::kScenario, values, scenario);
    if (!scenario.model.hf_config.empty()) scenario.model.hf_config = relative_to_file(scenario.model.hf_config, values.label);
    check_hardware(scenario.hardware, values, parsed_->keys, "hardware.");
    return UnresolvedScenario{std::move(scenario), std::move(values.origins)};
  });
}

UnresolvedScenario read_scenario_text(std::string_view yaml_text, const std::string& file_label,
                                      const std::vector<std::string>& overrides) {
  return ParsedScenario(yaml_text, file_label).read(overrides);
}

UnresolvedScenario read_scenario_file(const std::string& path,
                                      const std::vector<std::string>& overrides) {
  return read_scenario_text(read_text_file(path, "scenario file"), path, overrides);
}

UnresolvedScenario read_default_scenario(const std::vector<std::string>& overrides) {
  const detail::EmbeddedFile file = detail::embedded_default_scenario();
  UnresolvedScenario read = read_scenario_text(file.text, "<built-in default scenario>", overrides);
  read.scenario.source_file = "<built-in>";
  return read;
}

void check_scenario_layout(const Scenario& s, const KeyOrigins& origins) {
  const KeySet& keys = key_set(FileKind::kScenario);
  for (const char* key :
       {"parallel", "parallel.global_batch", "parallel.virtual_stages", "parallel.schedule",
        "parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "hardware.nodes", "sim.mode",
        "parallel.tp_comm_overlap", "parallel.tp_comm_overlap_chunks", "parallel.sequence_parallel",
        "parallel.micro_batch", "model.seq_len", "parallel.overlap_param_gather",
        "parallel.distributed_optimizer", "parallel.first_stage_layers", "parallel.last_stage_layers",
        "recompute.partition", "model.gemm_precision", "hardware.profile", "hardware.gpu.fp8_peak"}) {
    known_key(keys, key);
  }
  const ParallelSpec& p = s.parallel;
  const std::int64_t batch_divisor =
      checked_product("parallel.micro_batch x parallel.dp", {p.micro_batch, p.dp});
  if (p.global_batch % batch_divisor != 0) {
    fail(ErrorCode::kIndivisibleLayout, "{}: key 'parallel.global_batch': {} is not divisible by micro_batch * dp = {} * {} = {}",
         origins.origin_of("parallel.global_batch"), p.global_batch, p.micro_batch, p.dp,
         batch_divisor);
  }
  const std::int64_t gpus_needed = gpus_used(p);
  const std::int64_t gpus_present = checked_product(
      "hardware.nodes x hardware.gpus_per_node", {s.hardware.nodes, s.hardware.gpus_per_node});
  if (gpus_needed > gpus_present) {
    // The product as the layout sets it: cp named only when context parallelism is on.
    const std::string product = p.cp > 1 ? fmt::format("tp * cp * pp * dp = {} * {} * {} * {}", p.tp, p.cp, p.pp, p.dp)
                                         : fmt::format("tp * pp * dp = {} * {} * {}", p.tp, p.pp, p.dp);
    fail(ErrorCode::kTooManyGpus,
        "{}: key 'parallel': {} needs {} GPUs, the cluster has {} "
        "(hardware.nodes {} x hardware.gpus_per_node {})",
        origins.origin_of(
            origins.blame({"parallel.dp", "parallel.cp", "parallel.pp", "parallel.tp", "hardware.nodes"})),
        product, gpus_needed, gpus_present, s.hardware.nodes, s.hardware.gpus_per_node);
  }
  if (p.virtual_stages > 1 && p.schedule != ScheduleKind::kInterleaved) {
    fail(ErrorCode::kIncompatibleSettings, 
        "{}: key 'parallel.virtual_stages': {} model chunks per GPU need schedule "
        "'interleaved'",
        origins.origin_of("parallel.virtual_stages"), p.virtual_stages);
  }
  if (p.schedule == ScheduleKind::kZbH1 && s.sim.mode == SimMode::kFast) {
    const std::string key = origins.blame({"parallel.schedule", "sim.mode"});
    fail(ErrorCode::kIncompatibleSettings,
        "{}: key '{}': parallel.schedule zb-h1 needs sim.mode exact (fast mode composes whole "
        "backward steps; it has no deferred weight-gradient passes)",
        origins.origin_of(key), key);
  }
  if (p.pipeline_exchange == PipelineExchange::kBlocking && p.pp > 1) {
    if (p.schedule == ScheduleKind::kZbH1) {
      const std::string key = origins.blame({"parallel.pipeline_exchange", "parallel.schedule"});
      fail(ErrorCode::kIncompatibleSettings,
           "{}: key '{}': parallel.pipeline_exchange blocking is modelled for the schedules gpipe, 1f1b and "
           "interleaved (Megatron's), not zb-h1",
           origins.origin_of(key), key);
    }
  }
  if (p.tp_comm_overlap && !p.sequence_parallel) {
    // Megatron-LM's validate_args: "Tensor parallel communication/GEMM overlap can happen only
    // when sequence parallelism is enabled".
    const std::string key = origins.blame({"parallel.tp_comm_overlap", "parallel.sequence_parallel"});
    fail(ErrorCode::kIncompatibleSettings,
         "{}: key '{}': parallel.tp_comm_overlap needs parallel.sequence_parallel: true "
         "(Megatron-LM overlaps TP communication with GEMMs only under sequence parallelism)",
         origins.origin_of(key), key);
  }
  // parallel.overlap_param_gather and the sharding keys: model::check_sharding.
  const std::int64_t rows = checked_product("model.seq_len x parallel.micro_batch", {s.model.seq_len, p.micro_batch});
  if (p.tp_comm_overlap && p.tp_comm_overlap_chunks > 0 && rows % p.tp_comm_overlap_chunks != 0) {
    const std::string key = origins.blame({"parallel.tp_comm_overlap_chunks", "model.seq_len", "parallel.micro_batch"});
    fail(ErrorCode::kIndivisibleLayout,
         "{}: key '{}': parallel.tp_comm_overlap_chunks ({}) does not divide seq_len * micro_batch "
         "= {}: each chunk is a whole number of the GEMM's rows",
         origins.origin_of(key), key, p.tp_comm_overlap_chunks, rows);
  }
  if (s.model.gemm_precision == GemmPrecision::kFp8 && s.hardware.fp8_peak_flops_per_s == 0) {
    const std::string key = origins.blame({"model.gemm_precision", "hardware.profile", "hardware.gpu.fp8_peak"});
    fail(ErrorCode::kIncompatibleSettings,
         "{}: key '{}': model.gemm_precision fp8 needs FP8 tensor cores, and hardware profile "
         "'{}' ({}) declares none (gpu.fp8_peak 0; A100 has no FP8): use an H100 / H200 "
         "profile, or set hardware.gpu.fp8_peak",
         origins.origin_of(key), key, s.hardware.profile, s.hardware.gpu_name);
  }
  if ((p.first_stage_layers != 0 || p.last_stage_layers != 0) &&
      s.recompute.partition == PartitionKind::kBalanced) {
    const std::string key =
        origins.blame({"recompute.partition", "parallel.first_stage_layers", "parallel.last_stage_layers"});
    fail(ErrorCode::kIncompatibleSettings,
         "{}: key '{}': parallel.first_stage_layers / last_stage_layers ({} / {}) fix the layers "
         "per stage, recompute.partition balanced chooses them: set one or the other",
         origins.origin_of(key), key, p.first_stage_layers, p.last_stage_layers);
  }
  if (p.schedule == ScheduleKind::kInterleaved && p.virtual_stages < 2) {
    fail(ErrorCode::kIncompatibleSettings, 
        "{}: key 'parallel.schedule': the interleaved schedule needs parallel.virtual_stages "
        ">= 2",
        origins.origin_of(origins.blame({"parallel.schedule", "parallel.virtual_stages"})));
  }
}

void check_scenario_ranges(const Scenario& scenario, const std::string& label) {
  for (const FieldDesc& field : scenario_field_table()) {
    if (field.type != FieldType::kInteger || !field.in_scenario()) continue;
    Scenario copy = scenario;  // read the value back through its field: the one range check
    try {
      field.set(copy, field.get(scenario));
    } catch (const Error& e) {
      fail(e.code(), "{}: key '{}': {}", label, field.scenario_key(), e.what());
    }
  }
}

std::string scenario_to_yaml(const Scenario& scenario) {
  YamlTree tree;
  for (const FieldDesc& field : scenario_field_table()) {
    if (!field.in_scenario()) continue;
    const std::string value = field.get(scenario);
    if (field.selects_profile && value.empty()) continue;  // the other selector is written
    tree.insert(field.scenario_key(), value);
  }
  return emit_yaml(tree, "lynxsim scenario, resolved: every field, units written out");
}

std::string hardware_profile_to_yaml(const HardwareSpec& hardware) {
  Scenario holder;
  holder.hardware = hardware;
  YamlTree tree;
  for (const FieldDesc& field : scenario_field_table()) {
    // A written profile gives every field, so it names no base.
    if (field.in_profile() && !field.selects_profile)
      tree.insert(field.profile_key(), field.get(holder));
  }
  return emit_yaml(tree, "lynxsim hardware profile");
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> names;
  for (const detail::EmbeddedFile& file : detail::embedded_profiles()) {
    names.emplace_back(file.name);
  }
  return names;
}

HardwareSpec builtin_hardware_profile(const std::string& name) { return builtin_profile(name, 0); }

HardwareSpec load_hardware_profile_text(std::string_view yaml_text, const std::string& file_label) {
  return with_one_line_errors([&] { return read_profile(yaml_text, file_label); });
}

HardwareSpec load_hardware_profile_file(const std::string& path) {
  HardwareSpec hw = load_hardware_profile_text(read_text_file(path, "hardware profile"), path);
  hw.profile_file = fs::absolute(fs::path(path)).lexically_normal().string();
  return hw;
}

namespace {

/// Markdown table (header and one row per field) of `fields`.
std::string fields_table_markdown(const std::vector<FieldDesc>& fields) {
  auto cell = [](std::string text) {
    std::string escaped;
    for (const char c : text) {
      if (c == '|') escaped += '\\';
      escaped += c;
    }
    return escaped;
  };
  std::string md;
  md += "| Scenario key | Profile key | Type | Default | Meaning |\n";
  md += "|---|---|---|---|---|\n";
  for (const FieldDesc& field : fields) {
    const std::string scenario_key = field.scenario_key();
    const std::string profile_key = field.profile_key();
    std::string type = field_type_text(field);
    if (!field.lower_bound.empty()) type += ", " + field.lower_bound;
    md += fmt::format("| {} | {} | {} | {} | {} |\n",
                      scenario_key.empty() ? "-" : "`" + scenario_key + "`",
                      profile_key.empty() ? "-" : "`" + profile_key + "`", cell(type),
                      cell(field.default_text), cell(field.meaning));
  }
  return md;
}

/// `key` is `prefix` or lies under it: "hardware.node" selects "hardware.node.nic.bw", not
/// "hardware.nodes"; a prefix ending in '.' ("gpu.") selects what is under that section.
bool under(const std::string& key, std::string_view prefix) {
  if (key.empty() || key.compare(0, prefix.size(), prefix) != 0) return false;
  return key.size() == prefix.size() || prefix.back() == '.' || key[prefix.size()] == '.';
}

}  // namespace

std::string scenario_fields_markdown() {
  return fields_table_markdown(scenario_field_table()) +
         fmt::format("\nBuilt-in hardware profiles: {}.\n", builtin_names_text());
}

std::string scenario_fields_markdown(std::string_view prefix) {
  if (prefix.empty()) return scenario_fields_markdown();
  const std::vector<FieldDesc>& table = scenario_field_table();
  std::vector<FieldDesc> matching;
  for (const FieldDesc& field : table) {
    if (under(field.scenario_key(), prefix) || under(field.profile_key(), prefix))
      matching.push_back(field);
  }
  if (matching.empty()) {
    // Suggest among both spellings of every key, as the loader does for an unknown key; else
    // name the top-level keys to start from.
    KeySet keys = key_set(FileKind::kScenario);
    const KeySet& profile_keys = key_set(FileKind::kProfile);
    keys.leaves.insert(profile_keys.leaves.begin(), profile_keys.leaves.end());
    keys.sections.insert(profile_keys.sections.begin(), profile_keys.sections.end());
    std::string hint = suggestion(std::string(prefix), keys);
    if (hint.empty()) {
      std::set<std::string> top;
      for (const std::string& key : keys.leaves) top.insert(key.substr(0, key.find('.')));
      hint = fmt::format(" (top-level keys: {})", fmt::join(top, ", "));
    }
    fail(ErrorCode::kUnknownKey, "no scenario or profile field is '{}' or lies under it{}", prefix, hint);
  }
  return fields_table_markdown(matching);
}

}  // namespace lynx
