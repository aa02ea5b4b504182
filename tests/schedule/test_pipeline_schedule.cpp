// Pipeline schedules: step order unit checks, and exact bubble / memory figures from running
// the built programs on the executor with synthetic equal-time stages and free communication.
#include "hw_models/topology.hpp"
#include "sim/executor.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "schedule/program_builder.hpp"
#include "tests/schedule/synthetic.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace lynx;
using namespace lynx::schedule;
using lynx::strategies::plan_fixed_strategy;
using lynx::strategies::uniform_partition;

TEST_CASE("1F1B step order: warm-up p-k-1 forwards, then alternate, then cool-down") {
  const auto order = pipeline_order(ScheduleKind::kOneFOneB, 4, 6, 1);
  REQUIRE(order.size() == 4);
  // Stage 0 of 4: 3 warm-up forwards, then F3 B0 F4 B1 F5 B2, then B3 B4 B5.
  const std::vector<std::pair<bool, int>> expected = {{true, 0},  {true, 1},  {true, 2},
                                                      {true, 3},  {false, 0}, {true, 4},
                                                      {false, 1}, {true, 5},  {false, 2},
                                                      {false, 3}, {false, 4}, {false, 5}};
  REQUIRE(order[0].size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(order[0][i].forward == expected[i].first);
    CHECK(order[0][i].micro_batch == expected[i].second);
  }
  // The last stage alternates from the start.
  CHECK(order[3][0].forward);
  CHECK_FALSE(order[3][1].forward);
}

TEST_CASE("every schedule runs each (micro-batch, chunk) forward and backward exactly once") {
  for (auto kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    const int v = kind == ScheduleKind::kInterleaved ? 3 : 1;
    const auto order = pipeline_order(kind, 4, 8, v);
    for (const auto& steps : order) {
      std::vector<int> fwd(8 * 3, 0), bwd(8 * 3, 0);
      for (const auto& s : steps) (s.forward ? fwd : bwd)[static_cast<size_t>(s.micro_batch * 3 + s.chunk)]++;
      for (int mb = 0; mb < 8; ++mb)
        for (int c = 0; c < 3; ++c) {
          CHECK(fwd[static_cast<size_t>(mb * 3 + c)] == (c < v ? 1 : 0));
          CHECK(bwd[static_cast<size_t>(mb * 3 + c)] == (c < v ? 1 : 0));
        }
    }
  }
}

TEST_CASE("interleaving needs micro-batches divisible by stages, chunks need interleaving") {
  CHECK_THROWS_WITH_AS(pipeline_order(ScheduleKind::kInterleaved, 4, 6, 2),
                       doctest::Contains("multiple of parallel.pp"), Error);
  CHECK_THROWS_WITH_AS(pipeline_order(ScheduleKind::kOneFOneB, 4, 8, 2),
                       doctest::Contains("interleaved"), Error);
}

namespace {

/// Runs the synthetic pipeline (forward 1 us, backward 2 us per layer, free communication)
/// and returns (iteration time, peak bytes above static per stage).
struct PipeRun {
  TimePs iteration_ps;
  std::vector<std::int64_t> activation_peak;
};

PipeRun run_pipeline(ScheduleKind kind, int p, int m, int v) {
  Scenario sc = test::synthetic_scenario(p, m, v, kind);
  const hw_models::Topology topo(sc.hardware);
  const auto plan = plan_fixed_strategy(sc.recompute,
                                        uniform_partition(sc.model.layers, p * v));
  const auto built = build_program(sc, plan, topo, test::synthetic_workload());
  const auto exec = sim::execute(built.machine, built.program);
  PipeRun r{exec.makespan_ps, {}};
  for (size_t g = 0; g < exec.peak_bytes.size(); ++g)
    r.activation_peak.push_back(exec.peak_bytes[g] - built.program.static_bytes_per_gpu[g]);
  return r;
}

}  // namespace

TEST_CASE("1F1B bubble is (p-1)/m exactly with equal stages and free communication") {
  for (auto [p, m] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 8}}) {
    const PipeRun r = run_pipeline(ScheduleKind::kOneFOneB, p, m, 1);
    // Ideal time: m micro-batches × (1 us forward + 2 us backward) on one layer per stage.
    const TimePs ideal = m * (test::kForwardPs + test::kBackwardPs);
    CHECK(r.iteration_ps - ideal == (p - 1) * (test::kForwardPs + test::kBackwardPs));
    CHECK(static_cast<double>(r.iteration_ps - ideal) / static_cast<double>(ideal) ==
          doctest::Approx(static_cast<double>(p - 1) / m));
  }
}

TEST_CASE("interleaved 1F1B bubble is (p-1)/(m·v)") {
  for (auto [p, m, v] : {std::tuple{2, 4, 2}, std::tuple{4, 8, 2}, std::tuple{4, 8, 4}}) {
    const PipeRun r = run_pipeline(ScheduleKind::kInterleaved, p, m, v);
    // Each chunk holds one layer: per micro-batch a stage does v·(1 + 2) us of work.
    const TimePs ideal = static_cast<TimePs>(m) * v * (test::kForwardPs + test::kBackwardPs);
    CHECK(r.iteration_ps - ideal == (p - 1) * (test::kForwardPs + test::kBackwardPs));
    CHECK(static_cast<double>(r.iteration_ps - ideal) / static_cast<double>(ideal) ==
          doctest::Approx(static_cast<double>(p - 1) / (m * v)));
  }
}

TEST_CASE("GPipe holds m micro-batches of activations, 1F1B at most p-k on stage k") {
  const int p = 4, m = 8;
  const PipeRun gpipe = run_pipeline(ScheduleKind::kGpipe, p, m, 1);
  const PipeRun ofob = run_pipeline(ScheduleKind::kOneFOneB, p, m, 1);
  for (int k = 0; k < p; ++k) {
    CHECK(gpipe.activation_peak[static_cast<size_t>(k)] == m * test::kSavedBytes);
    CHECK(ofob.activation_peak[static_cast<size_t>(k)] == (p - k) * test::kSavedBytes);
    CHECK(max_in_flight_micro_batches(ScheduleKind::kOneFOneB, p, k, m, 1) == p - k);
  }
  // GPipe's bubble equals 1F1B's: (p-1)/m.
  CHECK(gpipe.iteration_ps == ofob.iteration_ps);
}

// ----- ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024) -----

TEST_CASE("ZB-H1 order: every F, B and W once, B after F, W after B, p between F and W") {
  for (auto [p, m] : {std::pair{2, 2}, std::pair{4, 3}, std::pair{4, 8}, std::pair{8, 16}}) {
    CAPTURE(p);
    CAPTURE(m);
    const auto order = pipeline_order(ScheduleKind::kZbH1, p, m, 1);
    for (int k = 0; k < p; ++k) {
      CAPTURE(k);
      std::vector<int> f(static_cast<size_t>(m), -1), b(f), w(f);
      int in_flight = 0, most_in_flight = 0, weight_pending_at_peak = 0;
      int pending_weights = 0;
      const auto& steps = order[static_cast<size_t>(k)];
      for (size_t i = 0; i < steps.size(); ++i) {
        const PipeStep& s = steps[i];
        CHECK(s.chunk == 0);
        auto& seen = s.forward ? f : s.weight ? w : b;
        CHECK(seen[static_cast<size_t>(s.micro_batch)] == -1);
        seen[static_cast<size_t>(s.micro_batch)] = static_cast<int>(i);
        if (s.forward) ++in_flight;
        if (s.backward()) {
          CHECK(f[static_cast<size_t>(s.micro_batch)] >= 0);
          --in_flight;
          ++pending_weights;
        }
        if (s.weight) {
          CHECK(b[static_cast<size_t>(s.micro_batch)] >= 0);
          --pending_weights;
        }
        // Micro-batches between F and W: at most p on every stage (1F1B's stage-0 count).
        CHECK(in_flight + pending_weights <= p);
        if (in_flight > most_in_flight) {
          most_in_flight = in_flight;
          weight_pending_at_peak = pending_weights;
        } else if (in_flight == most_in_flight) {
          weight_pending_at_peak = std::max(weight_pending_at_peak, pending_weights);
        }
      }
      for (int mb = 0; mb < m; ++mb) {
        CHECK(f[static_cast<size_t>(mb)] >= 0);
        CHECK(b[static_cast<size_t>(mb)] >= 0);
        CHECK(w[static_cast<size_t>(mb)] >= 0);
      }
      // F and B in 1F1B's order (the W steps removed, it is 1F1B).
      const auto ofob = pipeline_order(ScheduleKind::kOneFOneB, p, m, 1)[static_cast<size_t>(k)];
      std::vector<PipeStep> without_w;
      for (const PipeStep& s : steps)
        if (!s.weight) without_w.push_back(s);
      REQUIRE(without_w.size() == ofob.size());
      for (size_t i = 0; i < ofob.size(); ++i) {
        CHECK(without_w[i].forward == ofob[i].forward);
        CHECK(without_w[i].micro_batch == ofob[i].micro_batch);
      }
      CHECK(most_in_flight == max_in_flight_micro_batches(ScheduleKind::kZbH1, p, k, m, 1));
      CHECK(weight_pending_at_peak == weight_pending_micro_batches(ScheduleKind::kZbH1, p, k, m));
    }
  }
  CHECK(weight_pending_micro_batches(ScheduleKind::kOneFOneB, 4, 3, 8) == 0);
}

TEST_CASE("ZB-H1 bubble is (p-1)(T_F+T_B-T_W), a third of 1F1B's (p-1)(T_F+T_B+T_W), on the engine") {
  // The synthetic layer: T_F = T_B (dgrad) = T_W (wgrad) = 1 us, free communication (Qi et
  // al. 2024, Table 4's assumptions).
  const TimePs t = test::kForwardPs;
  for (auto [p, m] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 8}, std::pair{8, 24}}) {
    CAPTURE(p);
    CAPTURE(m);
    const TimePs ideal = m * 3 * t;
    const PipeRun zb = run_pipeline(ScheduleKind::kZbH1, p, m, 1);
    const PipeRun ofob = run_pipeline(ScheduleKind::kOneFOneB, p, m, 1);
    CHECK(zb.iteration_ps - ideal == (p - 1) * (t + t - t));
    CHECK(ofob.iteration_ps - ideal == (p - 1) * (t + t + t));
  }
}

namespace {

/// The synthetic layer with a weight GEMM that saves its input and output (only the input
/// matters for W) and has an output gradient of `output_bytes`.
model::Workload weight_pass_workload(std::int64_t input_bytes, std::int64_t output_bytes) {
  model::Workload w = test::synthetic_workload();
  model::Op& gemm = w.layer[0];
  gemm.saves = model::Saves::kInputAndOutput;
  gemm.gemm_m = output_bytes / 2;  // bf16: output_bytes / 2 elements
  gemm.gemm_n = 1;
  gemm.saved_bytes = static_cast<std::uint64_t>(input_bytes + output_bytes);
  return w;
}

}  // namespace

TEST_CASE("ZB-H1 memory: activations until B, the weight GEMM's input and output gradient until W") {
  const std::int64_t input = 600'000, output = 400'000, saved = input + output;
  const model::Workload w = weight_pass_workload(input, output);
  const WeightPassBytes held = weight_pass_bytes(w.layer[0]);
  CHECK(held.input == input);
  CHECK(held.output_grad == output);
  for (auto [p, m] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 3}}) {
    CAPTURE(p);
    CAPTURE(m);
    Scenario sc = test::synthetic_scenario(p, m, 1, ScheduleKind::kZbH1);
    const hw_models::Topology topo(sc.hardware);
    const auto plan = plan_fixed_strategy(sc.recompute, uniform_partition(sc.model.layers, p));
    const auto built = build_program(sc, plan, topo, w);
    const auto exec = sim::execute(built.machine, built.program);
    const auto order = pipeline_order(ScheduleKind::kZbH1, p, m, 1);
    for (int k = 0; k < p; ++k) {
      CAPTURE(k);
      // One layer per stage, memory effects on the compute stream only: the expected peak walks
      // the step order. F allocates the saved tensors; B allocates the output gradient at its
      // start and frees what W does not need at its end; W frees the rest.
      std::int64_t level = 0, peak = 0;
      for (const PipeStep& s : order[static_cast<size_t>(k)]) {
        if (s.forward) {
          level += saved;
        } else if (s.weight) {
          level -= input + output;
        } else {
          level += output;
          peak = std::max(peak, level);
          level -= saved - input;
        }
        peak = std::max(peak, level);
      }
      CHECK(level == 0);
      CHECK(exec.peak_bytes[static_cast<size_t>(k)] - built.program.static_bytes_per_gpu[static_cast<size_t>(k)] == peak);
    }
  }
}

TEST_CASE("ZB-H1 weight-pass bytes of a GPT layer are Qi et al.'s 32·s·b·h (Table 1), 8sbh + 24sbh/t with tp") {
  ModelSpec m;
  m.layers = 2;
  m.hidden = 1024;
  m.heads = 16;
  m.ffn_hidden = 4096;
  m.seq_len = 2048;
  m.vocab = 51200;
  for (int t : {1, 2, 4}) {
    CAPTURE(t);
    ParallelSpec par;
    par.tp = t;
    par.micro_batch = 2;
    par.global_batch = 2;
    std::int64_t total = 0;
    for (const model::Op& op : model::layer_ops(m, par)) total += weight_pass_bytes(op).total();
    const std::int64_t sbh = std::int64_t{m.seq_len} * par.micro_batch * m.hidden;
    CHECK(total == 8 * sbh + 24 * sbh / t);
  }
}

TEST_CASE("the fast-forward hint is 1F1B's only: ZB-H1 programs get none (sim.fast_forward is off)") {
  Scenario sc = test::synthetic_scenario(4, 12, 1, ScheduleKind::kZbH1);
  const hw_models::Topology topo(sc.hardware);
  const auto plan = plan_fixed_strategy(sc.recompute, uniform_partition(sc.model.layers, 4));
  const auto built = build_program(sc, plan, topo, test::synthetic_workload());
  for (const sim::TaskId period : built.program.period_tasks_per_gpu) CHECK(period == 0);
  sc.parallel.schedule = ScheduleKind::kOneFOneB;
  const auto ofob = build_program(sc, plan, topo, test::synthetic_workload());
  CHECK(ofob.program.period_tasks_per_gpu[0] > 0);
}
