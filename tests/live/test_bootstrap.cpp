// The bootstrap of a live run over nodes, without a GPU or MPI: which process owns which
// ranks and devices, which communicators each takes part in, who makes each NCCL id and in
// which order; the refusals of a wrong start; the id exchange and the gathering of the
// measurements in one process; a 2-node plan run whole by the host backend and the dry run.
#include "live/bootstrap_plan.hpp"
#include "live/dry_run.hpp"
#include "live/host_backend.hpp"
#include "live/id_exchange.hpp"
#include "live/measured_gather.hpp"
#include "live/op_stream.hpp"
#include "tests/error_of.hpp"
#include "tests/live/live_small.hpp"

#include <doctest/doctest.h>

#include <sstream>

namespace lynx::live {
namespace {

/// live-small at tp 2 x pp 2 x dp 2 over nodes of `gpus_per_node` GPUs.
OpStream eight_gpus(int gpus_per_node, const std::string& strategy = "selective") {
  const int nodes = 8 / gpus_per_node;
  return build_op_stream(test::plan_of(test::simulate_kept(test::small_scenario(
                             strategy, 2, 2, 2,
                             {fmt::format("hardware.nodes={}", nodes), fmt::format("hardware.gpus_per_node={}", gpus_per_node)}))),
                         "plan.yaml");
}

std::vector<std::string> names(const BootstrapPlan& plan) {
  std::vector<std::string> out;
  for (const CommGroup& g : plan.groups) out.push_back(g.name);
  return out;
}

std::vector<int> owners(const BootstrapPlan& plan) {
  std::vector<int> out;
  for (const CommGroup& g : plan.groups) out.push_back(g.owner);
  return out;
}

}  // namespace

TEST_CASE("bootstrap plan: 2 nodes of 4 GPUs, tp 2 x pp 2 x dp 2") {
  const OpStream ops = eight_gpus(4);
  const BootstrapPlan plan = plan_bootstrap(ops);
  REQUIRE(plan.processes == 2);
  // Placed as the simulator places them (global rank pp·(tp·dp) + dp·tp + tp, node = rank / 4).
  CHECK(plan.rank_process == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(plan.rank_device == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(plan.process_ranks == std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  // TP and DP groups inside a node and the tied-embedding pairs of the first and last stage
  // (dp stream, across the nodes), in the op stream's order; then the pipeline pairs across.
  CHECK(names(plan) == std::vector<std::string>{"tp[0,1]", "dp[0,2]", "dp[0,4]", "dp[1,3]", "dp[1,5]", "tp[2,3]",
                                                 "dp[2,6]", "dp[3,7]", "tp[4,5]", "dp[4,6]", "dp[5,7]", "tp[6,7]",
                                                 "pp 0->4", "pp 1->5", "pp 2->6", "pp 3->7", "pp 4->0", "pp 5->1",
                                                 "pp 6->2", "pp 7->3"});
  REQUIRE(plan.num_collective_groups == ops.comms.size());
  for (std::size_t g = 0; g < ops.comms.size(); ++g) CHECK(plan.groups[g].ranks == ops.comms[g].ranks);
  CHECK(plan.groups[16].ranks == std::vector<int>{4, 0});  // sender first: NCCL rank 0
  // The id of each comes from the node of its lowest rank.
  CHECK(owners(plan) == std::vector<int>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(plan.groups[0].processes == std::vector<int>{0});
  CHECK(plan.groups[2].processes == std::vector<int>{0, 1});  // dp[0,4]: the embedding pair
  CHECK(plan.groups[12].processes == std::vector<int>{0, 1});
  CHECK(plan.groups_of(0) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(plan.groups_of(1) == std::vector<int>{2, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(plan.pair_group(6, 2) == 18);
}

TEST_CASE("bootstrap plan: 4 nodes of 2 GPUs put DP groups and pairs across nodes, ids from three owners") {
  const BootstrapPlan plan = plan_bootstrap(eight_gpus(2));
  REQUIRE(plan.processes == 4);
  CHECK(plan.rank_process == std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3});
  CHECK(plan.rank_device == std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1});
  CHECK(owners(plan) == std::vector<int>{0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 0, 0, 1, 1, 0, 0, 1, 1});
  CHECK(plan.groups[1].processes == std::vector<int>{0, 1});  // dp[0,2]
  CHECK(plan.groups_of(3) == std::vector<int>{6, 7, 9, 10, 11, 14, 15, 18, 19});
}

TEST_CASE("bootstrap plan: one node is one process that makes every id") {
  const OpStream ops = build_op_stream(test::plan_of(test::simulate_kept(test::small_scenario("selective"))), "plan.yaml");
  const BootstrapPlan plan = plan_bootstrap(ops);
  CHECK(plan.processes == 1);
  CHECK(plan.rank_process == std::vector<int>{0, 0, 0, 0});
  CHECK(plan.rank_device == std::vector<int>{0, 1, 2, 3});
  // tp 2 x pp 2: the tied-embedding pairs of the two stages run on the dp stream.
  CHECK(names(plan) == std::vector<std::string>{"tp[0,1]", "dp[0,2]", "dp[1,3]", "tp[2,3]", "pp 0->2", "pp 1->3",
                                                 "pp 2->0", "pp 3->1"});
  CHECK(owners(plan) == std::vector<int>(8, 0));
  CHECK(plan.groups_of(0) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(plan_nodes(ops.scenario) == 1);
}

TEST_CASE("bootstrap plan from placements given by hand") {
  const BootstrapPlan plan =
      plan_bootstrap({1, 1, 0, 0}, {0, 1, 0, 1}, {{"tp[0,1]", 1, {0, 1}}, {"dp[1,3]", 3, {1, 3}}}, {{3, 1}, {0, 2}});
  CHECK(plan.processes == 2);
  CHECK(plan.process_ranks == std::vector<std::vector<int>>{{2, 3}, {0, 1}});
  CHECK(names(plan) == std::vector<std::string>{"tp[0,1]", "dp[1,3]", "pp 0->2", "pp 3->1"});
  CHECK(owners(plan) == std::vector<int>{1, 1, 1, 1});  // rank 0 or 1 is the lowest of each, on node 1
  CHECK(lynx::test::error_of([] { (void)plan_bootstrap({0, 2}, {0, 0}, {}, {}); }).find("node 1 runs no rank") !=
        std::string::npos);
}

TEST_CASE("a start that does not fit the plan is refused with one coded line and both numbers") {
  const LaunchContext alone{1, true}, three{3, true}, two{2, true}, no_mpi{1, false};
  CHECK_NOTHROW(check_launch(1, 4, 8, true, alone));
  CHECK_NOTHROW(check_launch(2, 8, 4, true, two));
  CHECK_NOTHROW(check_launch(2, 8, 4, false, alone));  // dry run, host backend: every rank here
  const std::string spans = "the plan spans 2 nodes (8 GPUs, 4 per node)";
  std::string e = lynx::test::error_of([&] { check_launch(2, 8, 4, true, no_mpi); });
  CHECK(lynx::test::code_of([&] { check_launch(2, 8, 4, true, no_mpi); }) == ErrorCode::kNotInBuild);
  CHECK(e.find(spans + ": it runs as one process per node joined by MPI, and this lynxsim-live was built without MPI") !=
        std::string::npos);
  CHECK_NOTHROW(check_launch(1, 4, 8, true, no_mpi));  // one node needs no MPI
  e = lynx::test::error_of([&] { check_launch(2, 8, 4, true, alone); });
  CHECK(lynx::test::code_of([&] { check_launch(2, 8, 4, true, alone); }) == ErrorCode::kLauncherMismatch);
  CHECK(e.find(spans + " and this process runs alone: start one process per node, e.g. `mpirun -np 2 --map-by node") !=
        std::string::npos);
  e = lynx::test::error_of([&] { check_launch(2, 8, 4, true, three); });
  CHECK(e.find("live: 3 processes were started but " + spans + ": start one process per node (mpirun -np 2") !=
        std::string::npos);
  e = lynx::test::error_of([&] { check_launch(1, 4, 8, true, two); });
  CHECK(e.find("2 processes were started but the plan spans 1 node (4 GPUs, 8 per node)") != std::string::npos);
  e = lynx::test::error_of([&] { check_launch(2, 8, 4, false, two); });
  CHECK(e.find("2 processes were started, but --dry-run and --backend host run every rank in one process") !=
        std::string::npos);
}

TEST_CASE("id exchange in one process: one id per communicator, made in the plan's order") {
  const BootstrapPlan plan = plan_bootstrap(eight_gpus(8));
  InProcessExchange alone;
  std::uint8_t next = 0;
  const std::vector<NcclIdBytes> ids = exchange_ids(
      alone, plan,
      [&] {
        NcclIdBytes id{};
        id.fill(++next);
        return id;
      },
      1.0);
  REQUIRE(ids.size() == plan.groups.size());
  for (std::size_t g = 0; g < ids.size(); ++g) CHECK(ids[g][kNcclIdBytes - 1] == g + 1);
  // A plan over two nodes needs two processes.
  CHECK(lynx::test::error_of([&] { (void)exchange_ids(alone, plan_bootstrap(eight_gpus(4)), [] { return NcclIdBytes{}; }, 1.0); })
            .find("1 processes for a plan over 2 nodes") != std::string::npos);
}

TEST_CASE("measurements packed per node and unpacked on process 0 are exactly every rank's") {
  const OpStream ops = eight_gpus(4);
  const BootstrapPlan plan = plan_bootstrap(ops);
  Measured all;
  all.op_start_s.resize(ops.ops.size());
  all.op_end_s.resize(ops.ops.size());
  for (std::size_t i = 0; i < ops.ops.size(); ++i) {
    all.op_start_s[i] = 0.001 * static_cast<double>(i) + ops.ops[i].rank;
    all.op_end_s[i] = all.op_start_s[i] + 1.0 / 3;
  }
  for (int r = 0; r < 8; ++r) {
    all.peak_bytes.push_back(1000 + r);
    all.memory_timeline.push_back({{0.5 * r, 10 * r}, {0.5 * r + 0.25, 10 * r + 1}});
  }
  all.iteration_s = 7.5;
  Measured merged;
  for (const std::vector<int>& ranks : plan.process_ranks) unpack_measured(ops, pack_measured(ops, all, ranks), merged);
  CHECK(merged.op_start_s == all.op_start_s);
  CHECK(merged.op_end_s == all.op_end_s);
  CHECK(merged.peak_bytes == all.peak_bytes);
  CHECK(merged.memory_timeline == all.memory_timeline);
  CHECK(merged.iteration_s == 7.5);
  // In one process the measurements are already whole.
  InProcessExchange alone;
  CHECK(gather_measured(alone, ops, plan_bootstrap(eight_gpus(8)), all, 1.0).op_end_s == all.op_end_s);
}

TEST_CASE("a 2-node plan runs whole on the host backend and in the dry run") {
  const OpStream ops = eight_gpus(4, "full");
  REQUIRE(ops.gpu_names.size() == 8);
  HostBackend host;
  host.prepare(ops);
  const Measured m = host.run_iteration(ops);
  REQUIRE(m.op_end_seq.size() == ops.ops.size());
  for (const auto& list : ops.rank_ops)
    for (int index : list)
      for (int d : ops.ops[static_cast<std::size_t>(index)].deps)
        CHECK(m.op_start_seq[static_cast<std::size_t>(index)] > m.op_end_seq[static_cast<std::size_t>(d)]);
  HostBackend replay({.size_scale = 1.0 / 4096, .simulator_order = true});
  replay.prepare(ops);
  CHECK(replay.run_iteration(ops).peak_bytes == ops.sim.exec.peak_bytes);
  std::ostringstream out;
  write_dry_run(out, ops, "plan.yaml");
  const std::string text = out.str();
  for (const char* expected :
       {"processes: 2, one per node (mpirun -np 2 --map-by node lynxsim-live plan.yaml)",
        "node 0: ranks 0,1,2,3 on devices 0,1,2,3", "node 1: ranks 4,5,6,7 on devices 0,1,2,3",
        "communicator dp[4,6]: 2 ranks on node 1, NCCL id from node 1",
        "communicator pp 4->0: 2 ranks on nodes 0,1, NCCL id from node 0", "rank 7 (stage1.dp1.tp1)"})
    CHECK_MESSAGE(text.find(expected) != std::string::npos, expected);
}

}  // namespace lynx::live
