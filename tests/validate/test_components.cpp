// Per-layer times read from the engine timeline (runner::layer_times), the per-layer columns
// of a measurements CSV, and Korthikanti et al. 2022 Table 4 scored per layer.
#include "common/error.hpp"
#include "hw_models/compute_model.hpp"
#include "model/workload.hpp"
#include "runner/layer_times.hpp"
#include "validate/components.hpp"
#include "validate/validation.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <iostream>
#include <string>

using namespace lynx;
using namespace lynx::validate;

namespace {

/// A 6-layer GPT on one GPU (tp 1, pp 1, dp 1): nothing overlaps a layer's kernels, so a
/// layer's forward is the sum of its kernels' solo times.
runner::SimRun one_gpu_run(const std::string& strategy) {
  const model::ResolvedScenario sc = model::default_scenario(
      {"model.preset=", "model.layers=6", "model.hidden=1024", "model.heads=16", "model.kv_heads=16",
       "model.seq_len=1024", "parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "parallel.micro_batch=2",
       "parallel.global_batch=2", "recompute.strategy=" + strategy});
  runner::SimOptions options;
  options.keep_trace_data = true;
  return runner::simulate(sc, options);
}

}  // namespace

TEST_CASE("a layer's forward on one GPU is the sum of its kernels' solo times") {
  const runner::SimRun run = one_gpu_run("none");
  const runner::LayerTimes t = runner::layer_times(run, 3);
  const model::Workload work = model::gpt_workload(run.result.scenario.model, run.result.scenario.parallel);
  TimePs kernels_ps = 0;
  for (const model::Op& op : work.layer)
    kernels_ps += hw_models::op_times(run.result.scenario.hardware, op).fwd_ps;
  CHECK(kernels_ps > 0);
  CHECK(t.forward_s == doctest::Approx(static_cast<double>(kernels_ps) * 1e-12).epsilon(1e-12));
  CHECK(t.recompute_s == 0);
  CHECK(t.backward_s > t.forward_s);
}

TEST_CASE("full recompute adds the layer's forward to its backward, and says so") {
  const runner::LayerTimes none = runner::layer_times(one_gpu_run("none"), 3);
  const runner::LayerTimes full = runner::layer_times(one_gpu_run("full"), 3);
  CHECK(full.forward_s == doctest::Approx(none.forward_s).epsilon(1e-12));
  CHECK(full.recompute_s == doctest::Approx(none.forward_s).epsilon(1e-12));
  CHECK(full.backward_s == doctest::Approx(none.backward_s + none.forward_s).epsilon(1e-12));
}

TEST_CASE("layer_times refuses the first and last layer of a chunk and a run without a timeline") {
  const runner::SimRun run = one_gpu_run("none");
  CHECK_THROWS_AS(runner::layer_times(run, 0), lynx::Error);
  CHECK_THROWS_AS(runner::layer_times(run, 5), lynx::Error);
  runner::SimRun bare = run;
  bare.exec.task_end_ps.clear();
  CHECK_THROWS_AS(runner::layer_times(bare, 3), lynx::Error);
}

TEST_CASE("per-layer columns: read in pairs, and each kind of scoring asks for its own") {
  const std::string head = "gpus,global_batch,micro_batch,hidden,heads,layers,seq_len,tp,dp,pp,";
  const auto runs = parse_measured_runs(head + "layer_forward_ms,layer_backward_ms\n8,4,4,6144,64,48,2048,8,1,1,7.7,11.9\n",
                                        "t4.csv");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].layer_forward_ms == 7.7);
  CHECK(runs[0].layer_backward_ms == 11.9);
  CHECK(runs[0].iteration_ms == 0);
  CHECK_NOTHROW(require_layer_times(runs, "t4.csv"));
  try {
    require_iteration_times(runs, "t4.csv");
    FAIL("no error");
  } catch (const lynx::Error& e) {
    CHECK(std::string(e.what()).find("t4.csv:2: no measured iteration time") == 0);
    CHECK(std::string(e.what()).find("--components") != std::string::npos);
  }
  try {
    parse_measured_runs(head + "layer_forward_ms\n8,4,4,6144,64,48,2048,8,1,1,7.7\n", "half.csv");
    FAIL("no error");
  } catch (const lynx::Error& e) {
    CHECK(std::string(e.what()).find("half.csv:1: per-layer times come in pairs") == 0);
  }
  const auto timed = parse_measured_runs(head + "iteration_s\n8,4,4,6144,64,48,2048,8,1,1,1.1\n", "t5.csv");
  CHECK_THROWS_AS(require_layer_times(timed, "t5.csv"), lynx::Error);
  CHECK_NOTHROW(require_iteration_times(timed, "t5.csv"));
}

TEST_CASE("Korthikanti et al. 2022 Table 4: one 22B layer per variant on the A100 profile") {
  const std::string csv = LYNXSIM_SOURCE_DIR "/validate/data/korthikanti2022_table4.csv";
  if (!std::filesystem::exists(csv)) {
    std::cout << "LYNXSIM-TEST-SKIPPED: " << csv << " is not in this checkout\n";
    return;
  }
  BaseOptions options;
  // Megatron-LM's settings (the manifest's entry for Korthikanti's Table 5 says why).
  options.overrides = {"model.gradient_accumulation_fusion=true", "parallel.fp32_main_grads=true"};
  const auto rows = simulate_components(validation_base_scenario(options), load_measured_runs(csv), csv);
  REQUIRE(rows.size() == 5);
  write_components_report(std::cout, rows, "Korthikanti Table 4 on dgx-a100-80gb");
  for (const ComponentRow& r : rows) {
    CAPTURE(r.run.line);
    // The aim, 5% per variant (VALIDATION.md: within 1.6% today; the memory-bound efficiency
    // comes from this table's selective increment, the other numbers do not). The structure
    // must hold exactly as the paper measured it:
    CHECK(std::abs(r.forward_error_percent) <= 5.0);
    CHECK(std::abs(r.backward_error_percent) <= 5.0);
  }
  // Full recompute re-runs the layer forward inside the backward; selective only the
  // attention core; sequence parallelism shortens the forward (the paper: 7.7 -> 7.2 ms).
  const double base_bwd = rows[0].predicted.backward_s;
  CHECK(rows[2].predicted.backward_s - base_bwd == doctest::Approx(rows[0].predicted.forward_s).epsilon(0.05));
  CHECK(rows[3].predicted.recompute_s > 0);
  CHECK(rows[3].predicted.recompute_s < 0.25 * rows[0].predicted.forward_s);
  CHECK(rows[1].predicted.forward_s < rows[0].predicted.forward_s);
}
