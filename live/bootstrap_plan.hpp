#pragma once
/// The bootstrap of a live run over the CUDA backend, as a plan: one process per node the
/// layout occupies (placed as the simulator places ranks: hw_models::Topology::node_of of each
/// GPU's global rank), the ranks and CUDA devices each process owns, and every NCCL
/// communicator in the one order all processes create them — with the process that makes
/// each communicator's unique id (the owner of its lowest rank). Pure: no CUDA, no MPI.
#include "live/op_stream.hpp"

#include <string>
#include <utility>
#include <vector>

namespace lynx::live {

/// One NCCL communicator to create.
struct CommGroup {
  std::string name;            ///< the OpStream communicator's name, or "pp 0->4" for a pipeline pair
  std::vector<int> ranks;      ///< members in NCCL rank order (a pair: sender, receiver)
  int owner = 0;               ///< the process that calls ncclGetUniqueId: the one running the lowest rank
  std::vector<int> processes;  ///< processes that have members, ascending
};

/// Who runs what, and how the communicators come to be.
struct BootstrapPlan {
  int processes = 1;                            ///< one per node
  std::vector<int> rank_process;                ///< per rank: its process (= its node)
  std::vector<int> rank_device;                 ///< per rank: its CUDA device on that node
  std::vector<std::vector<int>> process_ranks;  ///< per process: its ranks, ascending
  /// Every communicator in creation order: OpStream::comms first (same index), then one per
  /// directed pipeline pair, (sender, receiver) ascending.
  std::vector<CommGroup> groups;
  std::size_t num_collective_groups = 0;  ///< groups[i] is OpStream::comms[i] for i below this

  /// Indices into `groups` of those `process` has members in, in creation order.
  std::vector<int> groups_of(int process) const;
  /// The group of the directed pipeline pair (src, dst); throws when there is none.
  int pair_group(int src, int dst) const;
};

/// The plan from the placement of each rank (node, device on it), the collective
/// communicators (OpStream::comms) and the directed pipeline pairs (any order, no repeats).
BootstrapPlan plan_bootstrap(const std::vector<int>& rank_node, const std::vector<int>& rank_device,
                             const std::vector<Communicator>& comms, std::vector<std::pair<int, int>> pairs);

/// The plan of an op stream: placement from the simulator's topology, its communicators and
/// the pairs of its sends.
BootstrapPlan plan_bootstrap(const OpStream& ops);

/// Nodes a scenario's layout occupies (tp·pp·dp GPUs placed by hw_models::Topology).
int plan_nodes(const Scenario& sc);

/// How the command was started, for check_launch.
struct LaunchContext {
  int processes = 1;          ///< processes of the job this one belongs to (1: alone)
  bool mpi_in_build = false;  ///< whether lynxsim-live was built with MPI
};

/// Refuses, with one coded line, a start that does not give a plan over `nodes` nodes what it
/// needs: the CUDA backend (`per_node` true) one process per node, joined by MPI (E305 when
/// the build has no MPI, E807 when the count is not the node count, with both numbers); the
/// dry run and the host backend (`per_node` false) one process, whatever the plan.
void check_launch(int nodes, int gpus, int gpus_per_node, bool per_node, const LaunchContext& launch);

}  // namespace lynx::live
