// The one-GPU stand-in for communication (sim.comm_standin): the simulator's side (one GPU,
// each TP collective as device->host and host->device copies of the bytes the rank sends) and
// the op stream live mode derives from it.
#include "live/dry_run.hpp"
#include "live/op_stream.hpp"
#include "model/resolved_scenario.hpp"
#include "runner/plan_file.hpp"
#include "runner/simulate.hpp"
#include "strategies/plan_yaml.hpp"
#include "tests/error_of.hpp"
#include "tests/live/live_small.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <sstream>
#include <vector>

namespace lynx::live {
namespace {

runner::SimRun standin_run(const std::string& strategy, const std::string& bw, int pp = 1,
                           std::vector<std::string> extra = {}) {
  extra.push_back("sim.comm_standin.bw=" + bw);
  extra.push_back("sim.comm_standin.latency=10us");
  return test::simulate_kept(test::small_scenario(strategy, 2, pp, 1, extra));
}

}  // namespace

TEST_CASE("stand-in: one GPU, every TP collective as two copies of the bytes it sends") {
  const runner::SimRun run = standin_run("none", "20GB/s");
  const sim::Program& program = run.built.program;
  REQUIRE(run.built.machine.gpus.size() == 1);
  const auto& links = run.built.machine.links;
  REQUIRE(links.size() >= 2);
  const auto d2h = static_cast<sim::LinkId>(links.size() - 2);
  CHECK(links[static_cast<std::size_t>(d2h)].name == "standin.device->host");
  CHECK(links.back().name == "standin.host->device");
  CHECK(links.back().bw_bytes_per_s == 20'000'000'000ULL);
  CHECK(links.back().latency_ps == 10'000'000);
  std::size_t to_host = 0, to_device = 0;
  for (std::size_t i = 0; i < program.tasks.size(); ++i) {
    const sim::Task& t = program.tasks[i];
    if (t.kind != sim::TaskKind::kComm) continue;
    REQUIRE(t.num_flows == 1);
    const sim::Flow& f = program.flows[t.first_flow];
    REQUIRE(f.num_links == 1);
    const sim::LinkId link = program.path_links[f.first_link];
    if (link == d2h) {
      ++to_host;
      // The host-to-device leg follows on the same stream with the same bytes.
      const sim::Task& next = program.tasks[i + 1];
      CHECK(next.stream == t.stream);
      CHECK(program.path_links[program.flows[next.first_flow].first_link] == d2h + 1);
      CHECK(program.flows[next.first_flow].bytes == f.bytes);
    } else {
      CHECK(link == d2h + 1);
      ++to_device;
    }
    // A 2-rank ring all-reduce of S = 2·s·b·h sends 2(n−1)/n·S = S per rank.
    if (program.names[t.name] == "tp_allreduce_attn") CHECK(f.bytes == 2u * 128 * 256);
  }
  CHECK(to_host > 0);
  CHECK(to_host == to_device);
  // A slower emulated link: a longer iteration.
  const runner::SimRun slow = standin_run("none", "2GB/s");
  CHECK(slow.result.iteration_time_s > run.result.iteration_time_s);
}

TEST_CASE("stand-in: needs pp = dp = 1") {
  const std::string error = lynx::test::error_of([] { (void)standin_run("none", "20GB/s", 2); });
  CHECK(error.find("sim.comm_standin.bw: the one-GPU stand-in for communication needs pp = 1 and dp = 1, got pp 2") !=
        std::string::npos);
}

TEST_CASE("stand-in: Lynx overlaps recomputation with the copies, and live mode runs them as copies") {
  // Memory for the static bytes and three quarters of the activations kept by a
  // keep-everything run; a slow emulated link leaves windows to recompute in.
  const runner::SimResult keep = standin_run("none", "0.2GB/s").result;
  const std::int64_t static_bytes = keep.stages[0].static_memory_bytes;
  const std::int64_t budget = static_bytes + (keep.stages[0].peak_memory_bytes - static_bytes) * 3 / 4;
  const runner::SimRun run =
      standin_run("lynx-heu", "0.2GB/s", 1, {"hardware.gpu.memory=" + std::to_string(budget) + "B"});
  REQUIRE_FALSE(run.result.oom);
  CHECK(run.result.stages[0].recompute_overlapped_s > 0);
  CHECK(run.result.stages[0].recompute_s == 0);
  const strategies::PlanFile plan = test::plan_of(run);
  const OpStream ops = build_op_stream(plan, "plan.yaml");
  REQUIRE(ops.gpu_names.size() == 1);
  std::size_t copies = 0;
  for (const LiveOp& op : ops.ops) {
    CHECK(op.launch != LaunchKind::kCollective);
    if (op.launch != LaunchKind::kStandinCopy) continue;
    ++copies;
    CHECK(ops.stream_names[static_cast<std::size_t>(op.stream)] == "tp");
    CHECK(op.bytes > 0);
  }
  CHECK(copies > 0);
  std::ostringstream out;
  write_dry_run(out, ops, "plan.yaml");
  CHECK(out.str().find("device->host 64.00 KiB (communication stand-in)") != std::string::npos);
}

}  // namespace lynx::live
