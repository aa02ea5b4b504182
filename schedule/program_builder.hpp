#pragma once
/// Turns a resolved scenario and a recomputation plan into per-GPU programs for the executor:
/// pipeline schedule steps become kernels on the compute stream, TP collectives on the tp
/// stream, pipeline sends on the pp stream, gradient all-reduces on the dp stream and
/// overlapped recomputation on the recompute stream, with memory alloc/free per activation.
#include "hw_models/topology.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "scenarios/scenario.hpp"
#include "sim/program.hpp"
#include "strategies/recompute_plan.hpp"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace lynx::schedule {

/// Stream indices of every simulated GPU (names in kStreamNames).
enum Stream : sim::StreamId { kCompute = 0, kTp = 1, kPp = 2, kDp = 3, kRecomputeStream = 4, kCp = 5 };
inline const std::vector<std::string> kStreamNames = {"compute", "tp", "pp", "dp", "recompute"};
/// Optional streams follow kStreamNames, in this order, on the GPUs that need them: the
/// ring-attention transfers' (kCp, parallel.cp > 1), then full sharding's parameter all-gathers
/// (FSDP2's all-gather stream, parallel.sharding full; index dp_gather_stream), then the
/// gradient sends of blocking pipeline exchanges (kPpGradStreamName).
inline constexpr const char* kCpStreamName = "cp";
inline constexpr const char* kDpGatherStreamName = "dp_gather";
inline sim::StreamId dp_gather_stream(const ParallelSpec& p) { return p.cp > 1 ? kCp + 1 : kCp; }
/// Blocking pipeline exchanges (parallel.pipeline_exchange blocking): the gradient sends' stream,
/// last, so that an exchange's two sends run together as in one NCCL group call.
inline constexpr const char* kPpGradStreamName = "pp_grad";

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

/// Where one pipeline step's tasks lie in the program (fast mode measures steps by them).
struct StepSpan {
  sim::GpuId gpu = 0;
  PipeStep step;
  sim::TaskId first_task = 0;    ///< its first task (a recompute issued before its marker)
  sim::TaskId marker = 0;        ///< its first compute-stream task (waits for its input)
  sim::TaskId compute_tail = 0;  ///< what its pipeline send waits for (may be a TP collective)
  sim::TaskId send = -1;         ///< its pipeline send; -1 when it sends nothing
  sim::TaskId end_task = 0;      ///< one past its last task
};

/// Which workload op and pass a task name stands for (live mode launches it): per entry of
/// Program::names. Names of no op (markers, pipeline sends, gradient all-reduces, the
/// optimizer step) have list kNone.
struct NamedOp {
  enum class List : std::uint8_t { kNone, kLayer, kDenseLayer, kEmbedding, kHead };
  enum class Pass : std::uint8_t { kForward, kRecompute, kDgrad, kWgrad, kBackwardCollective, kInputAllGather };
  List list = List::kNone;
  int index = 0;  ///< into Workload::layer / dense_layer / embedding / head
  Pass pass = Pass::kForward;
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
  std::vector<StepSpan> steps;            ///< every pipeline step, in program order
  std::vector<NamedOp> name_ops;          ///< per Program::names entry (live mode)
  std::unordered_map<sim::TaskId, double> optimizer_bytes;  ///< HBM bytes of each optimizer-step kernel
  /// Steady-state periods omitted (program.omitted_periods > 0): the program, task_flops and
  /// the spans cover the built tasks only; sim::FullProgram reads the full program through
  /// them, and sim::execute's results are the full program's.
  bool compressed = false;
};

/// A part of one stage's schedule, built alone (fast mode): `steps` in order on the simulated
/// GPUs of `stage`, without inputs from other stages (a step starts when its streams allow).
struct StageSteps {
  int stage = 0;
  std::vector<PipeStep> steps;
  std::vector<bool> grads_final;  ///< per step: its chunk's last backward (gradients final)
  /// The step that follows the last one in the real order (forward-window recomputes of the
  /// last step are issued for it); none when the last step is the stage's last.
  bool has_following = false;
  PipeStep following;
  /// Full sharding: the step after the last one in the real order, whose first unit's
  /// gathered parameters the last step's end holds (schedule/builder_sharding.cpp); none when
  /// the last step is the stage's last.
  bool has_sharded_following = false;
  PipeStep sharded_following;
  /// After the last step: the gradient all-reduce of the stage's parameters not reduced in
  /// these steps' buckets (every parameter with dp_overlap end), and the optimizer step.
  bool with_tail = false;
  /// overlap_param_gather: the part starts the parameter all-gathers of its last step's chunk
  /// (that step is the chunk's first forward), and that step waits for them.
  bool param_gathers = false;
  /// Host model (hardware.gpu.host_kernel / host_collective > 0): -1, off for the part (its
  /// host would start behind the full run's, which may issue far ahead); else its GPUs' host
  /// threads start issuing at this time (fast/step_profile.cpp measures a host-bound step so).
  TimePs host_start_ps = -1;
  /// The machine holds only the links the program's flows cross, renumbered in their order
  /// (the topology's link ids become dense indices; unused links change no timing): for runs
  /// that add no flows of their own. A step of a thousand-GPU cluster crosses a few dozen of
  /// its thousands of links, and copying them all per step dominated fast mode there.
  bool compact_links = false;
};

/// Global rank of (pipeline stage, replica, tensor-parallel rank), replica = dp_rank · cp +
/// cp_rank: Megatron-Core's order tp-cp-dp-pp (parallel_state.py's default "tp-cp-ep-dp-pp",
/// NVIDIA/Megatron-LM megatron/core/parallel_state.py at 934c8260ada361db9b155d504c5b20600731d773),
/// TP fastest, then CP, then DP, then PP. With cp 1 the replica is the DP rank.
hw_models::Rank global_rank(const ParallelSpec& p, int stage, int replica, int tp_rank);

/// Megatron-LM's embedding group of (dp_rank, tp_rank): its first- and last-stage ranks, which
/// all-reduce the tied word embedding's gradient before the optimizer step (pp > 1).
std::vector<hw_models::Rank> embedding_group_ranks(const ParallelSpec& p, int dp_rank, int tp_rank);
/// Bytes of that all-reduce: the tied word-embedding shard's gradient in the main-gradient
/// dtype (model::grad_bytes_per_param); 0 when untied or pp == 1.
std::uint64_t tied_embedding_grad_bytes(const ParallelSpec& p, const model::Workload& workload);

/// The two tensor-parallel broadcasts with which Megatron loads a micro-batch on the first and
/// the last pipeline stage (tp > 1): `get_batch` (pretrain_gpt.py; Megatron-DeepSpeed's
/// `get_batch_pipe`) calls `tensor_parallel.broadcast_data(['text'], data, torch.int64)`, which
/// broadcasts from tp rank 0 first the sizes (`_build_key_size_numel_dictionaries`: an int64
/// tensor of _MAX_DATA_DIM = 5 entries per key), then the data flattened (key 'text': the
/// GPT dataset's int64 sample of seq_len + 1 tokens per sequence; tokens and labels are its
/// two shifted views, the masks and position ids are built on every rank). Read from
/// Megatron-LM's megatron/mpu/data.py and pretrain_gpt.py as remembered (no source here).
struct MicroBatchLoadBytes {
  std::uint64_t sizes = 0;  ///< 5 × 8 bytes (one key)
  std::uint64_t data = 0;   ///< micro_batch × (seq_len + 1) × 8 bytes
};
MicroBatchLoadBytes micro_batch_load_bytes(const Scenario& sc);

/// Chunks each TP collective next to a layer GEMM is split into (parallel.tp_comm_overlap):
/// tp_comm_overlap_chunks, or tp when 0; 1 (nothing chunked) with the option off, without
/// sequence parallelism or with tp 1.
int tp_overlap_chunks(const ParallelSpec& p);

/// Whether build_program simulates one GPU per pipeline stage (sc.sim.exploit_symmetry, links
/// private to one GPU's traffic, and more than one GPU per stage; always with the one-GPU
/// communication stand-in, sc.sim.comm_standin_bw_bytes_per_s > 0).
bool simulates_one_gpu_per_stage(const Scenario& sc, const hw_models::Topology& topo);

/// Builds the programs. `sc.model` must be resolved and the layout checked. With
/// sc.sim.exploit_symmetry and a topology whose links are private to one GPU's traffic, one GPU
/// per pipeline stage is simulated (exactly equal to the full simulation; tested).
/// `steady_pairs` > 0: where the executor's fast-forward applies (1F1B, no interleaving, no
/// host model), build only warm-up, that many steady-state (forward, backward) pairs on the
/// first GPU and cool-down, with the omitted periods as data (sim::Program::omitted_periods);
/// if sim::execute cannot insert them (ExecResult::complete false) the caller tries more pairs
/// (kCompressedPairs) or builds the full program (0).
BuiltProgram build_program(const Scenario& sc, const strategies::RecomputePlan& plan,
                           const hw_models::Topology& topo, const model::Workload& workload,
                           int steady_pairs = 0);

/// The built pairs of compressed programs, in the order to try them: the state repeats after a
/// few pairs on most pipelines (GPT-175B, 1T: within 8), later on some (selective pp 8: from
/// the 11th; GPT-23B tp 8 on PCIe with TP-comm overlap: from about the 20th, its stages'
/// phases settling); a run whose state never repeats (host-bound) ends with the full program.
inline constexpr int kCompressedPairs[] = {8, 16, 32};

/// The program of a part of one stage's schedule (fast/), with the same tasks the full program
/// gives those steps, except the waits for other stages' transfers.
BuiltProgram build_stage_steps(const Scenario& sc, const strategies::RecomputePlan& plan,
                               const hw_models::Topology& topo, const model::Workload& workload,
                               const StageSteps& part);

}  // namespace lynx::schedule
