#pragma once
/// The op stream live mode executes: the simulator's own program (schedule/program_builder's
/// tasks, deps and memory effects for every GPU rank) with, per task, what to launch on a real
/// GPU — GEMM shapes, the project kernel and its rows × cols, collective bytes and
/// communicator, send/recv partners. One description of the schedule: every op is a task of
/// the program (same id), plus one receive per pipeline transfer (NCCL needs both ends).
#include "runner/simulate.hpp"
#include "sim/program.hpp"
#include "sim/time.hpp"
#include "strategies/plan_yaml.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::live {

/// What an op launches.
enum class LaunchKind : std::uint8_t {
  kNone,         ///< a marker, or a later phase of a collective: orders other ops only
  kGemm,         ///< bf16 GEMM C[m×n] = A[m×k]·B[k×n] (and a second one for m2 > 0)
  kBatchedGemm,  ///< `batch` GEMMs (attention QKᵀ, ·V and their gradients)
  kMemoryBound,  ///< a project kernel (`kernel`) over m rows × n cols, or an HBM stream
  kCollective,   ///< NCCL all-reduce / all-gather / reduce-scatter on `comm`
  kSend,         ///< NCCL send of `bytes` to `peer`
  kRecv,         ///< NCCL receive of `bytes` from `peer`: ends when its send (`match`) is through
  /// One leg of the one-GPU communication stand-in (sim.comm_standin): a copy-engine transfer
  /// of `bytes`, device to host (to_host) or host to device, on the op's stream.
  kStandinCopy,
};

/// The project kernel a memory-bound op runs (gpu/gpu_kernels.hpp).
enum class Kernel : std::uint8_t {
  kNone,
  kLayerNorm,        ///< rows m, cols n
  kBiasGelu,         ///< rows m, cols n
  kSoftmax,          ///< causal softmax, rows m (b·heads·s), cols n (s)
  kDropout,          ///< m·n elements
  kDropoutResidual,  ///< bias + dropout + residual add, rows m, cols n
  kCrossEntropy,     ///< rows m (tokens), cols n (local vocab)
  kEmbedding,        ///< gather rows m (tokens) of n cols
  kStream,           ///< read + write `bytes` of HBM (backward passes, optimizer, unknown ops)
};

/// Spellings used by the dry run, the CSV and the docs.
const char* launch_kind_name(LaunchKind kind);
const char* kernel_name(Kernel kernel);
const char* collective_name(model::CollectiveKind kind);

/// One op of one GPU rank.
struct LiveOp {
  sim::TaskId task = -1;  ///< the program's task; -1 for a receive added for a transfer
  int rank = 0;           ///< index into OpStream::gpu_names
  int stream = 0;         ///< index into OpStream::stream_names
  std::string label;      ///< the task label ("mb3.L12.qkv_gemm_dgrad"); receives: "recv ..."
  std::string op;         ///< the workload op ("qkv_gemm") or the task name (markers, sends)
  std::string pass;       ///< fwd, recompute, dgrad, wgrad, bwd-comm, input-allgather, comm, ...
  LaunchKind launch = LaunchKind::kNone;
  Kernel kernel = Kernel::kNone;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;  ///< GEMM C[m×n] = A[m×k]·B[k×n]; kernel rows, cols
  std::int64_t m2 = 0, n2 = 0, k2 = 0;          ///< a second GEMM (attention backward); 0: none
  std::uint64_t bytes = 0;  ///< kernels: HBM bytes; communication: payload bytes
  double flops = 0;         ///< the simulator's FLOPs of the task
  model::CollectiveKind collective = model::CollectiveKind::kNone;
  int comm = -1;   ///< kCollective: index into OpStream::comms
  int peer = -1;   ///< kSend / kRecv: the other rank
  int match = -1;  ///< kSend: its receive; kRecv: its send (op indices)
  bool to_host = false;  ///< kStandinCopy: device to host (else host to device)
  std::vector<int> deps;              ///< ops that must have completed first (op indices)
  std::vector<sim::MemEffect> mem;    ///< allocations at start, frees at end (the program's)
  sim::Category category = sim::Category::kOther;
  TimePs predicted_start_ps = 0;      ///< the simulator's start
  TimePs predicted_end_ps = 0;        ///< the simulator's end
};

/// A group of ranks that runs collectives together on one stream (an NCCL communicator).
struct Communicator {
  std::string name;        ///< "tp{stage}.{dp}" style label: stream name + member ranks
  int stream = 0;
  std::vector<int> ranks;  ///< members, in ring order
};

/// Everything live mode runs for one training iteration.
struct OpStream {
  Scenario scenario;       ///< the plan's resolved scenario (every GPU simulated)
  std::string strategy;    ///< the plan's name
  /// What live mode runs (and the simulation predicts) otherwise than the plan asks, with the
  /// user's consent (--run-as-bf16-unchunked): the overrides it applied
  /// ("model.gemm_precision=bf16", "parallel.tp_comm_overlap=false"); empty: the plan as made.
  std::vector<std::string> runs_as;
  std::vector<std::string> gpu_names;     ///< per rank ("stage0.dp0.tp1")
  std::vector<std::string> stream_names;  ///< the program's streams + "pp_recv"
  std::vector<std::string> tags;          ///< memory tags
  std::vector<std::int64_t> static_bytes; ///< per rank: weights, gradients, optimizer state, reserve
  std::vector<Communicator> comms;
  /// ops[t] is the program's task t for t < num_tasks; receives follow.
  std::vector<LiveOp> ops;
  std::size_t num_tasks = 0;
  /// Per rank: its op indices in issue order (program order, each receive just before the
  /// op that waits for it). Ops of one (rank, stream) run in this order.
  std::vector<std::vector<int>> rank_ops;
  std::vector<std::int64_t> predicted_peak_bytes;  ///< per rank, static included
  TimePs predicted_iteration_ps = 0;
  /// The simulator's run the stream was derived from (program, result with event order).
  runner::SimRun sim;
};

/// One line for report headers when OpStream::runs_as is not empty ("" otherwise): what runs
/// otherwise than the plan asks, and that the prediction is of what runs.
std::string runs_as_note(const OpStream& ops);

/// Index of the receive stream every rank gets beside the program's streams.
int recv_stream(const OpStream& ops);

/// Simulates `plan` on its embedded scenario with every GPU simulated (no symmetry reduction,
/// exact mode, with the event order kept) and derives the op stream from that program.
/// `overrides` are `--set` overrides on top of the plan's scenario; `plan_label` names the
/// plan in messages. Plans over several nodes give every rank of every node (the CUDA backend
/// runs one process per node, live/bootstrap_plan.hpp; the host backend runs them all).
/// A plan with TP-comm overlap or FP8 GEMMs, which live mode runs unchunked in bf16, is
/// refused (E304, at its key) unless `run_as_bf16_unchunked`: then both are turned off in the
/// simulated scenario too (OpStream::runs_as), so the prediction is of what runs.
OpStream build_op_stream(const strategies::PlanFile& plan, const std::string& plan_label,
                         const std::vector<std::string>& overrides = {}, bool run_as_bf16_unchunked = false);

}  // namespace lynx::live
