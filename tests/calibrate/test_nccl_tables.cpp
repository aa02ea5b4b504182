// The built-in DGX A100 profile against measured NCCL all-reduce tables (nccl-tests on 2-8
// GPUs of one 8x A100-SXM node, validate/data/nccl/README.md): every row predicted by the
// collective model as the engine runs it, on an idle node.
#include "calibrate/fitter.hpp"
#include "calibrate/raw_csv.hpp"
#include "hw_models/collectives.hpp"
#include "hw_models/topology.hpp"
#include "scenarios/scenario_loader.hpp"
#include "tests/common/engine_collective.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <string>
#include <vector>

using namespace lynx;

namespace {

const std::string kTables = std::string(LYNXSIM_SOURCE_DIR) + "/validate/data/nccl/a100-vtrain-all-reduce.csv";

struct RowError {
  int ranks = 0;
  std::uint64_t bytes = 0;
  double measured_us = 0, predicted_us = 0;
  double error() const { return (predicted_us - measured_us) / measured_us; }
};

/// Each table row's all-reduce on the first `ranks` GPUs of one node of `hw`, timed by the engine.
std::vector<RowError> predict(const HardwareSpec& hw, const calibrate::RawMeasurements& raw) {
  HardwareSpec one_node = hw;
  one_node.nodes = 1;
  const hw_models::Topology topo(one_node);
  std::vector<RowError> out;
  for (const calibrate::Measurement& row : raw.rows) {
    std::vector<hw_models::Rank> ranks;
    for (int r = 0; r < row.ranks; ++r) ranks.push_back(r);
    const auto phases = hw_models::plan_collective(topo, one_node, hw_models::Collective::kAllReduce,
                                                   hw_models::Algorithm::kRing, ranks, row.bytes);
    const TimePs engine_ps = test::engine_collective_ps(topo, phases, ranks);
    CHECK(engine_ps == hw_models::idle_collective_time_ps(topo, phases));  // idle links: the planner's estimate is exact
    out.push_back({row.ranks, row.bytes, row.time_us_median, static_cast<double>(engine_ps) / 1e6});
  }
  return out;
}

}  // namespace

TEST_CASE("DGX A100 profile: NCCL all-reduce tables (2-8 GPUs, 1 MiB-1 GiB), every row") {
  const calibrate::RawMeasurements raw = calibrate::read_raw_csv(kTables);
  REQUIRE(raw.rows.size() == 7 * 20);
  const std::vector<RowError> rows = predict(builtin_hardware_profile("dgx-a100-80gb"), raw);
  std::map<int, std::vector<const RowError*>> by_n;
  for (const RowError& r : rows) by_n[r.ranks].push_back(&r);
  for (const auto& [n, group] : by_n) {
    double sum = 0;
    const RowError* worst = group.front();
    for (const RowError* r : group) {
      sum += std::fabs(r->error());
      if (std::fabs(r->error()) > std::fabs(worst->error())) worst = r;
    }
    const double mape = sum / static_cast<double>(group.size());
    MESSAGE(fmt::format("n={}: MAPE {:.2f}%, worst {:+.1f}% at {} MiB ({:.1f} us measured, {:.1f} predicted)", n,
                        100 * mape, 100 * worst->error(), worst->bytes >> 20, worst->measured_us, worst->predicted_us));
    CHECK(mape < 0.10);
  }
  // The rows (GPUs, MiB) the model misses by more than 10%, each held to 25% instead. Most are
  // at 1-4 MiB, where no model in which more GPUs never make the same all-reduce faster can
  // meet 10%: the tables have 3 GPUs slower than 4 (2 MiB: 70.8 vs 55.7 us, and
  // 0.9 x 70.8 > 1.1 x 55.7); 8 GPUs are flat at 93 us from 1 to 5 MiB, which no line whose
  // slope is the NVLink rate or slower meets. The 12-16 MiB rows sit below the step at
  // 3n MiB (the tables' time jumps at multiples of 3n MiB, NCCL's rounds) that the model has
  // no term for. A listed row that meets 10% fails the test: the list only shrinks.
  const std::set<std::pair<int, int>> known_misses{{3, 1}, {3, 2}, {3, 3}, {4, 1}, {4, 2}, {4, 3},
                                                   {5, 2}, {5, 3}, {6, 1}, {6, 3}, {6, 12}, {7, 1},
                                                   {7, 4}, {7, 16}, {8, 1}, {8, 2}, {8, 16}};
  for (const RowError& r : rows) {
    CAPTURE(r.ranks);
    CAPTURE(r.bytes);
    CAPTURE(r.measured_us);
    CAPTURE(r.predicted_us);
    const bool listed = known_misses.count({r.ranks, static_cast<int>(r.bytes >> 20)}) > 0;
    CHECK(std::fabs(r.error()) <= (listed ? 0.25 : 0.10));
    if (listed) CHECK(std::fabs(r.error()) > 0.10);
  }
}

TEST_CASE("lynxsim fit recovers the DGX A100 collective parameters from the NCCL tables") {
  const calibrate::RawMeasurements raw = calibrate::read_raw_csv(kTables);
  const HardwareSpec base = builtin_hardware_profile("dgx-a100-80gb");
  calibrate::FitReport report;
  const HardwareSpec fitted = calibrate::fit_profile(raw, base, &report);
  const auto near = [](double a, double b, double rel) { return std::fabs(a - b) <= rel * std::fabs(b); };
  // The profile's values are this fit's, rounded (hw_models/profiles/dgx-a100-80gb.yaml).
  CHECK(near(static_cast<double>(fitted.nvlink.bw_bytes_per_s), static_cast<double>(base.nvlink.bw_bytes_per_s), 0.02));
  CHECK(near(static_cast<double>(fitted.nccl.buffer_bw_bytes_per_s), static_cast<double>(base.nccl.buffer_bw_bytes_per_s), 0.02));
  CHECK(near(static_cast<double>(fitted.nccl.simple.base_ps), static_cast<double>(base.nccl.simple.base_ps), 0.02));
  CHECK(near(static_cast<double>(fitted.nccl.simple.step_nvlink_ps), static_cast<double>(base.nccl.simple.step_nvlink_ps), 0.02));
  CHECK(near(static_cast<double>(fitted.nccl.ll128.base_ps), static_cast<double>(base.nccl.ll128.base_ps), 0.02));
  CHECK(near(static_cast<double>(fitted.nccl.ll128.step_nvlink_ps), static_cast<double>(base.nccl.ll128.step_nvlink_ps), 0.02));
  const calibrate::FieldFit* buffer = report.find("nccl.buffer_bw");
  REQUIRE(buffer != nullptr);
  CHECK(buffer->fitted);
}
