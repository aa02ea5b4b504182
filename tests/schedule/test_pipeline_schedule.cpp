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

TEST_CASE("interleaving needs micro-batches divisible by stages; chunks need interleaving") {
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
