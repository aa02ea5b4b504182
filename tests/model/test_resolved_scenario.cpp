// The resolved scenario: the model preset filled in once, the whole layout checked, and every
// layout error pointing at the key to blame — the override that caused it, else the key in the
// file (file:line:col), else model.preset for a shape the preset filled in.
#include "model/resolved_scenario.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace lynx;
using lynx::test::error_of;

namespace {

const std::string kHeader = "hardware:\n  profile: dgx-a100-80gb\n";  // lines 1-2
const std::string kModel = "model:\n  preset: gpt-1.3b\n";            // lines 3-4 (preset at 4:11)

/// The message of loading and resolving `yaml` (labelled "t.yaml") with `overrides`.
std::string resolve_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { model::load_scenario_text(yaml, "t.yaml", overrides); });
}

const std::string kKnownPresets =
    "gpt-1.3b, gpt-2.7b, gpt-6.7b, gpt-13b, gpt-22b, gpt-23b, gpt-39b, gpt-175b, gpt-530b, gpt-1t, "
    "llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, llama3-405b, mixtral-8x7b, qwen3-30b-a3b, "
    "qwen3-235b-a22b, deepseek-v3";

}  // namespace

TEST_CASE("the loader's scenario is resolved: the preset's shape is filled in") {
  const model::ResolvedScenario s = model::load_scenario_text(kHeader + kModel, "t.yaml");
  CHECK(s->model.preset == "gpt-1.3b");
  CHECK(s->model.layers == 24);
  CHECK(s->model.hidden == 2048);
  CHECK(s->model.heads == 16);
  CHECK(s->model.ffn_hidden == 4 * 2048);
  CHECK(model::default_scenario()->model.layers == 24);  // the default is gpt-1.3b too
  // A scenario built in code goes through the same step.
  Scenario code = s.scenario();
  code.model.layers = 0;
  CHECK(model::resolve_scenario(code, "code")->model.layers == 24);
}

TEST_CASE("a Llama preset fills kv_heads, ffn, vocab and the architecture, errors blame it") {
  const model::ResolvedScenario s =
      model::load_scenario_text(kHeader + "model:\n  preset: llama3-8b\n", "t.yaml");
  CHECK(s->model.kv_heads == 8);
  CHECK(s->model.ffn_hidden == 14336);
  CHECK(s->model.vocab == 128256);
  CHECK(s->model.mlp == MlpKind::kSwiglu);
  // The preset's 8 kv heads do not split over tp 16 (on two nodes): model.preset is to blame...
  CHECK(resolve_error(kHeader + "  nodes: 2\nmodel:\n  preset: llama3-8b\nparallel:\n  tp: 16\n") ==
        "t.yaml:5:11: key 'model.preset': model.kv_heads (8) is not divisible by parallel.tp "
        "(16): Megatron-Core splits the key/value heads over the TP ranks "
        "(num_query_groups_per_partition = num_query_groups / tp); pick a tp that divides kv_heads");
  // ...an explicit kv_heads is, when given; and a GPT model's kv_heads is its heads.
  CHECK(resolve_error(kHeader + "model:\n  preset: llama3-8b\n  kv_heads: 2\nparallel:\n  tp: 4\n")
            .rfind("t.yaml:5:13: key 'model.kv_heads': model.kv_heads (2)", 0) == 0);
  CHECK(resolve_error(kHeader + "model:\n  layers: 2\n  hidden: 1024\n  heads: 16\n  kv_heads: 3\n")
            .rfind("t.yaml:7:13: key 'model.kv_heads': model.kv_heads (3) does not divide model.heads (16)", 0) == 0);
  CHECK(model::default_scenario()->model.kv_heads == 16);
}

TEST_CASE("layout checks that need only the scenario") {
  // 32 sequences over micro-batches of 3 on 2 replicas: 32 % 6 = 2.
  CHECK(resolve_error(kHeader + "parallel:\n  dp: 2\n  micro_batch: 3\n  global_batch: 32\n") ==
        "t.yaml:6:17: key 'parallel.global_batch': 32 is not divisible by micro_batch * dp = 3 * "
        "2 = 6");
  // 8 * 2 * 1 = 16 GPUs on one 8-GPU node.
  CHECK(resolve_error(kHeader + "parallel:\n  tp: 8\n  pp: 2\n") ==
        "t.yaml:5:7: key 'parallel': tp * pp * dp = 8 * 2 * 1 needs 16 GPUs, the cluster has 8 "
        "(hardware.nodes 1 x hardware.gpus_per_node 8)");
  // An override that breaks the file is named, even when a key in the file comes first.
  CHECK(resolve_error(kHeader + "parallel:\n  pp: 2\n", {"parallel.tp=8"}) ==
        "t.yaml: --set parallel.tp=8: key 'parallel': tp * pp * dp = 8 * 2 * 1 needs 16 GPUs, "
        "the cluster has 8 (hardware.nodes 1 x hardware.gpus_per_node 8)");
  // Fewer GPUs than the cluster has is fine; two nodes make room for 16.
  CHECK_NOTHROW(model::load_scenario_text(kHeader + kModel + "parallel:\n  tp: 4\n", "t.yaml"));
  CHECK_NOTHROW(model::load_scenario_text(
      kHeader + "  nodes: 2\n" + kModel + "parallel:\n  tp: 8\n  pp: 2\n", "t.yaml"));
  CHECK(resolve_error(kHeader + "parallel:\n  virtual_stages: 2\n") ==
        "t.yaml:4:19: key 'parallel.virtual_stages': 2 model chunks per GPU need schedule "
        "'interleaved'");
  CHECK(resolve_error(kHeader + "parallel:\n  schedule: interleaved\n") ==
        "t.yaml:4:13: key 'parallel.schedule': the interleaved schedule needs "
        "parallel.virtual_stages >= 2");
  // An override makes an otherwise invalid file valid: the checks run after every override.
  const model::ResolvedScenario last = model::load_scenario_text(
      kHeader + kModel + "parallel: {tp: 16}\n", "t.yaml", {"parallel.tp=2", "parallel.tp=8"});
  CHECK(last->parallel.tp == 8);
}

TEST_CASE("a model layout error caused by a value in the file points at that key") {
  // heads (line 6) is not divisible by tp (line 8): the first key the message names.
  CHECK(resolve_error(kHeader +
                      "model:\n  layers: 4\n  hidden: 1024\n  heads: 16\nparallel:\n  tp: 3\n") ==
        "t.yaml:6:10: key 'model.heads': model.heads (16) is not divisible by parallel.tp (3): "
        "pick a tp that divides the number of attention heads");
  // vocab keeps its default (not in the file): the error points at tp, which is.
  CHECK(resolve_error(kHeader +
                      "model:\n  layers: 4\n  hidden: 1536\n  heads: 24\nparallel:\n  tp: 3\n") ==
        "t.yaml:8:7: key 'parallel.tp': model.vocab (51200) is not divisible by parallel.tp (3): "
        "pad the vocabulary to a multiple of tp (Megatron-LM pads it to a multiple of 128·tp)");
  CHECK(resolve_error(kHeader + "model:\n  preset: gpt-2b\n") ==
        "t.yaml:4:11: key 'model.preset': unknown model preset 'gpt-2b' (known: " + kKnownPresets +
            ")");
  CHECK(resolve_error(kHeader + "model:\n  hidden: 1024\n") ==
        "t.yaml:3:1: key 'model': a custom model (no model.preset) needs model.layers, "
        "model.hidden and model.heads (got layers 0, hidden 1024, heads 0); or name a preset: " +
            kKnownPresets);
}

TEST_CASE("a model layout error caused by an override names the override") {
  // The README's example: 41 layers do not split over 4 pipeline stages.
  const std::string paper = std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper/pcie-gpt-13b.yaml";
  CHECK(error_of([&] { model::load_scenario_file(paper, {"model.layers=41"}); }) ==
        paper +
            ": --set model.layers=41: key 'model.layers': model.layers (41) is not divisible by "
            "parallel.pp × parallel.virtual_stages (4 × 1 = 4): every model chunk needs the same "
            "number of layers");
  // The override is blamed even though model.heads, given in the file, is named first.
  CHECK(resolve_error(kHeader + "model:\n  layers: 4\n  hidden: 1024\n  heads: 16\n",
                      {"parallel.tp=3"}) ==
        "t.yaml: --set parallel.tp=3: key 'parallel.tp': model.heads (16) is not divisible by "
        "parallel.tp (3): pick a tp that divides the number of attention heads");
}

TEST_CASE("a model layout error caused by a preset's value points at model.preset") {
  // gpt-1.3b has 24 layers (not written in the file): 24 % 5 != 0.
  CHECK(resolve_error(kHeader + kModel + "parallel:\n  pp: 5\n") ==
        "t.yaml:4:11: key 'model.preset': model.layers (24) is not divisible by parallel.pp × "
        "parallel.virtual_stages (5 × 1 = 5): every model chunk needs the same number of layers");
  // gpt-1.3b has 16 heads: tp 3 does not divide them.
  CHECK(resolve_error(kHeader + kModel + "parallel:\n  tp: 3\n") ==
        "t.yaml:4:11: key 'model.preset': model.heads (16) is not divisible by parallel.tp (3): "
        "pick a tp that divides the number of attention heads");
  // Written in the file, the same value is blamed on its own key.
  CHECK(resolve_error(kHeader + kModel + "  layers: 26\nparallel:\n  pp: 5\n") ==
        "t.yaml:5:11: key 'model.layers': model.layers (26) is not divisible by parallel.pp × "
        "parallel.virtual_stages (5 × 1 = 5): every model chunk needs the same number of layers");
}

TEST_CASE("a scenario built in code: errors start with its label") {
  Scenario sc = model::default_scenario().scenario();
  sc.parallel.tp = 3;
  sc.parallel.dp = 1;
  CHECK(error_of([&] { model::resolve_scenario(sc, "my test"); }) ==
        "my test: key 'model.heads': model.heads (16) is not divisible by parallel.tp (3): pick "
        "a tp that divides the number of attention heads");
}

TEST_CASE("every example and paper scenario resolves") {
  int count = 0;
  for (const char* folder : {"/scenarios/examples", "/scenarios/paper"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(LYNXSIM_SOURCE_DIR) + folder)) {
      if (entry.path().extension() != ".yaml") continue;
      CAPTURE(entry.path().string());
      const model::ResolvedScenario s = model::load_scenario_file(entry.path().string());
      CHECK(s->model.layers > 0);
      ++count;
    }
  }
  CHECK(count >= 10);
}

TEST_CASE("fields each in range whose products pass 64 bits are refused at the key to blame") {
  // Attention scores: seq_len² · micro_batch · heads (2^74 bytes), before any int wraps.
  CHECK(resolve_error(kHeader + kModel, {"model.seq_len=1048576", "parallel.micro_batch=65536",
                                "parallel.global_batch=65536", "model.heads=4096",
                                "model.hidden=131072", "parallel.dp=1"})
            .find("t.yaml: --set model.seq_len=1048576: key 'model.seq_len': the attention scores' "
                  "size (seq_len² 1048576² x micro_batch 65536 x heads 4096) does not fit in "
                  "64-bit integers") == 0);
  // What one GPU holds with GPipe: every micro-batch's activations of every layer.
  const std::string gpipe = resolve_error(
      kHeader + kModel, {"parallel.schedule=gpipe", "model.seq_len=65536", "parallel.global_batch=16777216"});
  CHECK(gpipe.find("key 'parallel.global_batch': the activations one GPU holds") != std::string::npos);
  // The same shape with 1F1B holds only pp micro-batches: it resolves.
  CHECK_NOTHROW(model::load_scenario_text(kHeader + kModel, "t.yaml",
                                          {"model.seq_len=65536", "parallel.global_batch=16777216"}));
  // A scenario built in code is range-checked like a file.
  Scenario code = model::default_scenario().scenario();
  code.model.hidden = 1 << 20;
  CHECK(error_of([&] { model::resolve_scenario(code, "code"); }) ==
        "code: key 'model.hidden': must be between 0 and 131072, got 1048576");
}

TEST_CASE("parallel.cp: wrong values, too many GPUs and layouts that do not fit name file, line and key") {
  // "  cp: two": the value starts at column 7.
  CHECK(resolve_error(kHeader + "parallel:\n  cp: two\n") ==
        "t.yaml:4:7: key 'parallel.cp': expected an integer, got 'two'");
  CHECK(resolve_error(kHeader + "parallel:\n  cp: 0\n").rfind("t.yaml:4:7: key 'parallel.cp':", 0) == 0);
  CHECK(resolve_error(kHeader + "parallel:\n  cpp: 2\n").rfind("t.yaml:4:3: unknown key 'parallel.cpp'", 0) == 0);
  // tp 8 × cp 2 = 16 GPUs on one 8-GPU node.
  CHECK(resolve_error(kHeader + kModel + "  seq_len: 4096\n  flash_attention: true\nparallel:\n  tp: 8\n  cp: 2\n") ==
        "t.yaml:9:7: key 'parallel': tp * cp * pp * dp = 8 * 2 * 1 * 1 needs 16 GPUs, the cluster has 8 "
        "(hardware.nodes 1 x hardware.gpus_per_node 8)");
  // Context parallelism needs flash attention; the error points at parallel.cp.
  CHECK(resolve_error(kHeader + kModel + "  seq_len: 4096\nparallel:\n  cp: 2\n")
            .rfind("t.yaml:7:7: key 'parallel.cp': parallel.cp 2 needs model.flash_attention true", 0) == 0);
  // seq_len not divisible by 2·cp.
  const std::string e = resolve_error(kHeader + kModel + "  seq_len: 4100\n  flash_attention: true\nparallel:\n  cp: 4\n");
  CHECK(e.rfind("t.yaml:", 0) == 0);
  CHECK(e.find("model.seq_len (4100) is not divisible by 2 x parallel.cp (8)") != std::string::npos);
  // A fitting layout resolves; GPUs counted with cp.
  const model::ResolvedScenario ok =
      model::load_scenario_text(kHeader + kModel + "  seq_len: 4096\n  flash_attention: true\nparallel:\n  tp: 2\n  cp: 4\n", "t.yaml");
  CHECK(gpus_used(ok->parallel) == 8);
}
