// Built-in hardware profiles: each loads, says what the brief and datasheets say, gives every
// field explicitly, and is embedded (matches hw_models/profiles/ on disk); profile-file errors.
#include "tests/error_of.hpp"
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "scenarios/fields.hpp"
#include "scenarios/scenario_loader.hpp"

using namespace lynx;

namespace {

using lynx::test::error_of;

std::string profiles_dir() {
  return std::string(LYNXSIM_SOURCE_DIR) + "/hw_models/profiles";
}

constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint64_t kMiB = 1ULL << 20;

}  // namespace

TEST_CASE("the built-in profiles are the files in hw_models/profiles") {
  const std::vector<std::string> names = builtin_profile_names();
  CHECK(names == std::vector<std::string>{"dgx-a100-80gb", "a100-pcie-40gb", "dgx-h100-80gb",
                                          "h200-sxm-141gb", "h200-sxm-141gb-calibrated",
                                          "dgx-a100-80gb-vtrain-fit"});
  std::vector<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(profiles_dir())) {
    if (entry.path().extension() == ".yaml") on_disk.push_back(entry.path().stem().string());
  }
  std::vector<std::string> sorted_names = names;
  std::sort(sorted_names.begin(), sorted_names.end());
  std::sort(on_disk.begin(), on_disk.end());
  CHECK_MESSAGE(sorted_names == on_disk,
                "every hw_models/profiles/*.yaml must be listed in scenarios/CMakeLists.txt");
}

TEST_CASE("each built-in profile loads, names itself, equals its file, and gives every field") {
  const std::vector<FieldDesc> table = scenario_field_table();
  for (const std::string& name : builtin_profile_names()) {
    CAPTURE(name);
    const HardwareSpec embedded = builtin_hardware_profile(name);
    CHECK(embedded.profile == name);
    CHECK_FALSE(embedded.source.empty());
    CHECK_FALSE(embedded.gpu_name.empty());
    CHECK(embedded.profile_file.empty());
    const std::string path = profiles_dir() + "/" + name + ".yaml";
    // The embedded copy is the file as it is now (the build regenerates it on change).
    CHECK(hardware_profile_to_yaml(load_hardware_profile_file(path)) ==
          hardware_profile_to_yaml(embedded));
    // No field is left to a default: a profile states (and cites) every number.
    const YAML::Node root = YAML::LoadFile(path);
    for (const FieldDesc& field : table) {
      if (!field.in_profile()) continue;
      CAPTURE(field.profile_key());
      YAML::Node node = YAML::Clone(root);
      std::string key = field.profile_key();
      bool present = true;
      for (std::size_t begin = 0; present;) {
        const std::size_t dot = key.find('.', begin);
        const std::string part = key.substr(begin, dot - begin);
        if (!node.IsMap() || !node[part]) {
          present = false;
          break;
        }
        node = node[part];
        if (dot == std::string::npos) break;
        begin = dot + 1;
      }
      CHECK(present);
    }
    // Profile YAML round trip.
    const std::string yaml = hardware_profile_to_yaml(embedded);
    CHECK(hardware_profile_to_yaml(load_hardware_profile_text(yaml, name + ".yaml")) == yaml);
  }
}

TEST_CASE("dgx-a100-80gb: A100-SXM4-80GB in a DGX A100") {
  const HardwareSpec hw = builtin_hardware_profile("dgx-a100-80gb");
  CHECK(hw.peak_flops_per_s == 312'000'000'000'000ULL);  // 312 TFLOPS dense bf16
  CHECK(hw.hbm_bw_bytes_per_s == 2'039'000'000'000ULL);  // 2039 GB/s
  CHECK(hw.memory_bytes == 80 * kGiB);
  CHECK(hw.gpus_per_node == 8);
  CHECK(hw.intra_node == IntraNode::kNvSwitch);
  CHECK(hw.nvlink.bw_bytes_per_s == 300'000'000'000ULL);  // 12 links x 25 GB/s per direction
  CHECK(hw.pcie.bw_bytes_per_s == 31'500'000'000ULL);     // gen4 x16
  CHECK(hw.nics_per_node == 8);
  CHECK(hw.nic.bw_bytes_per_s == 25'000'000'000ULL);  // HDR 200 Gb/s / 8
  CHECK(hw.nvlink.latency_ps == 1'000'000);           // 1 us
  CHECK(hw.nic.latency_ps == 1'500'000);              // 1.5 us
  CHECK(hw.kernel_launch_ps == 2'500'000);            // 2.5 us
  CHECK(hw.gemm.max == 0.8);
}

TEST_CASE("a100-pcie-40gb: PCIe only, two GPUs per switch") {
  const HardwareSpec hw = builtin_hardware_profile("a100-pcie-40gb");
  CHECK(hw.peak_flops_per_s == 312'000'000'000'000ULL);
  CHECK(hw.hbm_bw_bytes_per_s == 1'555'000'000'000ULL);
  CHECK(hw.memory_bytes == 40 * kGiB);
  CHECK(hw.intra_node == IntraNode::kPcie);
  CHECK(hw.nvlink.bw_bytes_per_s == 0);
  CHECK(hw.gpus_per_pcie_switch == 2);
  CHECK(hw.pcie.bw_bytes_per_s == 31'500'000'000ULL);
  CHECK(hw.pcie_host.bw_bytes_per_s == 31'500'000'000ULL);
  CHECK(hw.nics_per_node == 2);
  CHECK(hw.nic.bw_bytes_per_s == 25'000'000'000ULL);
}

TEST_CASE("dgx-h100-80gb and h200-sxm-141gb: Hopper, NVLink4, NDR") {
  const HardwareSpec h100 = builtin_hardware_profile("dgx-h100-80gb");
  CHECK(h100.peak_flops_per_s == 989'500'000'000'000ULL);  // 1979 TFLOPS sparse / 2
  CHECK(h100.hbm_bw_bytes_per_s == 3'350'000'000'000ULL);  // 3.35 TB/s
  CHECK(h100.memory_bytes == 81'559 * kMiB);
  CHECK(h100.nvlink.bw_bytes_per_s == 450'000'000'000ULL);  // 18 links x 25 GB/s
  CHECK(h100.pcie.bw_bytes_per_s == 63'000'000'000ULL);     // gen5 x16
  CHECK(h100.nic.bw_bytes_per_s == 50'000'000'000ULL);      // NDR 400 Gb/s / 8
  CHECK(h100.nics_per_node == 8);

  const HardwareSpec h200 = builtin_hardware_profile("h200-sxm-141gb");
  CHECK(h200.peak_flops_per_s == 989'500'000'000'000ULL);
  CHECK(h200.hbm_bw_bytes_per_s == 4'800'000'000'000ULL);  // 4.8 TB/s
  CHECK(h200.memory_bytes == 143'771 * kMiB);
  CHECK(h200.nvlink.bw_bytes_per_s == 450'000'000'000ULL);
  CHECK(h200.nic.bw_bytes_per_s == 50'000'000'000ULL);
  CHECK(h200.nics_per_node == 8);
  CHECK(h200.intra_node == IntraNode::kNvSwitch);
}

TEST_CASE("unknown built-in profile lists the known ones") {
  CHECK(error_of([] { builtin_hardware_profile("h300"); }) ==
        "unknown hardware profile 'h300' (built-in profiles: dgx-a100-80gb, a100-pcie-40gb, "
        "dgx-h100-80gb, h200-sxm-141gb, h200-sxm-141gb-calibrated, dgx-a100-80gb-vtrain-fit)");
}

TEST_CASE("profile file errors") {
  const std::string base = hardware_profile_to_yaml(builtin_hardware_profile("dgx-a100-80gb"));
  // A profile that omits a required number: reported at its section.
  CHECK(error_of([] {
          load_hardware_profile_text("name: p\ngpu:\n  hbm_bw: 1TB/s\n", "p.yaml");
        }) == "p.yaml:2:1: key 'gpu.peak': not set; a hardware profile must give it (> 0)");
  CHECK(error_of([] { load_hardware_profile_text("", "empty.yaml"); }) ==
        "empty.yaml:1:1: key 'gpu.peak': not set; a hardware profile must give it (> 0)");
  CHECK(error_of([] { load_hardware_profile_text("gpu:\n  peek: 1TFLOPS\n", "p.yaml"); }) ==
        "p.yaml:2:3: unknown key 'gpu.peek'; did you mean 'gpu.peak'?");
  // Scenario-only keys are not profile keys.
  CHECK(error_of([] { load_hardware_profile_text("nodes: 4\n", "p.yaml"); }) ==
        "p.yaml:1:1: unknown key 'nodes'; did you mean 'node'?");
  CHECK(error_of([] { load_hardware_profile_file("/nonexistent/p.yaml"); }) ==
        "/nonexistent/p.yaml: cannot open the hardware profile: no such file");
  // A PCIe node whose GPUs do not split over its switches.
  const std::string pcie = hardware_profile_to_yaml(builtin_hardware_profile("a100-pcie-40gb"));
  CHECK_NOTHROW(load_hardware_profile_text(pcie, "ok.yaml"));
  const std::string uneven = pcie + "";
  YAML::Node node = YAML::Load(uneven);
  node["gpus_per_node"] = 7;
  YAML::Emitter out;
  out << node;
  const std::string message = error_of([&] { load_hardware_profile_text(out.c_str(), "u.yaml"); });
  CHECK(message.find(": key 'node.gpus_per_pcie_switch': 7 GPUs per node do not split evenly over "
                     "switches of 2 GPUs") != std::string::npos);
  CHECK(message.rfind("u.yaml:", 0) == 0);
  // The name defaults to the file name.
  YAML::Node unnamed = YAML::Load(base);
  unnamed.remove("name");
  YAML::Emitter unnamed_out;
  unnamed_out << unnamed;
  CHECK(load_hardware_profile_text(unnamed_out.c_str(), "dir/site-a.yaml").profile == "site-a");
}
