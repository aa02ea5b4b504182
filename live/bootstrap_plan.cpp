#include "live/bootstrap_plan.hpp"

#include "common/error.hpp"
#include "hw_models/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace lynx::live {

std::vector<int> BootstrapPlan::groups_of(int process) const {
  std::vector<int> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int>& p = groups[g].processes;
    if (std::binary_search(p.begin(), p.end(), process)) out.push_back(static_cast<int>(g));
  }
  return out;
}

int BootstrapPlan::pair_group(int src, int dst) const {
  for (std::size_t g = num_collective_groups; g < groups.size(); ++g)
    if (groups[g].ranks[0] == src && groups[g].ranks[1] == dst) return static_cast<int>(g);
  LYNX_CHECK(false, "no pipeline pair {} -> {}", src, dst);
  return -1;
}

BootstrapPlan plan_bootstrap(const std::vector<int>& rank_node, const std::vector<int>& rank_device,
                             const std::vector<Communicator>& comms, std::vector<std::pair<int, int>> pairs) {
  LYNX_CHECK(rank_node.size() == rank_device.size() && !rank_node.empty(), "{} nodes for {} devices", rank_node.size(),
             rank_device.size());
  BootstrapPlan plan;
  plan.rank_process = rank_node;
  plan.rank_device = rank_device;
  plan.processes = *std::max_element(rank_node.begin(), rank_node.end()) + 1;
  plan.process_ranks.resize(static_cast<std::size_t>(plan.processes));
  for (std::size_t r = 0; r < rank_node.size(); ++r)
    plan.process_ranks.at(static_cast<std::size_t>(rank_node[r])).push_back(static_cast<int>(r));
  for (std::size_t p = 0; p < plan.process_ranks.size(); ++p)
    LYNX_CHECK(!plan.process_ranks[p].empty(), "node {} runs no rank", p);
  const auto add = [&](std::string name, std::vector<int> ranks) {
    CommGroup g;
    g.name = std::move(name);
    g.owner = plan.rank_process.at(static_cast<std::size_t>(*std::min_element(ranks.begin(), ranks.end())));
    std::set<int> processes;
    for (int r : ranks) processes.insert(plan.rank_process.at(static_cast<std::size_t>(r)));
    g.processes.assign(processes.begin(), processes.end());
    g.ranks = std::move(ranks);
    plan.groups.push_back(std::move(g));
  };
  for (const Communicator& c : comms) add(c.name, c.ranks);
  plan.num_collective_groups = plan.groups.size();
  std::sort(pairs.begin(), pairs.end());
  LYNX_CHECK(std::adjacent_find(pairs.begin(), pairs.end()) == pairs.end(), "a pipeline pair given twice");
  for (const auto& [src, dst] : pairs) add(fmt::format("pp {}->{}", src, dst), {src, dst});
  return plan;
}

BootstrapPlan plan_bootstrap(const OpStream& ops) {
  const ParallelSpec& p = ops.scenario.parallel;
  const hw_models::Topology topo(ops.scenario.hardware, gpus_used(p));
  const int gpus_per_node = ops.scenario.hardware.gpus_per_node;
  std::vector<int> rank_node, rank_device;
  for (const hw_models::Rank global : ops.sim.built.gpu_rank) {
    const int node = topo.node_of(global);
    rank_node.push_back(node);
    rank_device.push_back(global - node * gpus_per_node);  // global rank = node · gpus_per_node + local
  }
  std::set<std::pair<int, int>> pairs;
  for (const LiveOp& op : ops.ops)
    if (op.launch == LaunchKind::kSend) pairs.insert({op.rank, op.peer});
  return plan_bootstrap(rank_node, rank_device, ops.comms, {pairs.begin(), pairs.end()});
}

int plan_nodes(const Scenario& sc) {
  if (sc.sim.comm_standin_bw_bytes_per_s > 0) return 1;  // the stand-in runs one GPU
  const std::int64_t gpus = gpus_used(sc.parallel);
  const hw_models::Topology topo(sc.hardware, gpus);
  return topo.node_of(static_cast<hw_models::Rank>(gpus - 1)) + 1;
}

void check_launch(int nodes, int gpus, int gpus_per_node, bool per_node, const LaunchContext& launch) {
  if (!per_node) {
    if (launch.processes > 1)
      fail(ErrorCode::kLauncherMismatch, "live: {} processes were started, but --dry-run and --backend host run every rank "
           "in one process: start one",
           launch.processes);
    return;
  }
  const std::string spans = fmt::format("the plan spans {} node{} ({} GPUs, {} per node)", nodes, nodes == 1 ? "" : "s",
                                        gpus, gpus_per_node);
  if (nodes > 1 && !launch.mpi_in_build)
    fail(ErrorCode::kNotInBuild, "live: {}: it runs as one process per node joined by MPI, and this lynxsim-live was "
         "built without MPI (install libopenmpi-dev and rebuild)",
         spans);
  if (launch.processes == nodes) return;
  if (launch.processes == 1)
    fail(ErrorCode::kLauncherMismatch, "live: {} and this process runs alone: start one process per node, e.g. "
         "`mpirun -np {} --map-by node lynxsim-live PLAN.yaml` (Slurm: srun -N {} --ntasks-per-node=1 --mpi=pmix)",
         spans, nodes, nodes);
  fail(ErrorCode::kLauncherMismatch, "live: {} processes were started but {}: start one process per node (mpirun -np {} "
       "--map-by node)",
       launch.processes, spans, nodes);
}

}  // namespace lynx::live
