// Megatron-LM's fusion switches end to end: on a GPU-bound run (datasheet profile, no host
// model) each switch off makes the iteration strictly slower; on Llama the bias fusions change
// nothing; with the host model on, the extra kernels cost host time too.
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// GPT (s 1024, b 4, h 1024, 16 heads, 4 layers) at tp 2, pp 2 on one DGX A100 node, `extra`
/// appended to the model block.
double iteration_s(const std::string& model, const std::string& extra, const std::string& hardware = "") {
  const std::string text = fmt::format(
      "model: {{{}{}}}\n"
      "parallel: {{tp: 2, pp: 2, micro_batch: 4, global_batch: 16}}\n"
      "recompute: {{strategy: none}}\nhardware: {{profile: dgx-a100-80gb{}}}\n",
      model, extra, hardware);
  const model::ResolvedScenario sc = model::resolve_scenario(model::load_scenario_text(text, "fusions").scenario(), "fusions");
  return simulate(sc).result.iteration_time_s;
}

const std::string kGpt = "layers: 4, hidden: 1024, heads: 16, seq_len: 1024, vocab: 51200";
const std::string kLlama = "preset: llama2-7b, layers: 4, seq_len: 1024";

}  // namespace

TEST_CASE("fusion runs: each switch off makes a GPU-bound GPT iteration strictly slower") {
  const double fused = iteration_s(kGpt, "");
  for (const char* key : {"gradient_accumulation_fusion", "bias_gelu_fusion", "bias_dropout_fusion",
                          "masked_softmax_fusion"}) {
    INFO(key);
    CHECK(iteration_s(kGpt, fmt::format(", {}: false", key)) > fused);
  }
  // The defaults are the fused path, spelled out or not.
  CHECK(iteration_s(kGpt, ", gradient_accumulation_fusion: true, bias_gelu_fusion: true, "
                          "bias_dropout_fusion: true, masked_softmax_fusion: true") == fused);
}

TEST_CASE("fusion runs: on Llama the bias fusions change nothing, gradient accumulation does") {
  const double fused = iteration_s(kLlama, "");
  CHECK(iteration_s(kLlama, ", bias_gelu_fusion: false, bias_dropout_fusion: false") == fused);
  CHECK(iteration_s(kLlama, ", gradient_accumulation_fusion: false") > fused);
}

TEST_CASE("fusion runs: with the host model on, a host-bound run pays the unfused kernels' launches") {
  // 1 ms per kernel (assumed, far above any GPU kernel here): the host issues the iteration.
  const std::string host = ", gpu: {host_kernel: 1ms}";
  const double fused = iteration_s(kGpt, "", host);
  const double unfused = iteration_s(kGpt, ", bias_dropout_fusion: false", host);
  // Two more forward kernels at each of the two sites of the 2 layers per stage, 4 micro-batches
  // (recompute none: each forward once): 32 ms more on each stage's host; the iteration grows
  // by at least half of that wherever the stages' host work overlaps.
  CHECK(unfused - fused > 0.016);
}
