// Built-in hardware profiles: each loads, says what the brief and datasheets say, gives every
// field explicitly, and is embedded (matches hw_models/profiles/ on disk); profile-file errors.
#include "tests/error_of.hpp"
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
                                          "dgx-a100-80gb-vtrain-fit", "hgx-b200-180gb", "gb200-nvl72"});
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
  const std::vector<FieldDesc>& table = scenario_field_table();
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
      if (!field.in_profile() || field.selects_profile) continue;  // a shipped profile has no base
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

TEST_CASE("gb200-nvl72: trays of 4 GPUs in one 72-GPU NVLink domain, which must be whole NVSwitch nodes") {
  const HardwareSpec nvl72 = builtin_hardware_profile("gb200-nvl72");
  CHECK(nvl72.gpus_per_node == 4);
  CHECK(nvl72.domain_gpus() == 72);
  CHECK(nvl72.nics_per_node == 4);
  CHECK(builtin_hardware_profile("hgx-b200-180gb").domain_gpus() == 8);  // omitted: one node
  const std::string scenario =
      "model:\n  preset: gpt-1.3b\nhardware:\n  profile: gb200-nvl72\n  nodes: 18\n";
  CHECK(read_scenario_text(scenario, "s.yaml").scenario.hardware.nvlink_domain_gpus == 72);
  CHECK(error_of([&] { read_scenario_text(scenario, "s.yaml", {"hardware.gpus_per_node=5"}); }) ==
        "s.yaml:3:1: key 'hardware.node.nvlink_domain_gpus': 72 GPUs are not a whole number of nodes of 5 GPUs "
        "(gpus_per_node)");
  CHECK(error_of([&] { read_scenario_text(scenario, "s.yaml", {"hardware.node.intra=pcie"}); })
            .find("key 'hardware.node.nvlink_domain_gpus': an NVLink domain needs node.intra nvswitch") !=
        std::string::npos);
  CHECK_NOTHROW(read_scenario_text(scenario, "s.yaml", {"hardware.gpus_per_node=8"}));
}

TEST_CASE("unknown built-in profile lists the known ones") {
  CHECK(error_of([] { builtin_hardware_profile("h300"); }) ==
        "unknown hardware profile 'h300' (built-in profiles: dgx-a100-80gb, a100-pcie-40gb, "
        "dgx-h100-80gb, h200-sxm-141gb, h200-sxm-141gb-calibrated, dgx-a100-80gb-vtrain-fit, hgx-b200-180gb, gb200-nvl72)");
}

TEST_CASE("profile file errors") {
  const std::string base = hardware_profile_to_yaml(builtin_hardware_profile("dgx-a100-80gb"));
  // A profile without base that omits fields: all of them in one message naming the file.
  const std::string partial =
      error_of([] { load_hardware_profile_text("name: p\ngpu:\n  hbm_bw: 1TB/s\n", "p.yaml"); });
  CHECK(partial.rfind("p.yaml:1:1: hardware profile lacks 26 of its 27 fields: source, gpu.name, "
                      "gpu.peak, gpu.memory, ",
                      0) == 0);
  CHECK(partial.find("gpu.hbm_bw") == std::string::npos);
  CHECK(partial.find(", collective_efficiency; give them, or start from a built-in profile with "
                     "'base: NAME' and give only what differs (built-in profiles: "
                     "dgx-a100-80gb, ") != std::string::npos);
  CHECK(error_of([] { load_hardware_profile_text("", "empty.yaml"); })
            .rfind("empty.yaml:1:1: hardware profile lacks 27 of its 27 fields: source, ", 0) == 0);
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

TEST_CASE("a profile that leaves out a field gets no perfect-GPU default") {
  // Before: a missing gpu.contention, gpu.kernel_launch or efficiency silently became 0 / 0 /
  // 1.0. Now every missing field is named, all at once.
  YAML::Node node = YAML::Load(hardware_profile_to_yaml(builtin_hardware_profile("dgx-a100-80gb")));
  node["gpu"].remove("contention");
  node["gpu"].remove("kernel_launch");
  node["gpu"]["gemm_efficiency"].remove("max");
  YAML::Emitter out;
  out << node;
  const std::string message = error_of([&] { load_hardware_profile_text(out.c_str(), "site.yaml"); });
  CHECK(message.rfind("site.yaml:1:1: hardware profile lacks 3 of its 27 fields: gpu.kernel_launch, "
                      "gpu.gemm_efficiency.max, gpu.contention; give them, or start from",
                      0) == 0);
}

TEST_CASE("a profile with base inherits every field it does not give") {
  const HardwareSpec a100 = builtin_hardware_profile("dgx-a100-80gb");
  const HardwareSpec site = load_hardware_profile_text(
      "base: dgx-a100-80gb\ngpu:\n  memory: 40GiB\n  contention: 0.3\n", "hw/site-a.yaml");
  CHECK(site.profile == "site-a");
  CHECK(site.memory_bytes == 40 * kGiB);
  CHECK(site.contention_factor == 0.3);
  // Everything else is the base's: put the two overrides back and compare the whole profile.
  HardwareSpec back = site;
  back.memory_bytes = a100.memory_bytes;
  back.contention_factor = a100.contention_factor;
  back.profile = a100.profile;
  back.source = a100.source;
  CHECK(hardware_profile_to_yaml(back) == hardware_profile_to_yaml(a100));
  // Without its own source, it says what it took from where.
  CHECK(site.source == "base profile dgx-a100-80gb with gpu.memory, gpu.contention from site-a; "
                       "the base's source: " + a100.source);
  // Its own source and name win.
  const HardwareSpec named = load_hardware_profile_text(
      "base: a100-pcie-40gb\nname: lab\nsource: our measurements\n", "x.yaml");
  CHECK(named.profile == "lab");
  CHECK(named.source == "our measurements");
  CHECK(named.intra_node == IntraNode::kPcie);
  // A written profile is complete and names no base; it loads back to the same profile.
  const std::string yaml = hardware_profile_to_yaml(site);
  CHECK(yaml.find("\nbase:") == std::string::npos);  // (nccl.*.base is a protocol latency)
  CHECK(hardware_profile_to_yaml(load_hardware_profile_text(yaml, "site-a.yaml")) == yaml);
  // The checks still apply to the merged profile, at the override's position.
  CHECK(error_of([] {
          load_hardware_profile_text("base: dgx-a100-80gb\ngpu:\n  reserve: 90GiB\n", "r.yaml");
        }) == "r.yaml:3:12: key 'gpu.reserve': the reserve (96636764160 bytes) must be smaller "
              "than gpu.memory (85899345920 bytes)");
  // An unknown base names the known ones, at the key's position.
  CHECK(error_of([] { load_hardware_profile_text("gpu:\n  memory: 1GiB\nbase: dgx-a100\n", "b.yaml"); })
            .rfind("b.yaml:3:7: key 'base': unknown hardware profile 'dgx-a100' (built-in profiles: "
                   "dgx-a100-80gb, ",
                   0) == 0);
  // base is a profile-file key, not a scenario key.
  CHECK(error_of([] { read_scenario_text("hardware:\n  profile: dgx-a100-80gb\n  base: x\n", "s.yaml"); })
            .rfind("s.yaml:3:3: unknown key 'hardware.base'", 0) == 0);
}

TEST_CASE("a scenario's profile_file may be a short profile with base") {
  const std::string dir = std::string(LYNXSIM_BINARY_DIR) + "/test-profile-base";
  std::filesystem::create_directories(dir);
  const std::string profile = dir + "/small.yaml";
  {
    std::ofstream(profile) << "base: dgx-h100-80gb\nnode:\n  nic:\n    bw: 100Gb/s\n";
  }
  const Scenario s = read_scenario_text("hardware:\n  profile_file: small.yaml\n  nodes: 2\n",
                                        dir + "/s.yaml").scenario;
  CHECK(s.hardware.profile == "small");
  CHECK(s.hardware.nic.bw_bytes_per_s == 12'500'000'000ULL);
  CHECK(s.hardware.peak_flops_per_s == builtin_hardware_profile("dgx-h100-80gb").peak_flops_per_s);
}

TEST_CASE("a scenario that gives every hardware field needs no profile (plans run alone)") {
  const std::string dir = std::string(LYNXSIM_BINARY_DIR) + "/test-profile-complete";
  std::filesystem::create_directories(dir);
  const std::string profile = dir + "/lab.yaml";
  { std::ofstream(profile) << "base: dgx-a100-80gb\ngpu:\n  memory: 40GiB\n"; }
  const Scenario made = read_scenario_text("hardware:\n  profile_file: lab.yaml\n", dir + "/s.yaml").scenario;
  const std::string written = scenario_to_yaml(made);
  std::filesystem::remove(profile);
  // The resolved scenario (as a plan file embeds it) still reads, without its profile file.
  const Scenario again = read_scenario_text(written, "plan.yaml").scenario;
  CHECK(scenario_to_yaml(again) == written);
  CHECK(again.hardware.memory_bytes == 40ull << 30);
  // One hardware field fewer, and the missing profile file is needed again.
  const std::string partial = written.substr(0, written.find("    reserve:")) +
                              written.substr(written.find('\n', written.find("    reserve:")) + 1);
  CHECK(error_of([&] { read_scenario_text(partial, "plan.yaml"); }).find("cannot open the hardware profile") !=
        std::string::npos);
}
