// Scenario loader: values, defaults, --set overrides, round trip, and every error path with its
// exact message (file:line:col, 1-based, and the full key path).
#include "tests/error_of.hpp"
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scenarios/fields.hpp"
#include "scenarios/scenario_loader.hpp"

using namespace lynx;

namespace {

using lynx::test::error_of;

/// The message of loading `yaml` (labelled "t.yaml") with `overrides`.
std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { read_scenario_text(yaml, "t.yaml", overrides); });
}

const std::string kHeader = "hardware:\n  profile: dgx-a100-80gb\n";  // lines 1-2

/// A scratch folder under the system temp dir, removed at the end of the test.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("lynxsim-test-scenarios-" + name)) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path file = path / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
};

}  // namespace

TEST_CASE("a minimal scenario gets the documented defaults") {
  const Scenario s = read_scenario_text(kHeader, "dir/my-run.yaml").scenario;
  CHECK(s.name == "my-run");  // the file name without .yaml
  CHECK(s.source_file == "dir/my-run.yaml");
  CHECK(s.model.preset.empty());
  CHECK(s.model.layers == 0);
  CHECK(s.model.seq_len == 2048);
  CHECK(s.model.vocab == 0);  // the preset's, else 51200 (resolve_model)
  CHECK(s.model.kv_heads == 0);
  CHECK(s.model.mlp == MlpKind::kDefault);
  CHECK(s.parallel.tp == 1);
  CHECK(s.parallel.schedule == ScheduleKind::kOneFOneB);
  CHECK(s.parallel.dp_bucket_bytes == 40'000'000);
  CHECK(s.recompute.strategy == RecomputeKind::kNone);
  CHECK(s.recompute.partition == PartitionKind::kUniform);
  CHECK(s.hardware.profile == "dgx-a100-80gb");
  CHECK(s.hardware.profile_file.empty());
  CHECK(s.hardware.nodes == 1);
}

TEST_CASE("every field kind is read into the struct") {
  const std::string yaml = R"(name: custom
model:
  preset: gpt-22b
  layers: 12
  hidden: 1024
  heads: 16
  ffn_hidden: 4096
  seq_len: 4096
  vocab: 32000
  flash_attention: true
parallel:
  tp: 2
  pp: 4
  dp: 2
  sequence_parallel: true
  micro_batch: 2
  global_batch: 64
  schedule: interleaved
  virtual_stages: 3
  distributed_optimizer: true
  dp_overlap: end
  dp_bucket: 25MiB
hardware:
  profile: dgx-h100-80gb
  nodes: 2
  source: my notes
  gpu:
    memory: 40GiB
    reserve: 1.5GiB
    kernel_launch: 3us
    gemm_efficiency: {max: 75%, half_flops: 2.5e9}
    memory_bound_efficiency: {half_bytes: 2MiB}
    contention: 0.2
  node:
    nic: {bw: 200Gb/s, latency: 2.5us}
  collective_efficiency: 0.9
recompute:
  strategy: full
  method: block
  num_layers: 2
  partition: balanced
  solver_nodes: 2500
sim:
  exploit_symmetry: false
)";
  const Scenario s = read_scenario_text(yaml, "x.yaml").scenario;
  CHECK(s.name == "custom");
  CHECK(s.model.preset == "gpt-22b");
  CHECK(s.model.layers == 12);
  CHECK(s.model.hidden == 1024);
  CHECK(s.model.heads == 16);
  CHECK(s.model.ffn_hidden == 4096);
  CHECK(s.model.seq_len == 4096);
  CHECK(s.model.vocab == 32000);
  CHECK(s.model.flash_attention);
  CHECK(s.parallel.tp == 2);
  CHECK(s.parallel.pp == 4);
  CHECK(s.parallel.dp == 2);
  CHECK(s.parallel.sequence_parallel);
  CHECK(s.parallel.micro_batch == 2);
  CHECK(s.parallel.global_batch == 64);
  CHECK(s.parallel.schedule == ScheduleKind::kInterleaved);
  CHECK(s.parallel.virtual_stages == 3);
  CHECK(s.parallel.distributed_optimizer);
  CHECK(s.parallel.dp_overlap == DpOverlap::kEnd);
  CHECK(s.parallel.dp_bucket_bytes == 26'214'400);  // 25 * 2^20
  CHECK(s.hardware.profile == "dgx-h100-80gb");
  CHECK(s.hardware.nodes == 2);
  CHECK(s.hardware.source == "my notes");
  CHECK(s.hardware.memory_bytes == 42'949'672'960ULL);         // 40 * 2^30
  CHECK(s.hardware.memory_reserve_bytes == 1'610'612'736ULL);  // 1.5 * 2^30
  CHECK(s.hardware.kernel_launch_ps == 3'000'000);
  CHECK(s.hardware.gemm.max == 0.75);
  CHECK(s.hardware.gemm.half_work == 2.5e9);
  CHECK(s.hardware.memory_bound.half_work == 2'097'152.0);  // 2 * 2^20
  CHECK(s.hardware.contention_factor == 0.2);
  CHECK(s.hardware.nic.bw_bytes_per_s == 25'000'000'000ULL);  // 200e9 / 8
  CHECK(s.hardware.nic.latency_ps == 2'500'000);
  CHECK(s.hardware.collective_efficiency == 0.9);
  // Not overridden: the profile's values (dgx-h100-80gb: 989.5 TFLOPS, NVLink 450 GB/s).
  CHECK(s.hardware.peak_flops_per_s == 989'500'000'000'000ULL);
  CHECK(s.hardware.nvlink.bw_bytes_per_s == 450'000'000'000ULL);
  CHECK(s.recompute.strategy == RecomputeKind::kFull);
  CHECK(s.recompute.method == FullMethod::kBlock);
  CHECK(s.recompute.num_layers == 2);
  CHECK_FALSE(s.sim.exploit_symmetry);
  CHECK(s.recompute.partition == PartitionKind::kBalanced);
  CHECK(s.recompute.solver_node_limit == 2500);
}

TEST_CASE("the default scenario is scenarios/examples/default.yaml") {
  const Scenario s = read_default_scenario().scenario;
  CHECK(s.name == "default");
  CHECK(s.source_file == "<built-in>");
  CHECK(s.model.preset == "gpt-1.3b");
  CHECK(s.model.layers == 0);  // from the preset, resolved by the model component
  CHECK(s.parallel.tp == 2);
  CHECK(s.parallel.pp == 2);
  CHECK(s.parallel.dp == 2);
  CHECK(s.parallel.micro_batch == 2);
  CHECK(s.parallel.global_batch == 32);
  CHECK(s.parallel.schedule == ScheduleKind::kOneFOneB);
  CHECK(s.recompute.strategy == RecomputeKind::kNone);
  CHECK(s.hardware.profile == "dgx-a100-80gb");
  CHECK(s.hardware.nodes == 1);
  CHECK(s.hardware.gpus_per_node == 8);
  const Scenario from_file =
      read_scenario_file(std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/examples/default.yaml").scenario;
  CHECK(scenario_to_yaml(s) == scenario_to_yaml(from_file));

  const Scenario changed = read_default_scenario({"parallel.tp=4", "parallel.dp=1"}).scenario;
  CHECK(changed.parallel.tp == 4);
  CHECK(changed.parallel.dp == 1);
}

TEST_CASE("recompute.strategy spellings come from kRecomputeKindNames, one per RecomputeKind") {
  // The spellings scenario and plan files use; the field table and to_string derive from the list.
  const std::vector<std::pair<std::string, RecomputeKind>> expected = {
      {"none", RecomputeKind::kNone},          {"full", RecomputeKind::kFull},
      {"selective", RecomputeKind::kSelective}, {"checkmate", RecomputeKind::kCheckmate},
      {"lynx-heu", RecomputeKind::kLynxHeu},   {"lynx-opt", RecomputeKind::kLynxOpt}};
  REQUIRE(kRecomputeKindNames.size() == expected.size());
  for (const auto& [name, kind] : expected) {
    CAPTURE(name);
    CHECK(std::string(recompute_kind_name(kind)) == name);
    const Scenario s = read_scenario_text(kHeader, "t.yaml", {"recompute.strategy=" + name}).scenario;
    CHECK(s.recompute.strategy == kind);
  }
}

TEST_CASE("--set overrides change values, after the file and before the checks") {
  const std::string yaml = kHeader + "parallel:\n  tp: 2\n  pp: 2\n  dp: 2\n";
  const Scenario s = read_scenario_text(
      yaml, "t.yaml",
      {"parallel.tp=4", "model.layers=48", "hardware.node.nic.bw=25GB/s", "parallel.schedule=gpipe",
       "model.preset=gpt-175b", " hardware.gpu.memory = 40GiB", "recompute.strategy=lynx-opt",
       "parallel.dp=1"}).scenario;
  CHECK(s.parallel.tp == 4);
  CHECK(s.parallel.pp == 2);
  CHECK(s.parallel.dp == 1);
  CHECK(s.model.layers == 48);
  CHECK(s.model.preset == "gpt-175b");
  CHECK(s.hardware.nic.bw_bytes_per_s == 25'000'000'000ULL);
  CHECK(s.hardware.memory_bytes == 42'949'672'960ULL);
  CHECK(s.parallel.schedule == ScheduleKind::kGpipe);
  CHECK(s.recompute.strategy == RecomputeKind::kLynxOpt);

  // The profile itself can be overridden; fields given in the file still apply on top of it.
  const Scenario h = read_scenario_text(kHeader + "  gpu: {reserve: 5GiB}\n", "t.yaml",
                                        {"hardware.profile=h200-sxm-141gb"}).scenario;
  CHECK(h.hardware.profile == "h200-sxm-141gb");
  CHECK(h.hardware.hbm_bw_bytes_per_s == 4'800'000'000'000ULL);
  CHECK(h.hardware.memory_reserve_bytes == 5'368'709'120ULL);  // 5 * 2^30

  // Later overrides win.
  const Scenario last = read_scenario_text(kHeader + "parallel: {tp: 16}\n", "t.yaml",
                                           {"parallel.tp=2", "parallel.tp=8"}).scenario;
  CHECK(last.parallel.tp == 8);
}

TEST_CASE("malformed YAML reports file:line:col") {
  // Line 3 "  tp: 2: 3": the second ':' at column 8 is an illegal map value.
  CHECK(load_error("name: x\nparallel:\n  tp: 2: 3\n") ==
        "t.yaml:3:8: malformed YAML: illegal map value");
  // A list item on line 2 inside the top-level map.
  CHECK(load_error("name: x\n- item\n") == "t.yaml:2:1: malformed YAML: end of map not found");
  CHECK(load_error("- a\n- b\n") == "t.yaml:1:1: expected a map of keys at the top, got a list");
}

TEST_CASE("the renamed host key gpu.host_op is refused, naming gpu.host_kernel") {
  // Its meaning changed (per op task -> per launched kernel): an old file must not run on.
  CHECK(load_error(kHeader + "  gpu:\n    host_op: 5us\n") ==
        "t.yaml:4:5: unknown key 'hardware.gpu.host_op'; it was renamed 'hardware.gpu.host_kernel' and is now the host "
        "time per launched CUDA kernel, not per op (an op costs its kernel count times it: docs/host.md)");
  // A key merely ending in the same letters is an ordinary unknown key.
  CHECK(load_error(kHeader + "  gpu:\n    xhost_op: 5us\n").find("renamed") == std::string::npos);
}

TEST_CASE("unknown keys, with a suggestion when one is close") {
  CHECK(load_error(kHeader + "model:\n  preset: gpt-1.3b\n  layer: 3\n") ==
        "t.yaml:5:3: unknown key 'model.layer'; did you mean 'model.layers'?");
  CHECK(load_error(kHeader + "paralel:\n  tp: 2\n") ==
        "t.yaml:3:1: unknown key 'paralel'; did you mean 'parallel'?");
  CHECK(load_error(kHeader + "  gpu:\n    memroy: 40GiB\n") ==
        "t.yaml:4:5: unknown key 'hardware.gpu.memroy'; did you mean 'hardware.gpu.memory'?");
  // A field under the wrong section: suggested by its last words.
  CHECK(load_error(kHeader + "parallel:\n  layers: 3\n") ==
        "t.yaml:4:3: unknown key 'parallel.layers'; did you mean 'model.layers'?");
  // ('hardware.nic' would now suggest the top-level 'hardware.nccl', as close by spelling.)
  CHECK(load_error(kHeader + "  pcie_host:\n    bw: 25GB/s\n") ==
        "t.yaml:3:3: unknown key 'hardware.pcie_host'; did you mean 'hardware.node.pcie_host'?");
  // Nothing close: no suggestion.
  CHECK(load_error(kHeader + "model:\n  colour: blue\n") ==
        "t.yaml:4:3: unknown key 'model.colour'");
  // Profile-only keys are not scenario keys.
  CHECK(load_error(kHeader + "  name: mine\n") ==
        "t.yaml:3:3: unknown key 'hardware.name'; did you mean 'hardware.node'?");
  CHECK(load_error(kHeader + "parallel:\n  tp: 2\n  tp: 4\n") ==
        "t.yaml:5:3: key 'parallel.tp': given twice");
}

TEST_CASE("wrong types") {
  // "  tp: two": the value starts at column 7.
  CHECK(load_error(kHeader + "parallel:\n  tp: two\n") ==
        "t.yaml:4:7: key 'parallel.tp': expected an integer, got 'two'");
  CHECK(load_error(kHeader + "parallel:\n  tp: {a: 1}\n") ==
        "t.yaml:4:3: key 'parallel.tp': expected a single value, got a map");
  CHECK(load_error(kHeader + "parallel:\n  tp: [1, 2]\n") ==
        "t.yaml:4:3: key 'parallel.tp': expected a single value, got a list");
  CHECK(load_error(kHeader + "parallel: 4\n") ==
        "t.yaml:3:1: key 'parallel': expected a section of keys (a map), got '4'");
  CHECK(load_error(kHeader + "model:\n  flash_attention: maybe\n") ==
        "t.yaml:4:20: key 'model.flash_attention': expected true or false, got 'maybe'");
  CHECK(load_error(kHeader + "parallel:\n  tp:\n") ==
        "t.yaml:4:3: key 'parallel.tp': no value given");
  CHECK(load_error(kHeader + "hardware:\n  nodes: 2\n") ==
        "t.yaml:3:1: key 'hardware': given twice");
}

TEST_CASE("bad units, zero and negative quantities") {
  // "      bw: 200GB": the value starts at column 11.
  CHECK(load_error(kHeader + "  node:\n    nic:\n      bw: 200GB\n") ==
        "t.yaml:5:11: key 'hardware.node.nic.bw': expected a bandwidth like '600GB/s', got '200GB' "
        "(units: B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s; bits: Mb/s, Gb/s, Tb/s)");
  CHECK(load_error(kHeader + "  gpu:\n    memory: 0GiB\n") ==
        "t.yaml:4:13: key 'hardware.gpu.memory': expected a positive size, got '0GiB'");
  CHECK(load_error(kHeader + "  gpu:\n    memory: -40GiB\n") ==
        "t.yaml:4:13: key 'hardware.gpu.memory': expected a non-negative size, got '-40GiB'");
  CHECK(load_error(kHeader + "parallel:\n  dp_bucket: 40000000\n") ==
        "t.yaml:4:14: key 'parallel.dp_bucket': expected a size like '80GiB' (a unit is required), "
        "got '40000000' (units: B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)");
  CHECK(load_error(kHeader + "parallel:\n  tp: 0\n") ==
        "t.yaml:4:7: key 'parallel.tp': must be between 1 and 1024, got 0");
  CHECK(load_error(kHeader + "model:\n  layers: -2\n") ==
        "t.yaml:4:11: key 'model.layers': must be between 0 and 4096, got -2");
  CHECK(load_error(kHeader + "model:\n  hidden: 131073\n") ==
        "t.yaml:4:11: key 'model.hidden': must be between 0 and 131072, got 131073");
  CHECK(load_error(kHeader + "  gpu:\n    kernel_launch: 12 parsecs\n") ==
        "t.yaml:4:20: key 'hardware.gpu.kernel_launch': expected a time like '1.5us', got "
        "'12 parsecs' (units: ps, ns, us, ms, s)");
  CHECK(load_error(kHeader + "  gpu:\n    gemm_efficiency: {max: 0}\n") ==
        "t.yaml:4:28: key 'hardware.gpu.gemm_efficiency.max': must be > 0, got '0'");
}

TEST_CASE("gpu.host_gemm: a negative or unitless value is refused with file, line and key") {
  CHECK(load_error(kHeader + "  gpu:\n    host_gemm: -5us\n") ==
        "t.yaml:4:16: key 'hardware.gpu.host_gemm': expected a non-negative time, got '-5us'");
  CHECK(load_error(kHeader + "  gpu:\n    host_gemm: 20\n") ==
        "t.yaml:4:16: key 'hardware.gpu.host_gemm': expected a time like '1.5us' (a unit is required), got '20' (units: ps, ns, us, ms, s)");
}

TEST_CASE("bad enum values list the allowed ones") {
  CHECK(load_error(kHeader + "parallel:\n  schedule: zb-v\n") ==
        "t.yaml:4:13: key 'parallel.schedule': 'zb-v' is not one of: gpipe, 1f1b, interleaved, zb-h1");
  CHECK(load_error(kHeader + "recompute:\n  strategy: lynx\n") ==
        "t.yaml:4:13: key 'recompute.strategy': 'lynx' is not one of: none, full, selective, "
        "checkmate, lynx-heu, lynx-opt");
  CHECK(load_error(kHeader + "  node: {intra: infiniband}\n") ==
        "t.yaml:3:17: key 'hardware.node.intra': 'infiniband' is not one of: nvswitch, pcie");
}

TEST_CASE("hardware profile selection errors") {
  CHECK(load_error("hardware:\n  profile: dgx-a100\n") ==
        "t.yaml:2:12: key 'hardware.profile': unknown hardware profile 'dgx-a100' (built-in "
        "profiles: dgx-a100-80gb, a100-pcie-40gb, dgx-h100-80gb, h200-sxm-141gb, h200-sxm-141gb-calibrated, dgx-a100-80gb-vtrain-fit, hgx-b200-180gb, gb200-nvl72); did you mean "
        "'dgx-a100-80gb'?");
  CHECK(load_error("name: x\n") ==
        "t.yaml:1:1: key 'hardware.profile': no hardware given; set hardware.profile to a "
        "built-in profile (dgx-a100-80gb, a100-pcie-40gb, dgx-h100-80gb, h200-sxm-141gb, h200-sxm-141gb-calibrated, dgx-a100-80gb-vtrain-fit, hgx-b200-180gb, gb200-nvl72) or "
        "hardware.profile_file to a profile file");
  CHECK(load_error("name: x\nhardware:\n  nodes: 2\n") ==
        "t.yaml:2:1: key 'hardware.profile': no hardware given; set hardware.profile to a "
        "built-in profile (dgx-a100-80gb, a100-pcie-40gb, dgx-h100-80gb, h200-sxm-141gb, h200-sxm-141gb-calibrated, dgx-a100-80gb-vtrain-fit, hgx-b200-180gb, gb200-nvl72) or "
        "hardware.profile_file to a profile file");
  CHECK(load_error(kHeader + "  profile_file: mine.yaml\n") ==
        "t.yaml:3:17: key 'hardware.profile_file': give either hardware.profile or "
        "hardware.profile_file, not both");
  const std::string missing = load_error("hardware:\n  profile_file: no/such/profile.yaml\n");
  CHECK(missing.rfind("t.yaml:2:17: key 'hardware.profile_file': /", 0) == 0);
  CHECK(missing.find("no/such/profile.yaml: cannot open the hardware profile") !=
        std::string::npos);
}

TEST_CASE("--set errors name the override") {
  CHECK(load_error(kHeader, {"model.layer=3"}) ==
        "t.yaml: --set model.layer=3: unknown key 'model.layer'; did you mean 'model.layers'?");
  CHECK(load_error(kHeader, {"hardware.nic.bw=25GB/s"}) ==
        "t.yaml: --set hardware.nic.bw=25GB/s: unknown key 'hardware.nic.bw'; did you mean "
        "'hardware.node.nic.bw'?");
  CHECK(load_error(kHeader, {"parallel.tp=x"}) ==
        "t.yaml: --set parallel.tp=x: key 'parallel.tp': expected an integer, got 'x'");
  CHECK(load_error(kHeader, {"hardware.node.nic.bw=25GB"})
            .rfind("t.yaml: --set hardware.node.nic.bw=25GB: key 'hardware.node.nic.bw': expected "
                   "a bandwidth like '600GB/s', got '25GB'",
                   0) == 0);
  CHECK(load_error(kHeader, {"parallel.tp"}) ==
        "t.yaml: --set parallel.tp: expected key.path=value");
  CHECK(load_error(kHeader, {"model=3"}) ==
        "t.yaml: --set model=3: key 'model' is a section; set one of its fields, e.g. "
        "'model.bias_dropout_fusion'");
  CHECK(load_error(kHeader, {"parallel.tp=[1, 2]"}) ==
        "t.yaml: --set parallel.tp=[1, 2]: key 'parallel.tp': expected a single value, got a list");
  CHECK(load_error(kHeader, {"hardware.profile=tpu-v5"})
            .rfind("t.yaml: --set hardware.profile=tpu-v5: key 'hardware.profile': unknown "
                   "hardware profile 'tpu-v5'",
                   0) == 0);
}

// The layout checks (batch, GPU count, schedule, model shape) run when the scenario is resolved:
// tests/model/test_resolved_scenario.cpp.
TEST_CASE("hardware checks, after the overrides") {
  // A hardware override that breaks the profile's consistency: reserve >= memory.
  CHECK(load_error(kHeader + "  gpu:\n    reserve: 80GiB\n") ==
        "t.yaml:4:14: key 'hardware.gpu.reserve': the reserve (85899345920 bytes) must be "
        "smaller than gpu.memory (85899345920 bytes)");
  CHECK(load_error(kHeader + "  node:\n    nvlink: {bw: 0GB/s}\n") ==
        "t.yaml:4:18: key 'hardware.node.nvlink.bw': must be > 0 when node.intra is nvswitch");
}

TEST_CASE("errors never crash and are one line starting with the file") {
  // Every prefix of a valid scenario, and some garbage: each loads or throws lynx::Error.
  const std::string valid = R"(name: n
model: {preset: gpt-1.3b, seq_len: 1024}
parallel:
  tp: 2
  pp: 2
  dp: 2
  micro_batch: 2
  global_batch: 32
hardware:
  profile: dgx-a100-80gb
  gpu:
    memory: 40GiB
recompute: {strategy: selective}
)";
  std::vector<std::string> inputs;
  for (std::size_t n = 0; n <= valid.size(); ++n) inputs.push_back(valid.substr(0, n));
  for (const char* junk : {"\t", "{", "]", "&a *a", "!!binary x", "? [a]\n: b", "\"\\x\"",
                           "hardware: {profile: [x]}", "a: &x\n  b: *x\n", "%YAML 9.9\n---\n"}) {
    inputs.emplace_back(junk);
  }
  int loaded = 0;
  for (const std::string& input : inputs) {
    CAPTURE(input);
    try {
      read_scenario_text(input, "fuzz.yaml");
      ++loaded;
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK(message.rfind("fuzz.yaml", 0) == 0);
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  CHECK(loaded >= 1);  // at least the whole text loads
}

TEST_CASE("round trip: scenario_to_yaml then load gives the same YAML") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(LYNXSIM_SOURCE_DIR) +
                                                               "/scenarios/examples")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  REQUIRE(files.size() >= 5);
  for (const std::string& file : files) {
    CAPTURE(file);
    const std::string first = scenario_to_yaml(read_scenario_file(file).scenario);
    const std::string second = scenario_to_yaml(read_scenario_text(first, "again.yaml").scenario);
    CHECK(first == second);
  }
  // Changed values survive too (units that are not the profile's spelling).
  const Scenario changed =
      read_default_scenario({"hardware.gpu.kernel_launch=1.25us", "hardware.node.nic.bw=12b/s",
                        "hardware.gpu.memory_bound_efficiency.half_bytes=1536B",
                        "hardware.gpu.gemm_efficiency.max=0.1", "model.preset="}).scenario;
  const std::string yaml = scenario_to_yaml(changed);
  const Scenario back = read_scenario_text(yaml, "back.yaml").scenario;
  CHECK(back.hardware.kernel_launch_ps == 1'250'000);
  CHECK(back.hardware.nic.bw_bytes_per_s == 2);  // 12 bit/s = 1.5 B/s, rounded up to 2
  CHECK(back.hardware.memory_bound.half_work == 1536.0);
  CHECK(back.hardware.gemm.max == 0.1);
  CHECK(back.model.preset.empty());
  CHECK(scenario_to_yaml(back) == yaml);
}

TEST_CASE("profile_file: relative to the scenario file, and round trip") {
  const ScratchDir dir("profile-file");
  HardwareSpec mine = builtin_hardware_profile("dgx-h100-80gb");
  mine.profile = "my-cluster";
  mine.nic.bw_bytes_per_s = 12'500'000'000ULL;  // 100 Gb/s
  const std::string profile_path = dir.write("hw/my-cluster.yaml", hardware_profile_to_yaml(mine));
  const std::string scenario_path =
      dir.write("runs/s.yaml", "hardware:\n  profile_file: ../hw/my-cluster.yaml\n  nodes: 2\n");
  const Scenario s = read_scenario_file(scenario_path).scenario;
  CHECK(s.hardware.profile == "my-cluster");
  CHECK(s.hardware.profile_file ==
        std::filesystem::absolute(profile_path).lexically_normal().string());
  CHECK(s.hardware.nic.bw_bytes_per_s == 12'500'000'000ULL);
  CHECK(s.hardware.nodes == 2);
  const std::string yaml = scenario_to_yaml(s);
  CHECK(yaml.find("profile_file: ") != std::string::npos);
  CHECK(yaml.find("  profile: ") == std::string::npos);
  CHECK(scenario_to_yaml(read_scenario_text(yaml, dir.write("elsewhere/s2.yaml", yaml)).scenario) == yaml);

  // Errors inside the profile file are reported at the profile file's own position.
  const std::string bad = dir.write("hw/bad.yaml", "gpu:\n  peek: 1TFLOPS\n");
  const std::string scenario_bad =
      dir.write("runs/bad.yaml", "hardware:\n  profile_file: ../hw/bad.yaml\n");
  CHECK(error_of([&] { read_scenario_file(scenario_bad); }) ==
        std::filesystem::absolute(bad).lexically_normal().string() +
            ":2:3: unknown key 'gpu.peek'; did you mean 'gpu.peak'?");
}

TEST_CASE("scenario files that cannot be read") {
  CHECK(error_of([] { read_scenario_file("/nonexistent/lynxsim/s.yaml"); }) ==
        "/nonexistent/lynxsim/s.yaml: cannot open the scenario file: no such file");
  // A directory is not read as an empty scenario, nor /dev/zero until memory runs out.
  CHECK(error_of([] { read_scenario_file(LYNXSIM_SOURCE_DIR); }) ==
        std::string(LYNXSIM_SOURCE_DIR) + ": cannot read the scenario file: not a regular file");
  CHECK(error_of([] { read_scenario_file("/dev/zero"); }) ==
        "/dev/zero: cannot read the scenario file: not a regular file");
}

TEST_CASE("every example in scenarios/examples reads") {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(LYNXSIM_SOURCE_DIR) +
                                                               "/scenarios/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    CAPTURE(entry.path().string());
    const Scenario s = read_scenario_file(entry.path().string()).scenario;
    CHECK(s.name == entry.path().stem().string());  // each example names itself after its file
    ++count;
  }
  CHECK(count >= 5);
}

TEST_CASE("the 1024-GPU example uses every GPU of 128 nodes") {
  const Scenario s = read_scenario_file(std::string(LYNXSIM_SOURCE_DIR) +
                                        "/scenarios/examples/gpt175b-1024gpu.yaml").scenario;
  // tp 8 * pp 16 * dp 8 = 1024 = 128 nodes * 8 GPUs; 1536 / (1 * 8) = 192 micro-batches.
  CHECK(s.parallel.tp * s.parallel.pp * s.parallel.dp == 1024);
  CHECK(s.hardware.nodes * s.hardware.gpus_per_node == 1024);
  CHECK(s.parallel.global_batch / (s.parallel.micro_batch * s.parallel.dp) == 192);
  CHECK(s.recompute.strategy == RecomputeKind::kSelective);
}

TEST_CASE("the field table: unique keys, defaults that read back, a docs row each") {
  const std::vector<FieldDesc>& table = scenario_field_table();
  std::set<std::string> scenario_keys;
  std::set<std::string> profile_keys;
  const std::string markdown = scenario_fields_markdown();
  for (const FieldDesc& f : table) {
    CAPTURE(f.key);
    if (f.in_scenario()) CHECK(scenario_keys.insert(f.scenario_key()).second);
    if (f.in_profile()) CHECK(profile_keys.insert(f.profile_key()).second);
    CHECK_FALSE(f.meaning.empty());
    const std::string quoted =
        fmt::format("`{}`", f.in_scenario() ? f.scenario_key() : f.profile_key());
    CHECK(markdown.find(quoted) != std::string::npos);
    // A value written by `get` reads back through `set` to the same text.
    Scenario s = read_default_scenario().scenario;
    const std::string text = f.get(s);
    if (!text.empty()) {
      f.set(s, text);
      CHECK(f.get(s) == text);
    }
  }
  // Spot checks of keys the brief names.
  for (const char* key : {"parallel.tp", "parallel.dp_bucket", "hardware.gpu.peak",
                          "hardware.gpu.gemm_efficiency.half_flops",
                          "hardware.gpu.memory_bound_efficiency.half_bytes",
                          "hardware.node.gpus_per_pcie_switch", "hardware.node.pcie_host.latency",
                          "hardware.collective_efficiency", "sim.exploit_symmetry"}) {
    CHECK(scenario_keys.count(key) == 1);
  }
  CHECK(profile_keys.count("name") == 1);
  CHECK(profile_keys.count("nodes") == 0);  // the cluster size belongs to a scenario
}

TEST_CASE("docs/scenario.md contains the current field table") {
  std::ifstream in(std::string(LYNXSIM_SOURCE_DIR) + "/docs/scenario.md");
  REQUIRE(in.good());
  const std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string current = scenario_fields_markdown();
  // The whole generated section must be exactly the current table: extra lines left between
  // the markers (a stale profile list) fail too.
  const std::string begin_marker = "<!-- BEGIN GENERATED: scenario_fields_markdown() -->\n";
  const std::string end_marker = "<!-- END GENERATED -->";
  const std::size_t section_begin = docs.find(begin_marker);
  REQUIRE(section_begin != std::string::npos);
  const std::size_t section_end = docs.find(end_marker, section_begin);
  REQUIRE(section_end != std::string::npos);
  CHECK(docs.find(begin_marker, section_begin + 1) == std::string::npos);
  const std::size_t table_begin = section_begin + begin_marker.size();
  const std::string generated = docs.substr(table_begin, section_end - table_begin);
  const bool up_to_date = generated == current;
  if (!up_to_date) {
    // Leave the current table where the message says, to paste into the docs.
    std::ofstream(std::string(LYNXSIM_BINARY_DIR) + "/scenario_fields.md") << current;
  }
  CHECK_MESSAGE(up_to_date, "docs/scenario.md is out of date: paste " LYNXSIM_BINARY_DIR
                            "/scenario_fields.md between its GENERATED markers");
  // The YAML examples on the page load.
  int examples = 0;
  for (std::size_t at = docs.find("```yaml\n"); at != std::string::npos;
       at = docs.find("```yaml\n", at + 1)) {
    const std::size_t begin = at + 8;
    const std::size_t end = docs.find("```", begin);
    REQUIRE(end != std::string::npos);
    CHECK_NOTHROW(read_scenario_text(docs.substr(begin, end - begin), "docs-example.yaml"));
    ++examples;
  }
  CHECK(examples == 2);
}

TEST_CASE("the field table filtered by a key prefix") {
  const std::string node = scenario_fields_markdown("hardware.node");
  CHECK(node.rfind("| Scenario key | Profile key | Type | Default | Meaning |\n|---|---|---|---|---|\n", 0) == 0);
  CHECK(node.find("`hardware.node.nic.bw`") != std::string::npos);
  CHECK(node.find("`hardware.node.intra`") != std::string::npos);
  CHECK(node.find("`hardware.nodes`") == std::string::npos);  // a prefix is a whole section
  CHECK(node.find("`hardware.gpu.peak`") == std::string::npos);
  CHECK(node.find("Built-in hardware profiles") == std::string::npos);
  // Profile keys match too, with or without a trailing dot; one row per field.
  const std::string gpu = scenario_fields_markdown("gpu");
  CHECK(gpu == scenario_fields_markdown("gpu."));
  CHECK(gpu.find("`gpu.contention`") != std::string::npos);
  CHECK(scenario_fields_markdown("parallel.tp").find("`parallel.tp`") != std::string::npos);
  CHECK(scenario_fields_markdown("") == scenario_fields_markdown());
  // Nothing under the prefix: an error with a close key, else the top-level keys.
  CHECK(error_of([] { scenario_fields_markdown("hardware.gpu.memry"); }) ==
        "no scenario or profile field is 'hardware.gpu.memry' or lies under it; did you mean "
        "'hardware.gpu.memory'?");
  CHECK(error_of([] { scenario_fields_markdown("zzz"); })
            .find("(top-level keys: base, collective_efficiency, collective_model, gpu, ") != std::string::npos);
}

TEST_CASE("a scenario parsed once reads each set of overrides as a fresh read of the text does") {
  const std::string yaml = kHeader + "model:\n  preset: gpt-1.3b\nparallel:\n  tp: 2\n  global_batch: 8\n";
  const ParsedScenario parsed(yaml, "t.yaml");
  // Valid sets, sets that fail (unknown key, bad value, bad hardware), and valid ones again:
  // one read leaves nothing behind for the next.
  const std::vector<std::vector<std::string>> sets = {
      {},
      {"parallel.tp=4", "parallel.pp=2", "hardware.nodes=2"},
      {"parallel.bogus=1"},
      {"parallel.tp=two"},
      {"hardware.gpu.memory=1GiB"},
      {"hardware.profile=dgx-h100-80gb", "model.layers=12"},
      {},
  };
  for (const auto& overrides : sets) {
    CAPTURE(overrides.size());
    std::string fresh_error, reused_error;
    std::optional<UnresolvedScenario> fresh, reused;
    try {
      fresh.emplace(read_scenario_text(yaml, "t.yaml", overrides));
    } catch (const Error& e) {
      fresh_error = fmt::format("{} {}", static_cast<int>(e.code()), e.what());
    }
    try {
      reused.emplace(parsed.read(overrides));
    } catch (const Error& e) {
      reused_error = fmt::format("{} {}", static_cast<int>(e.code()), e.what());
    }
    CHECK(reused_error == fresh_error);
    REQUIRE(fresh.has_value() == reused.has_value());
    if (!fresh) continue;
    CHECK(scenario_to_yaml(reused->scenario) == scenario_to_yaml(fresh->scenario));
    CHECK(reused->scenario.source_file == fresh->scenario.source_file);
    for (const char* key : {"parallel.tp", "parallel.pp", "hardware.nodes", "model.layers", "model", "sim.mode"})
      CHECK(reused->origins.origin_of(key) == fresh->origins.origin_of(key));
  }
  // The text's own errors are the parse's.
  CHECK(error_of([] { ParsedScenario("model: [", "t.yaml"); }) == load_error("model: ["));
}
