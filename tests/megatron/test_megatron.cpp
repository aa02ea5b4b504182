// Megatron-LM launch arguments in and out: shell words, the mapping onto scenario keys, real
// GPT-3 175B and GPT 22B launch lines against hand-written scenarios, round trips, and what is
// warned, rejected as contradictory, or refused as not modelled.
#include "common/files.hpp"
#include "megatron/launch_words.hpp"
#include "megatron/megatron_export.hpp"
#include "megatron/megatron_launch.hpp"
#include "model/gpt.hpp"
#include "model/resolved_scenario.hpp"
#include "model/sharding.hpp"
#include "scenarios/scenario_loader.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace lynx::megatron {
namespace {

using test::error_of;

std::vector<std::string> texts(const std::vector<LaunchWord>& words) {
  std::vector<std::string> out;
  for (const LaunchWord& w : words) out.push_back(w.text);
  return out;
}

MegatronScenario load(const std::string& line, int gpus, const std::string& profile = "dgx-a100-80gb",
                      std::map<std::string, std::string> env = {}) {
  MegatronRequest r;
  r.text = line;
  r.label = "--megatron-args";
  r.profile = profile;
  r.gpus = gpus;
  r.env = std::move(env);
  return load_megatron_scenario(r);
}

/// The scenario as YAML without what names it (name, file): equal YAML = equal scenario.
std::string content_of(const Scenario& s) {
  Scenario copy = s;
  copy.name.clear();
  copy.source_file.clear();
  return scenario_to_yaml(copy);
}

/// The options of an argument text, as "name value" strings, sorted.
std::vector<std::string> option_set(const std::string& text) {
  std::vector<std::string> out;
  const std::vector<LaunchWord> words = launch_words(text, "t");
  for (std::size_t k = 0; k < words.size(); ++k) {
    std::string item = words[k].text;
    if (k + 1 < words.size() && words[k + 1].text.rfind("--", 0) != 0) item += " " + words[++k].text;
    out.push_back(item);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// GPT-3 175B as Narayanan et al. 2021 train it (Megatron-LM's GPT-3 example shape), with the
// interleaved schedule: tp 8, pp 8, 4 layers per virtual stage (3 chunks per GPU), on 1024 A100.
const std::string kGpt175bInterleaved =
    "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
    "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 1536 "
    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 "
    "--num-layers-per-virtual-pipeline-stage 4 --use-distributed-optimizer "
    "--overlap-grad-reduce --bf16";
const char* kGpt175bInterleavedYaml = R"(
model: {preset: gpt-175b}
parallel: {tp: 8, pp: 8, dp: 16, micro_batch: 1, global_batch: 1536, schedule: interleaved,
           virtual_stages: 3, distributed_optimizer: true}
hardware: {profile: dgx-a100-80gb, nodes: 128}
)";

// GPT 22B as Korthikanti et al. 2022 (Table 3: 48 layers, h 6144, 64 heads, tp 8) train it:
// sequence parallelism and selective recomputation; scenarios/examples/gpt22b-selective.yaml.
const std::string kGpt22b =
    "pretrain_gpt.py --num-layers 48 --hidden-size 6144 --num-attention-heads 64 "
    "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4 "
    "--global-batch-size 32 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 1 "
    "--sequence-parallel --recompute-granularity selective --overlap-grad-reduce --bf16 "
    "--lr 1.0e-4 --save /checkpoints --log-interval 10";

}  // namespace

TEST_CASE("launch words: quotes, continuations, comments, variables, arrays") {
  const std::string script =
      "#!/bin/bash\n"
      "TP=8   # tensor parallel\n"
      "export PP=\"2\"\n"
      "ARGS=(\n  --num-layers 24   # comment inside\n  --hidden-size=2048\n)\n"
      "echo starting > /dev/null\n"
      "torchrun --nproc_per_node 8 pretrain_gpt.py \\\n"
      "  --tensor-model-parallel-size $TP --pipeline-model-parallel-size ${PP} \\\n"
      "  ${ARGS[@]} --data-path 'a b' \"--lr\" 1e-4 --mb ${MB:-4} --save $UNSET 2>&1 | tee log\n";
  const std::vector<LaunchWord> words = launch_words(script, "launch.sh");
  CHECK(texts(words) == std::vector<std::string>{"--tensor-model-parallel-size", "8",
                                                 "--pipeline-model-parallel-size", "2",
                                                 "--num-layers", "24", "--hidden-size=2048",
                                                 "--data-path", "a b", "--lr", "1e-4", "--mb", "4",
                                                 "--save", ""});
  CHECK(words[0].origin == "launch.sh:10:3");
  CHECK(words[4].origin == "launch.sh:5:3");  // from the array's definition
  CHECK(words.back().unresolved == "$UNSET");
  // An array element that cannot be resolved stays a word that says so (not an empty nothing).
  const std::vector<LaunchWord> array = launch_words("A=( --tp $TP )\nrun.py ${A[@]} --b", "s");
  REQUIRE(array.size() == 3);
  CHECK(array[1].unresolved == "$TP");
  CHECK(array[1].origin == "s:1:10");
  CHECK(error_of([] { launch_words("--a 'open", "x"); }).find("x:1:5: unterminated single quote") == 0);
  CHECK(error_of([] { launch_words("echo hi", "x"); }).find("no Megatron-LM arguments") != std::string::npos);
}

TEST_CASE("GPT-3 175B, Megatron-LM's example script: every shape and layout key, paths ignored") {
  MegatronRequest r;
  r.text = read_text_file(LYNXSIM_SOURCE_DIR "/megatron/examples/train_gpt3_175b_distributed.sh",
                          "script");
  r.label = "train_gpt3_175b_distributed.sh";
  r.profile = "dgx-a100-80gb";
  r.gpus = 1024;
  const MegatronScenario got = load_megatron_scenario(r);
  const model::ResolvedScenario hand = model::load_scenario_text(R"(
model: {preset: gpt-175b, flash_attention: true}
parallel: {tp: 8, pp: 16, dp: 8, micro_batch: 1, global_batch: 1536, dp_overlap: end}
hardware: {profile: dgx-a100-80gb, nodes: 128}
)", "hand");
  CHECK(content_of(got.scenario.scenario()) == content_of(hand.scenario()));
  CHECK(got.scenario->name == "train_gpt3_175b_distributed");
  REQUIRE(!got.warnings.empty());
  for (const char* ignored : {"--rampup-batch-size", "--lr", "--save", "--data-path", "--vocab-file"})
    CHECK(got.warnings[0].find(ignored) != std::string::npos);
  CHECK(got.warnings[0].find("--num-layers") == std::string::npos);
  // --attention-backend auto is an assumption, said in a note.
  CHECK(std::any_of(got.warnings.begin(), got.warnings.end(),
                    [](const std::string& w) { return w.find("--attention-backend auto") != std::string::npos; }));
  // Out and back in: the same scenario.
  const std::string out = scenario_to_megatron_args(got.scenario.scenario());
  CHECK(content_of(load(out, 1024).scenario.scenario()) == content_of(hand.scenario()));
}

TEST_CASE("GPT-3 175B interleaved: args -> scenario -> args gives the same options") {
  const MegatronScenario got = load(kGpt175bInterleaved, 1024);
  CHECK(got.warnings.empty());
  CHECK(content_of(got.scenario.scenario()) ==
        content_of(model::load_scenario_text(kGpt175bInterleavedYaml, "hand").scenario()));
  const std::string out = scenario_to_megatron_args(got.scenario.scenario());
  CHECK(option_set(out) == option_set(kGpt175bInterleaved));
  CHECK(out.find("--num-layers 96 \\\n") != std::string::npos);
  CHECK(out.find("Launch on 1024 GPUs (128 node(s) of 8") != std::string::npos);
}

TEST_CASE("GPT 22B (Korthikanti et al. 2022): equals scenarios/examples/gpt22b-selective.yaml") {
  const MegatronScenario got = load(kGpt22b, 8);
  const model::ResolvedScenario hand =
      model::load_scenario_file(LYNXSIM_SOURCE_DIR "/scenarios/examples/gpt22b-selective.yaml");
  CHECK(content_of(got.scenario.scenario()) == content_of(hand.scenario()));
  REQUIRE(got.warnings.size() == 1);
  CHECK(got.warnings[0].find("--lr --save --log-interval") != std::string::npos);
  // The hand-written scenario printed as arguments reads back as the same options.
  const std::string out = scenario_to_megatron_args(hand.scenario());
  std::string line = kGpt22b.substr(kGpt22b.find("--num-layers"));
  line = line.substr(0, line.find(" --lr"));
  CHECK(option_set(out) == option_set(line));
}

TEST_CASE("Megatron-LM defaults and assumptions") {
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--micro-batch-size 2 --bf16";
  const MegatronScenario s = load(base, 4);
  CHECK(s.scenario->parallel.tp == 1);
  CHECK(s.scenario->parallel.dp == 4);
  CHECK(s.scenario->parallel.global_batch == 8);  // micro-batch x dp
  CHECK(s.scenario->model.ffn_hidden == 4096);
  CHECK(s.scenario->model.vocab == 50304);  // 50257 padded to 128 x tp 1
  CHECK(s.scenario->model.preset.empty());
  CHECK(s.scenario->parallel.dp_overlap == DpOverlap::kEnd);
  CHECK(s.scenario->recompute.strategy == RecomputeKind::kNone);
  // --sequence-parallel with tp 1: Megatron-LM turns it off with a warning; so does lynxsim.
  const MegatronScenario sp = load(base + " --sequence-parallel", 4);
  CHECK(!sp.scenario->parallel.sequence_parallel);
  CHECK(sp.warnings.at(0).find("turns it off") != std::string::npos);
  // Variables from --megatron-env; full recomputation; flash attention; vocab padding for tp 2.
  const MegatronScenario full =
      load(base + " --tensor-model-parallel-size $TP --recompute-granularity full "
                  "--recompute-method block --recompute-num-layers 2 --use-flash-attn "
                  "--vocab-size 32000",
           4, "dgx-a100-80gb", {{"TP", "2"}});
  CHECK(full.scenario->parallel.tp == 2);
  CHECK(full.scenario->recompute.strategy == RecomputeKind::kFull);
  CHECK(full.scenario->recompute.method == FullMethod::kBlock);
  CHECK(full.scenario->recompute.num_layers == 2);
  CHECK(full.scenario->model.flash_attention);
  CHECK(full.scenario->model.vocab == 32000);  // already a multiple of 256
  CHECK(load(base + " --vocab-size 32001", 1).scenario->model.vocab == 32128);
}

TEST_CASE("contradictory arguments are rejected, naming the argument") {
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --bf16 ";
  CHECK(error_of([&] { load(base + "--micro-batch-size 2 --global-batch-size 10", 4); }) ==
        "--megatron-args:1:106: --global-batch-size 10: key 'parallel.global_batch': 10 is not "
        "divisible by micro_batch * dp = 2 * 4 = 8");
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --micro-batch-size 2", 1); })
            .find("--micro-batch-size is given twice with different values (1 at --megatron-args:1:85, then 2)") !=
        std::string::npos);
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --fp16", 1); }).find("--fp16 contradicts --bf16") !=
        std::string::npos);
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --recompute-activations --recompute-method uniform", 1); })
            .find("--recompute-method needs --recompute-granularity full") != std::string::npos);
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --recompute-granularity full --recompute-num-layers 1", 1); })
            .find("needs --recompute-method uniform or block") != std::string::npos);
  CHECK(error_of([&] {
          load(base + "--micro-batch-size 1 --pipeline-model-parallel-size 2 "
                      "--num-layers-per-virtual-pipeline-stage 3", 2);
        }).find("--num-layers-per-virtual-pipeline-stage 3: --num-layers 4 does not split") != std::string::npos);
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --max-position-embeddings 512", 1); })
            .find("less than the sequence length") != std::string::npos);
  // The layout check of the loader, blamed on the argument behind the key.
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --tensor-model-parallel-size 3", 3); })
            .find("--megatron-args:1:35: --num-attention-heads 16: key 'model.heads': model.heads (16) is not "
                  "divisible by parallel.tp (3)") == 0);
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --tensor-model-parallel-size 2", 3); })
            .find("--gpus 3: not divisible by tp 2") == 0);
  CHECK(error_of([&] { load(base + "--micro-batch-size 1", 12); })
            .find("--gpus 12: not a whole number of nodes of 8 GPUs") == 0);
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --bf16 oops", 1); })
            .find("unexpected word 'oops' after --bf16") != std::string::npos);
  CHECK(error_of([&] { load(base, 1); }).find("--micro-batch-size is missing") != std::string::npos);
  // An unresolved variable is an error naming the argument that needs it.
  CHECK(error_of([&] { load(base + "--micro-batch-size 1 --tensor-model-parallel-size $TP", 1); }) ==
        "--megatron-args:1:106: --tensor-model-parallel-size: $TP cannot be resolved; lynxsim runs "
        "nothing and reads no environment: set the variable in the script or give "
        "--megatron-env NAME=VALUE");
}

TEST_CASE("arguments lynxsim does not model are refused, not simulated as something else") {
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--micro-batch-size 1 ";
  for (const char* arg : {"--squared-relu", "--position-embedding-type relative",
                          "--max-position-embeddings 4096", "--context-parallel-size 2 --cp-comm-type a2a",
                          "--tokenizer-type HuggingFaceTokenizer"}) {
    CAPTURE(arg);
    const std::string message = error_of([&] { load(base + "--bf16 " + arg, 1); });
    CHECK((message.find("not modelled by lynxsim yet") != std::string::npos ||
           message.find("give --vocab-size") != std::string::npos));
  }
  CHECK(error_of([&] { load(base, 1); }).find("fp32 training is not modelled by lynxsim yet") !=
        std::string::npos);
  // Grouped-query attention with as many groups as heads is multi-head attention.
  const MegatronScenario mha = load(base + "--bf16 --group-query-attention --num-query-groups 16", 1);
  CHECK(mha.scenario->model.kv_heads == 16);
  CHECK(error_of([&] { load(base + "--bf16 --normalization BatchNorm", 1); })
            .find("--normalization BatchNorm: expected LayerNorm or RMSNorm") != std::string::npos);
}

// Llama 3 8B as Megatron-LM's Llama examples launch it (examples/llama: GQA with 8 groups,
// SwiGLU, RMSNorm, RoPE, untied embeddings, no biases), tp 8 with SP on one DGX node.
const std::string kLlama3_8b =
    "pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
    "--num-attention-heads 32 --group-query-attention --num-query-groups 8 "
    "--seq-length 8192 --max-position-embeddings 8192 --position-embedding-type rope "
    "--rotary-base 500000 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights "
    "--disable-bias-linear --attention-dropout 0.0 --hidden-dropout 0.0 "
    "--tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3-8B "
    "--vocab-size 128256 --micro-batch-size 1 --global-batch-size 128 "
    "--tensor-model-parallel-size 8 --sequence-parallel --use-flash-attn "
    "--use-distributed-optimizer --overlap-grad-reduce --bf16";

TEST_CASE("a Llama-3-8B launch line maps onto preset llama3-8b and round-trips") {
  const MegatronScenario got = load(kLlama3_8b, 8);
  // Megatron-LM pads the 128256 tokens to a multiple of 128 x tp 8 = 1024: 129024.
  const model::ResolvedScenario expected = model::load_scenario_text(R"(
model: {preset: llama3-8b, seq_len: 8192, vocab: 129024, flash_attention: true}
parallel: {tp: 8, pp: 1, dp: 1, sequence_parallel: true, micro_batch: 1, global_batch: 128,
           distributed_optimizer: true}
hardware: {profile: dgx-a100-80gb}
)", "llama3-8b");
  CHECK(content_of(got.scenario.scenario()) == content_of(expected.scenario()));
  const ModelSpec& m = got.scenario->model;
  CHECK(m.preset == "llama3-8b");
  CHECK(m.kv_heads == 8);
  CHECK(m.mlp == MlpKind::kSwiglu);
  CHECK(m.norm == NormKind::kRmsNorm);
  CHECK(m.position_embedding == PositionKind::kRotary);
  CHECK(m.embeddings == EmbeddingTie::kUntied);
  CHECK(m.linear_bias == LinearBias::kOff);
  CHECK(m.dropout == Dropout::kOff);
  // Only one of the two dropouts off is not modelled; a bad probability is an error.
  std::string half = kLlama3_8b;
  half.replace(half.find("--attention-dropout 0.0"), 23, "--attention-dropout 0.1");
  CHECK(error_of([&] { load(half, 8); }).find("--hidden-dropout 0.0: not modelled by lynxsim yet") !=
        std::string::npos);
  CHECK(error_of([&] { load(kLlama3_8b + " --hidden-dropout 2", 8); }).find("given twice") != std::string::npos);
  half.replace(half.find("--attention-dropout 0.1"), 23, "--attention-dropout x.1");
  CHECK(error_of([&] { load(half, 8); }).find("--attention-dropout x.1: expected a probability") !=
        std::string::npos);
  // Rotary has no position table: a longer --max-position-embeddings is fine.
  std::string longer = kLlama3_8b;
  longer.replace(longer.find("--max-position-embeddings 8192"), 30, "--max-position-embeddings 131072");
  CHECK(load(longer, 8).scenario->model.seq_len == 8192);
  // The deprecated flag means rope too.
  std::string old_flag = kLlama3_8b;
  old_flag.replace(old_flag.find("--position-embedding-type rope"), 30, "--use-rotary-position-embeddings");
  CHECK(load(old_flag, 8).scenario->model.position_embedding == PositionKind::kRotary);

  // Scenario -> arguments: every architecture option, and they read back as the same scenario.
  const std::string args = scenario_to_megatron_args(expected.scenario());
  for (const char* option : {"--group-query-attention", "--num-query-groups 8", "--swiglu",
                             "--normalization RMSNorm", "--position-embedding-type rope",
                             "--untie-embeddings-and-output-weights", "--disable-bias-linear",
                             "--attention-dropout 0.0", "--hidden-dropout 0.0",
                             "--ffn-hidden-size 14336", "--vocab-size 129024"}) {
    CAPTURE(option);
    CHECK(args.find(std::string(option) + " \\\n") != std::string::npos);
  }
  CHECK(content_of(load(args, 8).scenario.scenario()) == content_of(expected.scenario()));
  // GPT scenarios print none of them.
  const std::string gpt = scenario_to_megatron_args(model::default_scenario().scenario());
  for (const char* option : {"--swiglu", "--group-query-attention", "--normalization",
                             "--position-embedding-type", "--untie", "--disable-bias-linear",
                             "-dropout"})
    CHECK(gpt.find(option) == std::string::npos);
  // The other Llama presets round-trip too (their vocabularies need --make-vocab-size-divisible-by 1).
  for (const char* preset : {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-70b", "llama3-405b"}) {
    CAPTURE(preset);
    const model::ResolvedScenario sc = model::load_scenario_text(
        std::string("model: {preset: ") + preset + ", flash_attention: true}\n"
        "parallel: {tp: 8, micro_batch: 1, global_batch: 8}\nhardware: {profile: dgx-a100-80gb}\n",
        preset);
    const std::string out = scenario_to_megatron_args(sc.scenario());
    const MegatronScenario back = load(out, 8);
    CHECK(back.scenario->model.preset == preset);  // Llama 2 and 3 70B: told apart by the vocabulary
    CHECK(content_of(back.scenario.scenario()) == content_of(sc.scenario()));
  }
  // A GQA group count Megatron-Core cannot split over tp is refused with Megatron's rule.
  std::string mqa = kLlama3_8b;
  mqa.replace(mqa.find("--num-query-groups 8"), 20, "--num-query-groups 4");
  CHECK(error_of([&] { load(mqa, 8); }).find("model.kv_heads (4) is not divisible by parallel.tp (8)") !=
        std::string::npos);
}

// Mixtral 8x7B as Megatron-Core's MoE examples launch it (8 experts, top-2, grouped GEMM,
// all-to-all dispatcher), tp 2 with SP, ep 4, on two DGX nodes (dp 8).
const std::string kMixtral =
    "pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
    "--num-attention-heads 32 --group-query-attention --num-query-groups 8 "
    "--seq-length 4096 --max-position-embeddings 32768 --position-embedding-type rope "
    "--normalization RMSNorm --swiglu --untie-embeddings-and-output-weights "
    "--disable-bias-linear --attention-dropout 0.0 --hidden-dropout 0.0 --vocab-size 32000 "
    "--make-vocab-size-divisible-by 1 --num-experts 8 --moe-router-topk 2 --moe-grouped-gemm "
    "--moe-token-dispatcher-type alltoall --moe-router-load-balancing-type aux_loss "
    "--expert-model-parallel-size 4 --micro-batch-size 1 --global-batch-size 64 "
    "--tensor-model-parallel-size 2 --sequence-parallel --use-flash-attn --bf16";

TEST_CASE("a Mixtral 8x7B launch line maps onto preset mixtral-8x7b with ep and round-trips") {
  const MegatronScenario got = load(kMixtral, 16);
  const model::ResolvedScenario expected = model::load_scenario_text(R"(
model: {preset: mixtral-8x7b, seq_len: 4096, flash_attention: true}
parallel: {tp: 2, pp: 1, dp: 8, ep: 4, etp: 2, sequence_parallel: true, micro_batch: 1, global_batch: 64}
hardware: {profile: dgx-a100-80gb, nodes: 2}
)", "mixtral");
  CHECK(got.scenario->model.preset == "mixtral-8x7b");
  CHECK(got.scenario->model.moe.num_experts == 8);
  CHECK(got.scenario->model.moe.router_topk == 2);
  CHECK(got.scenario->parallel.ep == 4);
  CHECK(model::parameter_count(got.scenario->model) == model::parameter_count(expected->model));
  const std::string args = scenario_to_megatron_args(expected.scenario());
  for (const char* option : {"--num-experts 8", "--moe-router-topk 2", "--moe-grouped-gemm",
                             "--moe-token-dispatcher-type alltoall", "--expert-model-parallel-size 4",
                             "--expert-tensor-parallel-size 2"}) {
    CAPTURE(option);
    CHECK(args.find(std::string(option) + " \\\n") != std::string::npos);
  }
  const MegatronScenario back = load(args, 16);
  CHECK(back.scenario->parallel.ep == 4);
  CHECK(back.scenario->model.moe == expected->model.moe);
  // DeepSeek-style leading dense layers: Megatron-Core's list form of --moe-layer-freq.
  CHECK(load(kMixtral + " --moe-layer-freq '([0]*3+[1]*29)'", 16).scenario->model.moe.first_dense_layers == 3);
  // Leading dense layers and every other layer MoE: written as the per-layer list, read back.
  const model::ResolvedScenario mixed = model::load_scenario_text(R"(
model: {preset: mixtral-8x7b, seq_len: 4096, flash_attention: true, moe: {first_dense_layers: 1, layer_freq: 2}}
parallel: {tp: 2, pp: 1, dp: 8, ep: 4, etp: 2, sequence_parallel: true, micro_batch: 1, global_batch: 64}
hardware: {profile: dgx-a100-80gb, nodes: 2}
)", "mixed");
  const std::string mixed_args = scenario_to_megatron_args(mixed.scenario());
  CHECK(mixed_args.find("--moe-layer-freq \"[0,1,0,1,0,1,") != std::string::npos);
  const MegatronScenario mixed_back = load(mixed_args, 16);
  CHECK(mixed_back.scenario->model.moe.first_dense_layers == 1);
  CHECK(mixed_back.scenario->model.moe.layer_freq == 2);
  CHECK(error_of([&] { load(kMixtral + " --moe-layer-freq '[0,1,1,0]'", 16); }).find("every k-th") != std::string::npos);
  CHECK(load(kMixtral + " --moe-shared-expert-intermediate-size 4096", 16).scenario->model.moe.shared_ffn_hidden == 4096);
  // Options lynxsim does not model, and MoE options without experts, are refused.
  std::string allgather = kMixtral;
  allgather.replace(allgather.find("alltoall"), 8, "allgather");
  CHECK(error_of([&] { load(allgather, 16); }).find("--moe-token-dispatcher-type allgather: not modelled") !=
        std::string::npos);
  std::string dense = kMixtral;
  dense.replace(dense.find("--num-experts 8 "), 16, "");
  CHECK(error_of([&] { load(dense, 16); }).find("needs --num-experts") != std::string::npos);
  // Expert tensor parallelism other than tp (Mixtral recipes run tp 2 with etp 1): read, written
  // back, read again; layouts Megatron-Core cannot form are refused naming parallel.etp.
  const MegatronScenario etp1 = load(kMixtral + " --expert-tensor-parallel-size 1", 16);
  CHECK(etp1.scenario->parallel.etp == 1);
  CHECK(etp1.scenario->parallel.tp == 2);
  const std::string etp1_args = scenario_to_megatron_args(etp1.scenario.scenario());
  CHECK(etp1_args.find("--expert-tensor-parallel-size 1 \\\n") != std::string::npos);
  CHECK(etp1_args.find("--tensor-model-parallel-size 2 \\\n") != std::string::npos);
  CHECK(load(etp1_args, 16).scenario->parallel.etp == 1);
  // 14336 is not divisible by 3; etp 8 · ep 4 = 32 does not divide tp 2 · dp 8 = 16.
  CHECK(error_of([&] { load(kMixtral + " --expert-tensor-parallel-size 3", 16); }).find("parallel.etp") !=
        std::string::npos);
  CHECK(error_of([&] { load(kMixtral + " --expert-tensor-parallel-size 8", 16); })
            .find("parallel.etp · parallel.ep (8 · 4) does not divide parallel.tp · parallel.dp · parallel.cp (2 · 8 · 1)") !=
        std::string::npos);
}

TEST_CASE("scenario -> arguments: strategies and schedules Megatron-LM lacks say the closest") {
  const model::ResolvedScenario lynx = model::load_scenario_file(
      LYNXSIM_SOURCE_DIR "/scenarios/examples/pcie-gpt1.3b-lynx.yaml");
  const std::string out = scenario_to_megatron_args(lynx.scenario());
  CHECK(out.find("# recompute.strategy lynx-heu has no Megatron-LM equivalent") != std::string::npos);
  CHECK(out.find("--recompute-granularity selective") != std::string::npos);
  CHECK(out.find("No Megatron-LM argument for: the hardware") != std::string::npos);
  const model::ResolvedScenario gpipe =
      model::default_scenario({"parallel.schedule=gpipe", "model.vocab=50000"});
  const std::string g = scenario_to_megatron_args(gpipe.scenario());
  CHECK(g.find("gpipe has no Megatron-LM equivalent") != std::string::npos);
  CHECK(g.find("--vocab-size 50000 \\\n--make-vocab-size-divisible-by 1") != std::string::npos);
  // Printed arguments read back (same profile, same GPUs) as the same scenario.
  const model::ResolvedScenario def = model::default_scenario();
  CHECK(content_of(load(scenario_to_megatron_args(def.scenario()), 8).scenario.scenario()) ==
        content_of(def.scenario()));
}

TEST_CASE("--no-overlap-p2p-communication: interleaved pipeline exchanges block, and read back") {
  const std::string base =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 --bf16 "
      "--pipeline-model-parallel-size 2 ";
  const std::string interleaved = base + "--num-layers-per-virtual-pipeline-stage 2 ";
  // Megatron-Core's default: overlapped with interleaving (auto takes it there).
  const MegatronScenario overlapped = load(interleaved, 2);
  CHECK_FALSE(blocking_exchange(overlapped.scenario->parallel));
  const MegatronScenario blocking = load(interleaved + "--no-overlap-p2p-communication", 2);
  CHECK(blocking.scenario->parallel.pipeline_exchange == PipelineExchange::kBlocking);
  const std::string out = scenario_to_megatron_args(blocking.scenario.scenario());
  CHECK(out.find("--no-overlap-p2p-communication") != std::string::npos);
  CHECK(content_of(load(out, 2).scenario.scenario()) == content_of(blocking.scenario.scenario()));
  // Without interleaving Megatron-Core always blocks, and so does the default (auto).
  const MegatronScenario plain = load(base, 2);
  CHECK(plain.scenario->parallel.pipeline_exchange == PipelineExchange::kAuto);
  CHECK(blocking_exchange(plain.scenario->parallel));
  CHECK(scenario_to_megatron_args(plain.scenario.scenario()).find("pipeline_exchange") == std::string::npos);
  // Overlapped sends without interleaving: no Megatron-LM argument carries them, and the printed
  // arguments say so.
  Scenario overlapped_1f1b = plain.scenario.scenario();
  overlapped_1f1b.parallel.pipeline_exchange = PipelineExchange::kOverlapped;
  CHECK(scenario_to_megatron_args(overlapped_1f1b)
            .find("parallel.pipeline_exchange overlapped has no Megatron-LM argument without interleaving") !=
        std::string::npos);
}

TEST_CASE("--tp-comm-overlap and --overlap-param-gather map to their keys, with Megatron-LM's preconditions") {
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 1 --bf16 --tensor-model-parallel-size 2 ";
  const MegatronScenario on = load(
      base + "--sequence-parallel --tp-comm-overlap --use-distributed-optimizer --overlap-param-gather", 4);
  // The printed arguments carry both options back.
  const std::string printed = scenario_to_megatron_args(on.scenario.scenario());
  CHECK(printed.find("--tp-comm-overlap") != std::string::npos);
  CHECK(printed.find("--overlap-param-gather") != std::string::npos);
  CHECK(on.scenario->parallel.tp_comm_overlap);
  CHECK(on.scenario->parallel.overlap_param_gather);
  const MegatronScenario off = load(base + "--sequence-parallel", 4);
  CHECK_FALSE(off.scenario->parallel.tp_comm_overlap);
  CHECK_FALSE(off.scenario->parallel.overlap_param_gather);
  CHECK(error_of([&] { load(base + "--tp-comm-overlap", 4); }).find("needs parallel.sequence_parallel") !=
        std::string::npos);
  CHECK(error_of([&] { load(base + "--overlap-param-gather", 4); }).find("needs parallel.distributed_optimizer") !=
        std::string::npos);
}

TEST_CASE("FSDP arguments: --use-torch-fsdp2 and Megatron-FSDP's sharding strategies, with Megatron-LM's refusals") {
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 1 --bf16 ";
  const std::string torch_ok = base + "--use-torch-fsdp2 --no-gradient-accumulation-fusion --untie-embeddings-and-output-weights";
  CHECK(load(torch_ok, 8).scenario->parallel.sharding == Sharding::kFull);
  // megatron/training/arguments.py (NVIDIA/Megatron-LM d98e8a64ddf3) validate_args refusals.
  CHECK(error_of([&] { load(torch_ok + " --pipeline-model-parallel-size 2", 8); })
            .find("not supported with pipeline parallelism") != std::string::npos);
  CHECK(error_of([&] { load(torch_ok + " --use-distributed-optimizer", 8); }).find("distributed optimizer") != std::string::npos);
  CHECK(error_of([&] { load(base + "--use-torch-fsdp2 --untie-embeddings-and-output-weights", 8); })
            .find("gradient accumulation fusion") != std::string::npos);
  CHECK(error_of([&] { load(base + "--use-torch-fsdp2 --no-gradient-accumulation-fusion", 8); })
            .find("--untie-embeddings-and-output-weights") != std::string::npos);
  // Megatron-FSDP: the strategy names map to the levels; optim_grads_params is the default.
  for (const auto& [strategy, level] : {std::pair{"no_shard", Sharding::kNone}, {"optim", Sharding::kOptimizer},
                                        {"optim_grads", Sharding::kGradients}, {"optim_grads_params", Sharding::kFull}}) {
    CAPTURE(strategy);
    const MegatronScenario m = load(base + "--use-megatron-fsdp --data-parallel-sharding-strategy " + strategy, 8);
    CHECK(model::sharding_level(m.scenario->parallel) == level);
    // Written back, they read as the same level.
    const std::string printed = scenario_to_megatron_args(m.scenario.scenario());
    CHECK(model::sharding_level(load(printed, 8).scenario->parallel) == level);
  }
  CHECK(load(base + "--use-custom-fsdp", 8).scenario->parallel.sharding == Sharding::kFull);
  CHECK(error_of([&] { load(base + "--data-parallel-sharding-strategy optim", 8); }).find("needs --use-megatron-fsdp") !=
        std::string::npos);
  CHECK(error_of([&] { load(base + "--use-megatron-fsdp --data-parallel-sharding-strategy zero3", 8); })
            .find("expected no_shard, optim, optim_grads or optim_grads_params") != std::string::npos);
}

TEST_CASE("uneven pipeline stages, recompute chunks and FP8 read and write as Megatron-LM's arguments") {
  const std::string base =
      "--num-layers 10 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 1 --pipeline-model-parallel-size 4 ";
  const MegatronScenario uneven = load(base + "--bf16 --decoder-first-pipeline-num-layers 1", 4);
  CHECK(uneven.scenario->parallel.first_stage_layers == 1);
  CHECK(uneven.scenario->parallel.last_stage_layers == 0);
  const MegatronScenario both =
      load(base + "--bf16 --decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2", 4);
  CHECK(both.scenario->parallel.last_stage_layers == 2);
  const std::string out = scenario_to_megatron_args(both.scenario.scenario());
  CHECK(out.find("--decoder-first-pipeline-num-layers 2 \\\n--decoder-last-pipeline-num-layers 2") != std::string::npos);
  CHECK(content_of(load(out, 4).scenario.scenario()) == content_of(both.scenario.scenario()));
  // Megatron-LM's rules: the split must divide; uneven stages with interleaving take the chunk count.
  CHECK(error_of([&] { load(base + "--bf16 --decoder-first-pipeline-num-layers 2", 4); })
            .find("key 'parallel.first_stage_layers': parallel.first_stage_layers 2 and "
                  "parallel.last_stage_layers 0 leave 8 of model.layers 10 for the 3 other stage(s)") !=
        std::string::npos);
  CHECK(error_of([&] {
          load(base + "--bf16 --decoder-first-pipeline-num-layers 1 --num-layers-per-virtual-pipeline-stage 1", 4);
        }).find("Megatron-LM refuses it (give the chunks per GPU with --num-virtual-stages-per-pipeline-rank") !=
        std::string::npos);
  const MegatronScenario chunks = load(
      "--num-layers 12 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 "
      "--micro-batch-size 1 --pipeline-model-parallel-size 3 --num-virtual-stages-per-pipeline-rank 2 --bf16 "
      "--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2",
      3);
  CHECK(chunks.scenario->parallel.virtual_stages == 2);
  const std::string chunk_args = scenario_to_megatron_args(chunks.scenario.scenario());
  CHECK(chunk_args.find("--num-virtual-stages-per-pipeline-rank 2") != std::string::npos);
  CHECK(chunk_args.find("--num-layers-per-virtual-pipeline-stage") == std::string::npos);
  CHECK(content_of(load(chunk_args, 3).scenario.scenario()) == content_of(chunks.scenario.scenario()));

  // Full uniform recomputation in chunks: no warning any more (modelled).
  const MegatronScenario full =
      load(base + "--bf16 --recompute-granularity full --recompute-method uniform --recompute-num-layers 2 "
                  "--decoder-first-pipeline-num-layers 1",
           4);
  CHECK(full.scenario->recompute.num_layers == 2);
  CHECK(full.warnings.empty());

  // FP8: --fp8-format hybrid (or e4m3) on an H100; written back as hybrid.
  const std::string h100 =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 1 --bf16 ";
  const MegatronScenario fp8 = load(h100 + "--fp8-format hybrid", 1, "dgx-h100-80gb");
  CHECK(fp8.scenario->model.gemm_precision == GemmPrecision::kFp8);
  CHECK(load(h100 + "--fp8-format e4m3", 1, "dgx-h100-80gb").scenario->model.gemm_precision == GemmPrecision::kFp8);
  const std::string fp8_args = scenario_to_megatron_args(fp8.scenario.scenario());
  CHECK(fp8_args.find("--fp8-format hybrid") != std::string::npos);
  CHECK(content_of(load(fp8_args, 1, "dgx-h100-80gb").scenario.scenario()) == content_of(fp8.scenario.scenario()));
  CHECK(load(h100, 1, "dgx-h100-80gb").scenario->model.gemm_precision == GemmPrecision::kBf16);
  CHECK(scenario_to_megatron_args(load(h100, 1, "dgx-h100-80gb").scenario.scenario()).find("--fp8") == std::string::npos);
  CHECK(error_of([&] { load(h100 + "--fp8-format e5m2", 1, "dgx-h100-80gb"); })
            .find("--fp8-format e5m2: expected hybrid or e4m3") != std::string::npos);
  CHECK(error_of([&] { load(h100 + "--fp8-format hybrid", 1); })
            .find("model.gemm_precision fp8 needs FP8 tensor cores, and hardware profile 'dgx-a100-80gb'") !=
        std::string::npos);
}

TEST_CASE("Megatron-LM's no-fusion flags map to the model's fusion keys and are written back") {
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
      "--max-position-embeddings 1024 --micro-batch-size 1 --bf16 ";
  // Default: every fusion on, and nothing printed for them.
  const MegatronScenario fused = load(base, 1);
  CHECK(fused.scenario->model.gradient_accumulation_fusion);
  CHECK(fused.scenario->model.bias_gelu_fusion);
  CHECK(fused.scenario->model.bias_dropout_fusion);
  CHECK(fused.scenario->model.masked_softmax_fusion);
  CHECK(scenario_to_megatron_args(fused.scenario.scenario()).find("fusion") == std::string::npos);
  const std::vector<std::pair<std::string, bool ModelSpec::*>> flags = {
      {"--no-gradient-accumulation-fusion", &ModelSpec::gradient_accumulation_fusion},
      {"--no-bias-gelu-fusion", &ModelSpec::bias_gelu_fusion},
      {"--no-bias-dropout-fusion", &ModelSpec::bias_dropout_fusion},
      {"--no-masked-softmax-fusion", &ModelSpec::masked_softmax_fusion}};
  std::string all = base;
  for (const auto& [flag, member] : flags) {
    INFO(flag);
    const MegatronScenario one = load(base + flag, 1);
    CHECK_FALSE(one.scenario->model.*member);
    for (const auto& [other, other_member] : flags)
      if (other != flag) CHECK(one.scenario->model.*other_member);
    CHECK(one.warnings.empty());  // read, not listed as ignored
    const std::string out = scenario_to_megatron_args(one.scenario.scenario());
    CHECK(out.find(flag) != std::string::npos);
    CHECK(content_of(load(out, 1).scenario.scenario()) == content_of(one.scenario.scenario()));
    all += flag + " ";
  }
  // All four: args -> scenario -> args gives the same options.
  const MegatronScenario none = load(all, 1);
  CHECK(option_set(scenario_to_megatron_args(none.scenario.scenario())) ==
        option_set(scenario_to_megatron_args(load(scenario_to_megatron_args(none.scenario.scenario()), 1).scenario.scenario())));
  for (const auto& [flag, member] : flags) CHECK(scenario_to_megatron_args(none.scenario.scenario()).find(flag) != std::string::npos);
}


TEST_CASE("--context-parallel-size maps to parallel.cp (p2p only), sizes the replica and round-trips") {
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 8192 "
      "--max-position-embeddings 8192 --micro-batch-size 1 --tensor-model-parallel-size 2 "
      "--pipeline-model-parallel-size 2 --bf16 --use-flash-attn ";
  // 16 GPUs: a replica is tp 2 × cp 2 × pp 2 = 8 GPUs, so dp 2.
  const MegatronScenario cp = load(base + "--context-parallel-size 2", 16);
  CHECK(cp.scenario->parallel.cp == 2);
  CHECK(cp.scenario->parallel.dp == 2);
  const std::string out = scenario_to_megatron_args(cp.scenario.scenario());
  CHECK(out.find("--context-parallel-size 2") != std::string::npos);
  CHECK(out.find("--cp-comm-type p2p") != std::string::npos);
  CHECK(content_of(load(out, 16).scenario.scenario()) == content_of(cp.scenario.scenario()));
  // p2p is Megatron-Core's default and the one modelled; the others are refused by name.
  CHECK(load(base + "--context-parallel-size 2 --cp-comm-type p2p", 16).scenario->parallel.cp == 2);
  for (const char* kind : {"a2a", "allgather", "a2a+p2p"}) {
    CAPTURE(kind);
    const std::string e = error_of([&] { load(base + "--context-parallel-size 2 --cp-comm-type " + kind, 16); });
    CHECK(e.find(std::string("--cp-comm-type ") + kind) != std::string::npos);
    CHECK(e.find("not modelled by lynxsim yet") != std::string::npos);
    CHECK(e.find("p2p") != std::string::npos);
  }
  // GPUs that do not hold whole replicas of tp × cp × pp.
  CHECK(error_of([&] { load(base + "--context-parallel-size 2", 12); }).find("not divisible by") != std::string::npos);
  // cp 1 writes no context-parallel argument.
  CHECK(scenario_to_megatron_args(load(base, 8).scenario.scenario()).find("context-parallel") == std::string::npos);
}

}  // namespace lynx::megatron
