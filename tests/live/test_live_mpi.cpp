// Live mode's bootstrap over MPI, without a GPU: started as `mpirun -np N` (N = 2 or 4), each
// process takes the node of its MPI rank in live-small at tp 2 x pp 2 x dp 2 over N nodes of
// 8/N GPUs, exchanges fake 128-byte NCCL ids through the real code path (exchange_ids over
// the MPI exchange: MPI_Bcast from each group's owner) and checks that it got every group's id
// from its owner and made exactly the ids of the groups it owns (after the check that all
// derived the same op stream, which refuses one that did not); then gathers per-rank fake
// measurements on process 0, which checks that it has exactly every rank's values. Every
// process runs every collective whatever it found (no early exit, so never a hang); the exit
// status says whether all checks held.
// `test_live_mpi stall` checks the watchdog of communicator creation instead: the process
// running rank 4 never arrives at the id broadcast of that rank's first communicator
// (LYNXSIM_LIVE_TEST_STALL's init hook, through exchange_ids); the others must fail within
// the 0.5 s limit with one line naming the communicator and end the job, as lynxsim-live's
// main does (check_live_cli.py checks the line, the exit status and that it ended).
#include "live/bootstrap_plan.hpp"
#include "live/id_exchange.hpp"
#include "live/measured_gather.hpp"
#include "live/op_stream.hpp"
#include "common/error.hpp"
#include "sweep/ranks.hpp"
#include "tests/live/live_small.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>

namespace {

using namespace lynx::live;

int failures = 0;
int process = 0;
/// Limits of the normal run (never reached) and of the stalled one (sub-second).
constexpr double kLimit_s = 60, kStallLimit_s = 0.5;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  fmt::print(stderr, "process {}: FAILED: {}\n", process, what);
}

/// The fake id process `owner` makes for group `g`: different for every group and owner.
NcclIdBytes fake_id(std::size_t g, int owner) {
  NcclIdBytes id{};
  for (std::size_t k = 0; k < id.size(); ++k) id[k] = static_cast<std::uint8_t>(g * 37 + static_cast<std::size_t>(owner) * 101 + k);
  return id;
}

double fake_start(const OpStream& ops, std::size_t i) { return 0.001 * static_cast<double>(i) + ops.ops[i].rank; }

int run(const lynx::sweep::Ranks& ranks, bool stall) {
  const std::unique_ptr<IdExchange> exchange = make_exchange(ranks);
  process = exchange->process();
  const int nodes = exchange->processes();
  if (nodes != 2 && nodes != 4) {
    fmt::print(stderr, "start as mpirun -np 2 or -np 4 (got {} processes)\n", nodes);
    return 2;
  }
  const OpStream ops = build_op_stream(
      lynx::live::test::plan_of(lynx::live::test::simulate_kept(lynx::live::test::small_scenario(
          "selective", 2, 2, 2, {fmt::format("hardware.nodes={}", nodes), fmt::format("hardware.gpus_per_node={}", 8 / nodes)}))),
      "plan.yaml");
  const BootstrapPlan plan = plan_bootstrap(ops);
  expect(plan.processes == nodes, fmt::format("{} processes planned", plan.processes));
  check_launch(plan_nodes(ops.scenario), 8, 8 / nodes, true, {nodes, mpi_in_build()});  // this start is right

  // Every process derived the same op stream; one that did not is refused (here: all but 0).
  check_same_as_process0(*exchange, ops.sim.result.event_fingerprint, "the event fingerprint", kLimit_s);
  if (stall) {  // throws on every process: E903 on those that wait, the hook's on the stalled one
    (void)exchange_ids(*exchange, plan, [] { return NcclIdBytes{}; }, kStallLimit_s, {true, true, 4, 0});
    fmt::print("process {}: the stalled id exchange returned\n", process);
    return 1;
  }
  std::string refused;
  try {
    check_same_as_process0(*exchange, 42 + static_cast<std::uint64_t>(process), "a value", kLimit_s);
  } catch (const lynx::Error& e) {
    refused = e.what();
  }
  expect(process == 0 ? refused.empty()
                      : refused.find(fmt::format("node {} has a value {:016x}, node 0 has {:016x}", process, 42 + process, 42)) !=
                            std::string::npos,
         "a process with another value refused: " + refused);

  // Ids: each process makes those of the groups it owns, in the plan's order.
  std::vector<std::size_t> made;
  std::size_t next = 0;  // the next group this process owns, in the plan's order
  const std::vector<NcclIdBytes> ids = exchange_ids(
      *exchange, plan,
      [&] {
        while (next < plan.groups.size() && plan.groups[next].owner != process) ++next;
        made.push_back(next);
        return fake_id(next++, process);
      },
      kLimit_s);
  std::vector<std::size_t> owned;
  for (std::size_t g = 0; g < plan.groups.size(); ++g)
    if (plan.groups[g].owner == process) owned.push_back(g);
  expect(made == owned, fmt::format("made {} ids, owns {} groups", made.size(), owned.size()));
  for (std::size_t g = 0; g < plan.groups.size(); ++g)
    expect(ids.at(g) == fake_id(g, plan.groups[g].owner),
           fmt::format("group {} ({}): id not its owner's (node {})", g, plan.groups[g].name, plan.groups[g].owner));
  int cross_node_groups = 0, foreign_owners = 0;
  for (const int g : plan.groups_of(process)) {
    cross_node_groups += plan.groups[static_cast<std::size_t>(g)].processes.size() > 1;
    foreign_owners += plan.groups[static_cast<std::size_t>(g)].owner != process;
  }
  expect(cross_node_groups > 0, "no communicator across nodes");
  if (nodes == 4) expect(foreign_owners > 0 || process == 0, "every id of its groups made here");

  // Measurements: each process fills its ranks only; process 0 gets every rank's, exactly.
  Measured local;
  local.op_start_s.assign(ops.ops.size(), -1);
  local.op_end_s.assign(ops.ops.size(), -1);
  local.peak_bytes.assign(ops.gpu_names.size(), -1);
  local.memory_timeline.resize(ops.gpu_names.size());
  for (const int r : plan.process_ranks[static_cast<std::size_t>(process)]) {
    for (const int i : ops.rank_ops[static_cast<std::size_t>(r)]) {
      local.op_start_s[static_cast<std::size_t>(i)] = fake_start(ops, static_cast<std::size_t>(i));
      local.op_end_s[static_cast<std::size_t>(i)] = fake_start(ops, static_cast<std::size_t>(i)) + 1.0 / 3;
    }
    local.peak_bytes[static_cast<std::size_t>(r)] = (std::int64_t{1} << 40) + r;
    local.memory_timeline[static_cast<std::size_t>(r)] = {{0.5 * r, 10 * r}, {0.5 * r + 0.25, 10 * r + 1}};
  }
  local.iteration_s = 1.0 + process;
  const Measured whole = gather_measured(*exchange, ops, plan, local, kLimit_s);
  if (process == 0) {
    for (std::size_t i = 0; i < ops.ops.size(); ++i) {
      expect(whole.op_start_s[i] == fake_start(ops, i), fmt::format("op {} start", i));
      expect(whole.op_end_s[i] == fake_start(ops, i) + 1.0 / 3, fmt::format("op {} end", i));
    }
    for (int r = 0; r < 8; ++r) {
      expect(whole.peak_bytes[static_cast<std::size_t>(r)] == (std::int64_t{1} << 40) + r, fmt::format("rank {} peak", r));
      expect(whole.memory_timeline[static_cast<std::size_t>(r)] ==
                 std::vector<std::pair<double, std::int64_t>>{{0.5 * r, 10 * r}, {0.5 * r + 0.25, 10 * r + 1}},
             fmt::format("rank {} timeline", r));
    }
    expect(whole.iteration_s == nodes, fmt::format("iteration {} s, the slowest node's", whole.iteration_s));
  } else {
    expect(whole.op_start_s == local.op_start_s, "a process other than 0 keeps its own measurements");
  }
  exchange->barrier({kLimit_s, "the final barrier"});
  if (process == 0 && failures == 0)
    fmt::print("ok: {} processes, {} communicators, ids from their owners, every rank's measurements on process 0\n", nodes,
               plan.groups.size());
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const lynx::sweep::Ranks ranks;
  try {
    return run(ranks, argc > 1 && std::string(argv[1]) == "stall");
  } catch (const std::exception& e) {
    fmt::print(stderr, "process {}: error: {}\n", process, e.what());
    ranks.abort_job(1);  // the others may wait in a collective
    return 1;
  }
}
