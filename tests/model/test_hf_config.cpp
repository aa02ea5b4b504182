// Model shapes from Hugging Face config.json files (model.hf_config): the shipped configs read
// to their published parameter counts, explicit keys override them, and configs the model
// cannot build (mixture of experts, unknown architectures, ...) are refused naming the file,
// line and field.
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"

#include "../error_of.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>
#include <string>

using namespace lynx;
namespace fs = std::filesystem;

namespace {

const std::string kHfDir = std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/hf/";

/// A scenario with `model_lines` (indented under model:) on one DGX H100 node, tp `tp`.
std::string scenario(const std::string& model_lines, int tp = 1) {
  return "model:\n" + model_lines + "parallel:\n  tp: " + std::to_string(tp) +
         "\n  pp: 1\n  dp: 1\n  micro_batch: 1\n  global_batch: 1\nhardware:\n  profile: dgx-h100-80gb\n  nodes: 1\n";
}

/// A temporary folder, removed afterwards.
struct Folder {
  fs::path path;
  Folder() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("lynxsim_test_hf_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

/// A dense Llama config.json with `extra` fields appended (each line `"key": value,`).
std::string llama_json(const std::string& extra = "") {
  return "{\n"
         "  \"model_type\": \"llama\",\n"
         "  \"architectures\": [\"LlamaForCausalLM\"],\n" +
         extra +
         "  \"hidden_size\": 1024,\n"
         "  \"intermediate_size\": 2816,\n"
         "  \"num_hidden_layers\": 4,\n"
         "  \"num_attention_heads\": 16,\n"
         "  \"num_key_value_heads\": 4,\n"
         "  \"vocab_size\": 32000,\n"
         "  \"hidden_act\": \"silu\"\n"
         "}\n";
}

/// The error of resolving a scenario whose model is the config `json` (written as cfg.json).
std::string config_error(const std::string& json, ErrorCode expected_code) {
  Folder folder;
  folder.write("cfg.json", json);
  const std::string yaml = folder.write("t.yaml", scenario("  hf_config: cfg.json\n"));
  CHECK(test::code_of([&] { model::load_scenario_file(yaml); }) == expected_code);
  return test::error_of([&] { model::load_scenario_file(yaml); });
}

}  // namespace

TEST_CASE("each shipped config reads to its published shape and parameter count (within 1%)") {
  struct Published {
    const char* file;
    int layers, hidden, heads, kv_heads, ffn, vocab;
    double parameters;
  };
  // scenarios/hf/README.md: Hub model pages (Llama 3.1 8B: 8.03B, 70B: 70.6B) and the Qwen2.5-7B
  // model card (7.61B).
  const Published published[] = {
      {"llama-3.1-8b.json", 32, 4096, 32, 8, 14336, 128256, 8.03e9},
      {"llama-3.1-70b.json", 80, 8192, 64, 8, 28672, 128256, 70.6e9},
      {"qwen2.5-7b.json", 28, 3584, 28, 4, 18944, 152064, 7.61e9},
  };
  for (const Published& p : published) {
    CAPTURE(p.file);
    const model::ResolvedScenario s = model::load_scenario_text(scenario("  hf_config: " + kHfDir + p.file + "\n"), "t.yaml");
    const ModelSpec& m = s->model;
    CHECK(m.layers == p.layers);
    CHECK(m.hidden == p.hidden);
    CHECK(m.heads == p.heads);
    CHECK(m.kv_heads == p.kv_heads);
    CHECK(m.ffn_hidden == p.ffn);
    CHECK(m.vocab == p.vocab);
    CHECK(m.mlp == MlpKind::kSwiglu);
    CHECK(m.norm == NormKind::kRmsNorm);
    CHECK(m.position_embedding == PositionKind::kRotary);
    CHECK(m.embeddings == EmbeddingTie::kUntied);
    CHECK(m.linear_bias == LinearBias::kOff);
    CHECK(m.dropout == Dropout::kOff);
    CHECK(m.seq_len == 2048);  // max_position_embeddings is not a training length
    CHECK(std::abs(model::parameter_count(m) / p.parameters - 1.0) < 0.01);
  }
  // The Llama 3.1 8B config is the llama3-8b preset's shape: the same model.
  const ModelSpec from_config =
      model::load_scenario_text(scenario("  hf_config: " + kHfDir + "llama-3.1-8b.json\n"), "t.yaml")->model;
  const ModelSpec from_preset = model::load_scenario_text(scenario("  preset: llama3-8b\n"), "t.yaml")->model;
  ModelSpec shape = from_config;
  shape.hf_config = from_preset.hf_config;
  shape.preset = from_preset.preset;
  CHECK(shape == from_preset);
}

TEST_CASE("each shipped mixture-of-experts config reads to its published shape and counts (within 1%)") {
  struct Published {
    const char* file;
    int layers, hidden, heads, kv_heads, head_dim, experts, topk, expert_ffn;
    double parameters, active;
  };
  // scenarios/hf/README.md: Mixtral 8x7B 46.7B / 12.9B (Mistral AI), Qwen3-30B-A3B 30.5B / 3.3B
  // (model card).
  const Published published[] = {
      {"mixtral-8x7b.json", 32, 4096, 32, 8, 0, 8, 2, 14336, 46.7e9, 12.9e9},
      {"qwen3-30b-a3b.json", 48, 2048, 32, 4, 128, 128, 8, 768, 30.5e9, 3.3e9},
  };
  for (const Published& p : published) {
    CAPTURE(p.file);
    // tp 1: the MoE layout needs sequence parallelism with tp > 1.
    const ModelSpec m = model::load_scenario_text(scenario("  hf_config: " + kHfDir + p.file + "\n"), "t.yaml")->model;
    CHECK(m.layers == p.layers);
    CHECK(m.hidden == p.hidden);
    CHECK(m.heads == p.heads);
    CHECK(m.kv_heads == p.kv_heads);
    CHECK(m.head_dim == p.head_dim);
    CHECK(m.moe.num_experts == p.experts);
    CHECK(m.moe.router_topk == p.topk);
    CHECK(m.moe.expert_ffn_hidden == p.expert_ffn);
    CHECK(m.moe.layer_freq == 1);
    CHECK(m.mlp == MlpKind::kSwiglu);
    CHECK(std::abs(model::parameter_count(m) / p.parameters - 1.0) < 0.01);
    CHECK(std::abs(model::active_parameter_count(m) / p.active - 1.0) < 0.02);
  }
  // The same models as the presets.
  for (const auto& [file, name] : {std::pair{"mixtral-8x7b.json", "mixtral-8x7b"}, std::pair{"qwen3-30b-a3b.json", "qwen3-30b-a3b"}}) {
    CAPTURE(file);
    const ModelSpec from_config =
        model::load_scenario_text(scenario("  hf_config: " + kHfDir + file + "\n"), "t.yaml")->model;
    const ModelSpec from_preset = model::load_scenario_text(scenario(std::string("  preset: ") + name + "\n"), "t.yaml")->model;
    CHECK(model::parameter_count(from_config) == model::parameter_count(from_preset));
    CHECK(model::active_parameter_count(from_config) == model::active_parameter_count(from_preset));
  }
  // Qwen3-MoE's layer i is MoE when not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
  std::ifstream in(kHfDir + "qwen3-30b-a3b.json");
  const std::string qwen((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Folder folder;
  const auto variant = [&](const std::string& dense, const std::string& step) {
    std::string text = qwen;
    text.replace(text.find("\"mlp_only_layers\": []"), 21, "\"mlp_only_layers\": " + dense);
    text.replace(text.find("\"decoder_sparse_step\": 1"), 24, "\"decoder_sparse_step\": " + step);
    return text;
  };
  const auto moe_of = [&](const std::string& dense, const std::string& step) {
    folder.write("q.json", variant(dense, step));
    const ModelSpec m = model::load_scenario_text(scenario("  hf_config: " + (folder.path / "q.json").string() + "\n"), "t.yaml")->model;
    return std::pair{m.moe.first_dense_layers, m.moe.layer_freq};
  };
  CHECK(moe_of("[]", "1") == std::pair{0, 1});
  CHECK(moe_of("[0, 1]", "1") == std::pair{2, 1});  // layers 0, 1 dense, the rest MoE
  CHECK(moe_of("[]", "2") == std::pair{1, 2});      // layers 1, 3, 5, … MoE
  CHECK(moe_of("[0, 1]", "2") == std::pair{3, 2});  // layers 3, 5, … MoE
  // Dense layers elsewhere than at the start are refused.
  CHECK(config_error(variant("[1]", "1"), ErrorCode::kNotModelled).find("field 'mlp_only_layers'") != std::string::npos);
}

TEST_CASE("hf_config: relative to the scenario file, explicit model keys override it") {
  Folder folder;
  folder.write("cfg.json", llama_json());
  const std::string yaml = folder.write("t.yaml", scenario("  hf_config: cfg.json\n  layers: 2\n  vocab: 51200\n"));
  const model::ResolvedScenario s = model::load_scenario_file(yaml);
  CHECK(s->model.hf_config == (folder.path / "cfg.json").string());  // stored absolute
  CHECK(s->model.layers == 2);
  CHECK(s->model.vocab == 51200);
  CHECK(s->model.hidden == 1024);
  CHECK(s->model.kv_heads == 4);
  // A --set override wins too.
  CHECK(model::load_scenario_file(yaml, {"model.hidden=2048"})->model.hidden == 2048);
  // A layout problem with a value the config gave points at model.hf_config.
  const std::string tp3 = folder.write("tp3.yaml", scenario("  hf_config: cfg.json\n", 3));
  CHECK(test::error_of([&] { model::load_scenario_file(tp3); }).find(tp3 + ":2:14: key 'model.hf_config': model.heads (16)") == 0);
}

TEST_CASE("hf_config: experts in a dense architecture's config are refused naming file, line and field") {
  // Mixtral (num_local_experts), Qwen2-MoE / Qwen3-MoE (num_experts), DeepSeek (n_routed_experts).
  for (const char* field : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    CAPTURE(field);
    const std::string message =
        config_error(llama_json("  \"" + std::string(field) + "\": 8,\n"), ErrorCode::kNotModelled);
    CHECK(message.find("t.yaml:2:14: key 'model.hf_config': ") != std::string::npos);
    CHECK(message.find("cfg.json:4:") != std::string::npos);
    CHECK(message.find("field '" + std::string(field) + "': 8 experts in a model_type llama config") != std::string::npos);
  }
  // A zero or null expert count is a dense model.
  CHECK_NOTHROW(model::load_scenario_text(scenario("  preset: llama3-8b\n"), "t.yaml"));
  Folder folder;
  folder.write("cfg.json", llama_json("  \"num_experts\": null,\n  \"n_routed_experts\": 0,\n"));
  CHECK(model::load_scenario_file(folder.write("t.yaml", scenario("  hf_config: cfg.json\n")))->model.layers == 4);
}

TEST_CASE("hf_config: unknown architectures and fields the model cannot build are refused") {
  auto with = [](const std::string& from, const std::string& to) {
    std::string json = llama_json();
    json.replace(json.find(from), from.size(), to);
    return json;
  };
  std::string m = config_error(with("\"llama\"", "\"gpt2\""), ErrorCode::kUnknownChoice);
  CHECK(m.find("cfg.json:2:17: field 'model_type': 'gpt2' is not an architecture lynxsim reads") != std::string::npos);
  m = config_error(with("LlamaForCausalLM", "MixtralForCausalLM"), ErrorCode::kUnknownChoice);
  CHECK(m.find("field 'architectures': 'MixtralForCausalLM' is not the causal-LM class of model_type llama") !=
        std::string::npos);
  m = config_error(with("  \"hidden_size\": 1024,\n", ""), ErrorCode::kMissingKey);
  CHECK(m.find("cfg.json:1:1: field 'hidden_size': missing") != std::string::npos);
  m = config_error(with("1024", "\"wide\""), ErrorCode::kWrongType);
  CHECK(m.find("field 'hidden_size': expected a whole number >= 0, got 'wide'") != std::string::npos);
  m = config_error(with("\"silu\"", "\"gelu\""), ErrorCode::kNotModelled);
  CHECK(m.find("field 'hidden_act': 'gelu'") != std::string::npos);
  m = config_error(llama_json("  \"head_dim\": 0,\n"), ErrorCode::kOutOfRange);
  CHECK(m.find("field 'head_dim': must be positive") != std::string::npos);
  // Mistral 7B v0.1 attends within a 4096-token window; Qwen2 only with use_sliding_window.
  std::string mistral = llama_json("  \"sliding_window\": 4096,\n");
  mistral.replace(mistral.find("\"llama\""), 7, "\"mistral\"");
  mistral.replace(mistral.find("LlamaFor"), 5, "Mistral");
  m = config_error(mistral, ErrorCode::kNotModelled);
  CHECK(m.find("field 'sliding_window': sliding-window attention is not modelled") != std::string::npos);
  m = config_error(llama_json("  \"attention_bias\": true,\n"), ErrorCode::kNotModelled);
  CHECK(m.find("field 'mlp_bias'") != std::string::npos);
  m = config_error("[1, 2]\n", ErrorCode::kWrongShape);
  CHECK(m.find("cfg.json:1:1: expected a JSON object") != std::string::npos);
  m = config_error("{\"model_type\": \"llama\"\n", ErrorCode::kMalformedYaml);
  CHECK(m.find("t.yaml:2:14: key 'model.hf_config': ") != std::string::npos);
}

TEST_CASE("hf_config: not with a preset, and a missing file names the key") {
  Folder folder;
  folder.write("cfg.json", llama_json());
  const std::string both = folder.write("both.yaml", scenario("  preset: llama3-8b\n  hf_config: cfg.json\n"));
  CHECK(test::code_of([&] { model::load_scenario_file(both); }) == ErrorCode::kIncompatibleSettings);
  CHECK(test::error_of([&] { model::load_scenario_file(both); })
            .find(both + ":3:14: key 'model.hf_config': give either model.hf_config or model.preset (at " + both + ":2:11)") == 0);
  const std::string missing = folder.write("missing.yaml", scenario("  hf_config: nowhere.json\n"));
  CHECK(test::code_of([&] { model::load_scenario_file(missing); }) == ErrorCode::kFileNotFound);
  CHECK(test::error_of([&] { model::load_scenario_file(missing); }).find(missing + ":2:14: key 'model.hf_config': ") == 0);
}
