// Fuzz target: hardware profile YAML text -> load_hardware_profile_text, then the profile
// written back (hardware_profile_to_yaml) must read back to the same text.
#include "scenarios/scenario_loader.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lynx::fuzz::check_reader(data, size, [](std::string_view text) {
    const lynx::HardwareSpec hw = lynx::load_hardware_profile_text(text, "fuzz-profile.yaml");
    const std::string yaml = lynx::hardware_profile_to_yaml(hw);
    const lynx::HardwareSpec again = lynx::load_hardware_profile_text(yaml, "fuzz-profile-again.yaml");
    lynx::fuzz::require(lynx::hardware_profile_to_yaml(again) == yaml,
                        "hardware_profile_to_yaml does not read back to the same profile");
  });
}
