// End-to-end checks of context parallelism (parallel.cp): the simulated memory tracker holds
// exactly 1/cp of a layer's activations per GPU, a slower ring costs time only where it is
// exposed, and the Llama 3.1 70B example runs in exact and fast mode.
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"
#include "tests/runner/small_gpt.hpp"
#include "scenarios/scenario_loader.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

using namespace lynx;
using namespace lynx::runner;

namespace {

/// tests/runner/small_gpt.hpp's GPT with flash attention at seq 4096, micro-batch 1, tp `tp`
/// (with SP), cp `cp`.
Scenario small_gpt(int layers, int tp, int cp, RecomputeKind strategy) {
  Scenario sc = test::small_gpt(layers, tp, tp > 1, strategy);
  sc.model.seq_len = 4096;
  sc.model.flash_attention = true;
  sc.parallel.cp = cp;
  sc.parallel.micro_batch = 1;
  return sc;
}

SimResult run_scenario(const Scenario& sc) { return simulate(model::resolve_scenario(sc, "small_gpt")).result; }

/// peak(2 layers) − peak(1 layer), static memory removed, from the executor's tracker.
std::int64_t layer_activation_bytes(int cp) {
  std::int64_t act[2];
  for (int layers = 1; layers <= 2; ++layers) {
    const SimResult r = run_scenario(small_gpt(layers, 2, cp, RecomputeKind::kNone));
    act[layers - 1] = r.stages[0].peak_memory_bytes - r.stages[0].static_memory_bytes;
  }
  return act[1] - act[0];
}

}  // namespace

TEST_CASE("context parallelism: a layer's simulated activation memory per GPU is the hand count / cp") {
  // Korthikanti with SP and flash attention: s·b·h·34/t + 4·(a/t)·s·b, on s/cp tokens.
  const std::int64_t s = 4096, b = 1, h = 1024, a = 16, t = 2;
  for (std::int64_t cp : {1, 2, 4}) {
    CAPTURE(cp);
    CHECK(layer_activation_bytes(static_cast<int>(cp)) == (34 * (s / cp) * b * h + 4 * a * (s / cp) * b) / t);
  }
}

TEST_CASE("context parallelism: the ring's transfers cost time only when the link is too slow to hide them") {
  // tp 1: the ring is the only traffic on NVLink inside an iteration's layers.
  Scenario fast_link = small_gpt(2, 1, 2, RecomputeKind::kNone);
  Scenario slow_link = fast_link;
  // A key/value block: K and V of 2048 tokens × 1024 (16 heads × 64) × 2 bytes = 8 MiB.
  slow_link.hardware.nvlink.bw_bytes_per_s /= 1000;  // 0.3 GB/s: about 28 ms per ring step
  const SimResult fast = run_scenario(fast_link), slow = run_scenario(slow_link);
  CHECK(slow.stages[0].tp_exposed_s > 0.01);
  CHECK(slow.iteration_time_s > fast.iteration_time_s + 0.9 * slow.stages[0].tp_exposed_s);
  // At 300 GB/s a block moves in about 28 us, behind its attention block (17 GFLOP, about 60 us
  // on an A100): only the last gradient's trip home per layer stays exposed.
  CHECK(fast.stages[0].tp_exposed_s < 0.02 * fast.iteration_time_s);
}

TEST_CASE("the Llama 3.1 70B context-parallel example runs in exact and fast mode, within 1%") {
  const std::string path = std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/examples/llama3.1-70b-cp.yaml";
  const model::ResolvedScenario exact = model::load_scenario_file(path, {"recompute.strategy=full"});
  REQUIRE(exact->parallel.cp == 2);
  const SimResult e = simulate(exact).result;
  const SimResult f = simulate(model::load_scenario_file(path, {"recompute.strategy=full", "sim.mode=fast"})).result;
  CHECK(e.gpus == 32);
  CHECK(std::abs(f.iteration_time_s / e.iteration_time_s - 1) <= 0.01);
  CHECK(!e.oom);
}
