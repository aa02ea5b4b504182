// Megatron's communication overlaps on whole scenarios: TP-comm overlap (parallel.tp_comm_overlap)
// with one chunk is today's program; with tp chunks it hides TP communication; the parameter
// all-gather overlapped with the forward (parallel.overlap_param_gather) leaves the optimizer
// step's tail.
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::runner;

namespace {

SimResult run_paper(const std::string& file, std::vector<std::string> overrides) {
  return simulate(model::load_scenario_file(std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/paper/" + file, overrides))
      .result;
}

double tp_exposed_s(const SimResult& r) {
  double sum = 0;
  for (const StageBreakdown& s : r.stages) sum += s.tp_exposed_s;
  return sum;
}

double dp_exposed_s(const SimResult& r) {
  double sum = 0;
  for (const StageBreakdown& s : r.stages) sum += s.dp_exposed_s;
  return sum;
}

}  // namespace

TEST_CASE("tp_comm_overlap with one chunk is the program without it, with tp chunks it hides TP communication") {
  for (const char* file : {"nvlink-gpt-13b.yaml", "pcie-gpt-13b.yaml"}) {
    CAPTURE(file);
    const std::vector<std::string> sp = {"parallel.sequence_parallel=true", "recompute.strategy=full"};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), sp.begin(), sp.end());
      return run_paper(file, more);
    };
    const SimResult off = with({});
    const SimResult one = with({"parallel.tp_comm_overlap=true", "parallel.tp_comm_overlap_chunks=1"});
    CHECK(one.iteration_time_s == off.iteration_time_s);
    CHECK(one.event_fingerprint == off.event_fingerprint);
    const SimResult on = with({"parallel.tp_comm_overlap=true"});
    CHECK(on.iteration_time_s < off.iteration_time_s);
    CHECK(tp_exposed_s(on) < tp_exposed_s(off));
    CHECK(on.executed_flops == doctest::Approx(off.executed_flops).epsilon(1e-12));  // same work, in chunks
  }
}

TEST_CASE("overlap_param_gather moves the distributed optimizer's parameter all-gather beside the forward") {
  // gpt-1.3b on 8 PCIe GPUs, dp 4: the all-gather of 2 bytes per parameter is slow to expose.
  const std::vector<std::string> base = {"parallel.dp=4", "parallel.tp=2", "parallel.pp=1", "parallel.global_batch=32",
                                         "parallel.distributed_optimizer=true", "recompute.strategy=selective"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return run_paper("pcie-gpt-1.3b.yaml", more);
  };
  const SimResult off = with({});
  const SimResult on = with({"parallel.overlap_param_gather=true"});
  CHECK(on.iteration_time_s < off.iteration_time_s);
  CHECK(dp_exposed_s(on) < dp_exposed_s(off));
  CHECK(on.executed_flops == off.executed_flops);
  // Without data parallelism there is nothing to gather: the same program.
  const SimResult alone_off = run_paper("pcie-gpt-1.3b.yaml", {"parallel.dp=1", "parallel.distributed_optimizer=true"});
  const SimResult alone_on = run_paper(
      "pcie-gpt-1.3b.yaml", {"parallel.dp=1", "parallel.distributed_optimizer=true", "parallel.overlap_param_gather=true"});
  CHECK(alone_on.event_fingerprint == alone_off.event_fingerprint);
}
