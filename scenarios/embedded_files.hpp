#pragma once
/// Files compiled into the binary (generated at build time by scenarios/embed_files.cmake from
/// the list in scenarios/CMakeLists.txt), so lynxsim needs no data files at run time.
#include <span>
#include <string_view>

namespace lynx::detail {

/// One embedded file: its stem, its path relative to the repository, its text.
struct EmbeddedFile {
  std::string_view name;  ///< "dgx-a100-80gb"
  std::string_view path;  ///< "hw_models/profiles/dgx-a100-80gb.yaml"
  std::string_view text;
};

/// hw_models/profiles/*.yaml, in the order CMakeLists.txt lists them.
std::span<const EmbeddedFile> embedded_profiles();
/// scenarios/examples/default.yaml: the built-in default scenario.
EmbeddedFile embedded_default_scenario();

}  // namespace lynx::detail
