#pragma once
/// Turns a resolved scenario and a recomputation plan into per-GPU programs for the executor:
/// pipeline schedule steps become kernels on the compute stream, TP collectives on the tp
/// stream, pipeline sends on the pp stream, gradient all-reduces on the dp stream and
/// overlapped recomputation on the recompute stream, with memory alloc/free per activation.
#include "hw_models/topology.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "scenarios/scenario.hpp"
#include "sim/program.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstdint>
#include <vector>

namespace lynx::schedule {

/// Stream indices of every simulated GPU (names in kStreamNames).
enum Stream : sim::StreamId { kCompute = 0, kTp = 1, kPp = 2, kDp = 3, kRecomputeStream = 4 };
inline const std::vector<std::string> kStreamNames = {"compute", "tp", "pp", "dp", "recompute"};

/// The tasks of one layer's backward pass on one GPU (for finding overlap windows).
struct LayerSpan {
  sim::GpuId gpu = 0;
  int virtual_stage = 0;
  int micro_batch = 0;
  int layer = 0;               ///< global layer index
  sim::TaskId first_task = 0;  ///< [first_task, end_task) in program order
  sim::TaskId end_task = 0;
  sim::TaskId step_marker = 0;  ///< the marker that starts this backward step (waits for the gradient)
};

struct BuiltProgram {
  sim::Machine machine;
  sim::Program program;
  std::vector<int> gpu_stage;         ///< pipeline stage of each simulated GPU
  std::vector<hw_models::Rank> gpu_rank;     ///< its global rank (pp·(tp·dp) + dp·tp + tp)
  /// GPUs each simulated GPU stands for: tp·dp with symmetry, 1 without.
  int replication = 1;
  bool symmetric = false;             ///< whether the reduced (one rank per stage) form was used
  std::vector<double> task_flops;     ///< FLOPs executed by each kernel task (0 for others)
  std::vector<LayerSpan> layer_backward;  ///< every layer backward pass, in program order
  std::vector<LayerSpan> layer_forward;   ///< every layer forward pass (step_marker: its step's)
};

/// Global rank of (pipeline stage, data-parallel replica, tensor-parallel rank): Megatron's
/// order, TP fastest, then DP, then PP.
hw_models::Rank global_rank(const ParallelSpec& p, int stage, int dp_rank, int tp_rank);

/// Whether build_program simulates one GPU per pipeline stage (sc.sim.exploit_symmetry, links
/// private to one GPU's traffic, and more than one GPU per stage).
bool simulates_one_gpu_per_stage(const Scenario& sc, const hw_models::Topology& topo);

/// Builds the programs. `sc.model` must be resolved and the layout checked. With
/// sc.sim.exploit_symmetry and a topology whose links are private to one GPU's traffic, one GPU
/// per pipeline stage is simulated (exactly equal to the full simulation; tested).
BuiltProgram build_program(const Scenario& sc, const strategies::RecomputePlan& plan,
                           const hw_models::Topology& topo, const model::Workload& workload);

}  // namespace lynx::schedule
