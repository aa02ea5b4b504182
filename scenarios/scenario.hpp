#pragma once
/// A scenario: plain structs with units resolved to SI integers (model::ResolvedScenario marks
/// one whose model preset is filled in and whose layout is checked).
/// Every field is documented (name, unit, default, meaning) in scenarios/fields.cpp, which is
/// also what `lynxsim show`, the loader and docs/scenario.md use — one place only.
#include "common/checked.hpp"
#include "sim/time.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lynx {

/// MLP of a layer: GPT's FC1 -> GeLU -> FC2, or Llama's gated SwiGLU (gate, up, down).
/// kDefault: the preset's, else GeLU (resolve_model fills it in).
enum class MlpKind : std::uint8_t { kDefault, kGelu, kSwiglu };
/// Normalisation of a layer: LayerNorm (gamma, beta) or RMSNorm (gamma only).
enum class NormKind : std::uint8_t { kDefault, kLayerNorm, kRmsNorm };
/// Position embedding: a learned s x h table added to the input, or rotary (RoPE) applied to Q, K.
enum class PositionKind : std::uint8_t { kDefault, kLearned, kRotary };
/// Output layer: tied to the input word embedding (one V x h matrix) or a separate matrix.
enum class EmbeddingTie : std::uint8_t { kDefault, kTied, kUntied };
/// Biases on the linear layers (QKV, out-projection, FC1, FC2), as Megatron's --disable-bias-linear.
enum class LinearBias : std::uint8_t { kDefault, kOn, kOff };
/// Attention and hidden dropout (Megatron's default 0.1, whose masks are saved for backward), or
/// none (Llama: --attention-dropout 0 --hidden-dropout 0; PyTorch's dropout with p 0 is a no-op).
enum class Dropout : std::uint8_t { kDefault, kOn, kOff };

/// Precision of the transformer layers' linear-layer GEMMs (model.gemm_precision): 16-bit
/// (bf16 / fp16), or FP8 as Transformer Engine runs them (Megatron --fp8-format hybrid).
enum class GemmPrecision : std::uint8_t { kBf16, kFp8 };
/// Scenario-file names of GemmPrecision, indexed by it.
inline constexpr std::array<const char*, 2> kGemmPrecisionNames = {"bf16", "fp8"};

/// Scenario-file names of the architecture choices, indexed by their enums (the one list of
/// these spellings: the field table and `lynxsim presets` read them). "default": the preset's.
inline constexpr std::array<const char*, 3> kMlpKindNames = {"default", "gelu", "swiglu"};
inline constexpr std::array<const char*, 3> kNormKindNames = {"default", "layernorm", "rmsnorm"};
inline constexpr std::array<const char*, 3> kPositionKindNames = {"default", "learned", "rotary"};
inline constexpr std::array<const char*, 3> kEmbeddingTieNames = {"default", "tied", "untied"};
inline constexpr std::array<const char*, 3> kLinearBiasNames = {"default", "true", "false"};
inline constexpr std::array<const char*, 3> kDropoutNames = {"default", "true", "false"};

/// Scenario-file name of an architecture choice (any of the six enums above).
template <typename Enum>
constexpr const char* architecture_name(Enum value) {
  const auto i = static_cast<std::size_t>(value);
  if constexpr (std::is_same_v<Enum, MlpKind>) return kMlpKindNames[i];
  else if constexpr (std::is_same_v<Enum, NormKind>) return kNormKindNames[i];
  else if constexpr (std::is_same_v<Enum, PositionKind>) return kPositionKindNames[i];
  else if constexpr (std::is_same_v<Enum, EmbeddingTie>) return kEmbeddingTieNames[i];
  else if constexpr (std::is_same_v<Enum, LinearBias>) return kLinearBiasNames[i];
  else return kDropoutNames[i];
}

/// Mixture of experts (model.moe.*; model/gpt_moe.cpp): MoE layers replace the dense MLP by a
/// router, num_experts expert MLPs of which each token uses router_topk, and optional shared
/// experts every token uses. num_experts 0: a dense model (every other field ignored).
struct MoeSpec {
  int num_experts = 0;
  int router_topk = 0;          ///< experts per token; 0: 2 (Megatron-Core's --moe-router-topk default)
  int expert_ffn_hidden = 0;    ///< one routed expert's MLP inner size; 0: model.ffn_hidden
  int shared_ffn_hidden = 0;    ///< shared experts' inner size, all together; 0: none
  int layer_freq = 1;           ///< every layer_freq-th layer (after first_dense_layers) is MoE
  int first_dense_layers = -1;  ///< leading dense layers (DeepSeek-V3: 3); -1: the preset's, else 0
  double capacity_factor = 0;   ///< tokens per expert capped at this x the uniform share; 0: dropless
  double expert_imbalance = 1;  ///< busiest expert's tokens / the uniform share (>= 1)
  bool operator==(const MoeSpec&) const = default;
};
/// Model shape and architecture. A preset or a Hugging Face config fills the shape (and a Llama
/// preset or config its architecture); explicit fields override it. Zero / kDefault fields are "from the preset" until resolve_model.
struct ModelSpec {
  std::string preset;          ///< e.g. "gpt-22b"; empty for a custom model
  /// A Hugging Face config.json that fills the shape like a preset (absolute path once read;
  /// scenarios/hf_config.hpp); empty: none.
  std::string hf_config;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;            ///< key/value heads (grouped-query attention); default = heads
  int ffn_hidden = 0;          ///< default 4 * hidden
  int head_dim = 0;            ///< per attention head; 0 = hidden / heads (Qwen3: 128 always)
  int seq_len = 2048;
  int vocab = 0;               ///< default: the preset's, else 51200
  bool flash_attention = false;
  MlpKind mlp = MlpKind::kDefault;
  NormKind norm = NormKind::kDefault;
  PositionKind position_embedding = PositionKind::kDefault;
  EmbeddingTie embeddings = EmbeddingTie::kDefault;
  LinearBias linear_bias = LinearBias::kDefault;
  Dropout dropout = Dropout::kDefault;
  GemmPrecision gemm_precision = GemmPrecision::kBf16;
  /// Megatron-LM's kernel fusions, on by default as in Megatron-LM (model/gpt_ops.cpp and
  /// docs/host.md say what each costs when off): the wgrad GEMM accumulating into the main
  /// gradient (--no-gradient-accumulation-fusion), bias + GeLU (--no-bias-gelu-fusion), bias +
  /// dropout + residual add (--no-bias-dropout-fusion), scale-mask-softmax
  /// (--no-masked-softmax-fusion).
  bool gradient_accumulation_fusion = true;
  bool bias_gelu_fusion = true;
  bool bias_dropout_fusion = true;
  bool masked_softmax_fusion = true;
  MoeSpec moe;
  bool operator==(const ModelSpec&) const = default;
};

/// Pipeline schedules (schedule/pipeline_schedule.hpp); kZbH1: Qi et al.'s zero-bubble ZB-H1.
enum class ScheduleKind { kGpipe, kOneFOneB, kInterleaved, kZbH1 };
enum class DpOverlap { kBucketed, kEnd };
/// How neighbouring pipeline stages exchange activations and gradients (docs/schedules.md,
/// "Pipeline exchange"): overlapped sends the receiver waits for, or Megatron's blocking
/// batch_isend_irecv exchanges followed by torch.cuda.synchronize(); kAuto as Megatron-Core
/// chooses (blocking_exchange()).
enum class PipelineExchange : std::uint8_t { kAuto, kOverlapped, kBlocking };
/// What data parallelism shards over its shard group (ZeRO stages; docs/scenario.md, "Sharded
/// data parallelism"): nothing (replicated, gradient all-reduce), the optimizer state (ZeRO-1,
/// Megatron's distributed optimizer), also the fp32 main gradients (ZeRO-2), also the 16-bit
/// parameters (ZeRO-3 / FSDP: each layer's parameters all-gathered before its forward and its
/// backward). Ordered: a later level shards everything an earlier one does.
enum class Sharding : std::uint8_t { kNone, kOptimizer, kGradients, kFull };
/// Scenario-file names of Sharding, indexed by it.
inline constexpr std::array<const char*, 4> kShardingNames = {"none", "optimizer", "gradients", "full"};
/// The ranks a sharded level shards over: every dp rank, or the dp ranks of one node (hybrid
/// sharding, HSDP: shards replicated across nodes, gradients all-reduced across the replicas).
enum class ShardGroup : std::uint8_t { kDp, kNode };

struct ParallelSpec {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  /// Context-parallel degree (Megatron-Core's --context-parallel-size): each of the cp ranks
  /// holds seq_len / cp tokens of every sequence and runs ring attention (docs/models.md,
  /// "Context parallelism"). Rank order tp-cp-dp-pp (schedule::global_rank).
  int cp = 1;
  /// Expert parallelism (Megatron-Core --expert-model-parallel-size): the routed experts of a
  /// MoE layer are split over ep ranks; a pipeline stage's tp · dp · cp GPUs are re-divided
  /// into etp × ep × expert-data-parallel (model/expert_grid.hpp), whose
  /// tp · dp · cp / (etp · ep) ranks reduce the experts' gradients.
  int ep = 1;
  /// Expert tensor parallelism (--expert-tensor-parallel-size): the routed experts' FC1 / FC2
  /// sharded over etp GPUs; 0: tp (Megatron-Core's default). Read it through expert_tp().
  int etp = 0;
  bool sequence_parallel = false;
  int micro_batch = 1;
  int global_batch = 1;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int virtual_stages = 1;            ///< model chunks per GPU (interleaved only)
  PipelineExchange pipeline_exchange = PipelineExchange::kAuto;  ///< read it through blocking_exchange()
  /// Megatron-LM's --scatter-gather-tensors-in-pipeline (its default from 2021 until pipeline
  /// parallelism moved to Megatron-Core in 2023): without sequence parallelism each tensor-
  /// parallel rank sends 1/tp of the boundary tensor and the receivers all-gather it.
  bool pipeline_scatter_gather = false;
  /// Layers on the first / last pipeline stage (Megatron-Core's
  /// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers); 0: not set, the
  /// stage takes an even share of the layers the set ones leave (model::pipeline_stage_layers).
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  /// Megatron's --use-distributed-optimizer: an alias of sharding optimizer (the level used is
  /// the higher of the two: model::sharding_level).
  bool distributed_optimizer = false;
  Sharding sharding = Sharding::kNone;
  ShardGroup shard_group = ShardGroup::kDp;
  /// Gradients accumulate and are reduced over dp in fp32 (Megatron's default for bf16);
  /// false: 16-bit gradients, cast to fp32 by the optimizer step (fp16 Megatron, DeepSpeed).
  bool fp32_main_grads = true;
  DpOverlap dp_overlap = DpOverlap::kBucketed;
  std::uint64_t dp_bucket_bytes = 40'000'000;  ///< Megatron's default bucket, 40 MB
  /// Megatron-Core's --tp-comm-overlap (Transformer Engine userbuffers, needs sequence
  /// parallelism): the SP all-gathers and reduce-scatters next to the layer GEMMs run in chunks
  /// pipelined with the GEMM chunks (schedule/tp_comm_overlap.hpp).
  bool tp_comm_overlap = false;
  int tp_comm_overlap_chunks = 0;  ///< chunks per overlapped collective; 0: tp
  /// Megatron's --overlap-param-gather (needs the distributed optimizer): the parameter
  /// all-gather runs bucket by bucket beside the forward pass instead of after the optimizer step.
  bool overlap_param_gather = false;
  bool operator==(const ParallelSpec&) const = default;
};

/// Efficiency that grows with the size of the work: eff(w) = max * w / (w + half_work).
/// w is FLOPs for compute-bound kernels and bytes for memory-bound ones.
struct EfficiencyCurve {
  double max = 1.0;
  double half_work = 0.0;
  bool operator==(const EfficiencyCurve&) const = default;
};

struct LinkSpec {
  std::uint64_t bw_bytes_per_s = 0;  ///< per direction
  TimePs latency_ps = 0;
  bool operator==(const LinkSpec&) const = default;
};

/// How the GPUs of a node talk to each other (profile key `node.intra`).
enum class IntraNode : std::uint8_t {
  kNvSwitch,  ///< NVLink through an NVSwitch
  kPcie,      ///< PCIe only, through PCIe switches and the host
};

/// The YAML spelling of an IntraNode: "nvswitch" or "pcie".
constexpr std::string_view to_string(IntraNode kind) {
  return kind == IntraNode::kNvSwitch ? "nvswitch" : "pcie";
}

/// How collectives are timed (profile key `collective_model`).
enum class CollectiveModel : std::uint8_t {
  kAlphaBeta,  ///< one path latency per ring step, link bandwidth × collective_efficiency
  kNccl,       ///< NCCL's protocols (LL, LL128, Simple), the fastest one per call
};

/// The YAML spelling of a CollectiveModel: "alpha-beta" or "nccl".
constexpr std::string_view to_string(CollectiveModel kind) {
  return kind == CollectiveModel::kAlphaBeta ? "alpha-beta" : "nccl";
}

/// One NCCL protocol in NCCL's own cost model (src/graph/tuning.cc): a call on this protocol
/// takes base + steps · step latency of its scope + wire bytes / (link bandwidth ·
/// collective_efficiency · bw_fraction), plus one hardware path latency (hw_models/collectives.hpp).
struct NcclProtocol {
  TimePs base_ps = 0;         ///< per collective call (kernel start, protocol set-up)
  TimePs step_nvlink_ps = 0;  ///< per ring step inside an NVSwitch node
  TimePs step_pcie_ps = 0;    ///< per ring step over PCIe inside a node
  TimePs step_net_ps = 0;     ///< per ring step across nodes
  double bw_fraction = 0.0;   ///< of the ring bandwidth its wire format carries; 0: not used
  bool operator==(const NcclProtocol&) const = default;
};

/// NCCL's three protocols (profile keys nccl.ll.*, nccl.ll128.*, nccl.simple.*).
struct NcclSpec {
  NcclProtocol ll;
  NcclProtocol ll128;
  NcclProtocol simple;
  /// Rate at which a call (every protocol, every collective but send/recv) passes over its
  /// whole buffer once, not overlapped with the ring's link transfers: the call's time grows
  /// by buffer bytes / buffer_bw. 0: no such pass (docs/calibration.md, "NCCL tables").
  std::uint64_t buffer_bw_bytes_per_s = 0;
  bool operator==(const NcclSpec&) const = default;
};

/// One hardware profile (hw_models/profiles/NAME.yaml) after overrides.
struct HardwareSpec {
  std::string profile;                ///< profile name
  std::string profile_file;           ///< absolute path it was read from; empty for a built-in
  std::string source;                 ///< where its numbers come from (datasheet, calibration)
  // GPU
  std::string gpu_name;
  std::uint64_t peak_flops_per_s = 0;     ///< dense bf16/fp16 tensor-core peak
  std::uint64_t fp8_peak_flops_per_s = 0; ///< dense FP8 tensor-core peak; 0: the GPU has none
  std::uint64_t hbm_bw_bytes_per_s = 0;
  std::uint64_t memory_bytes = 0;         ///< HBM capacity
  std::uint64_t memory_reserve_bytes = 0; ///< workspace, fragmentation, CUDA context
  TimePs kernel_launch_ps = 0;            ///< per-kernel overhead
  /// Host (CPU) time per launched CUDA kernel (framework dispatch + launch call); an op costs
  /// its kernel count (model::Op) times this. The host thread of each GPU issues its tasks in
  /// program order and a task cannot start before its issue.
  TimePs host_kernel_ps = 0;
  /// Host time of one collective call or pipeline send/recv beyond its NCCL kernel
  /// (torch.distributed + NCCL enqueue), separate from the link and protocol latencies.
  TimePs host_collective_ps = 0;
  /// Host time of one GEMM call beyond its kernels' host_kernel: each forward, input-gradient
  /// or weight-gradient task of a GEMM or attention op (cuBLAS/cuBLASLt heuristics and
  /// workspace set-up, autograd's matmul wrapper; docs/host.md).
  TimePs host_gemm_ps = 0;
  /// Any host cost set: the host model is on (docs/host.md).
  bool host_model_on() const { return host_kernel_ps > 0 || host_collective_ps > 0 || host_gemm_ps > 0; }
  EfficiencyCurve gemm;                   ///< vs FLOPs of one GEMM
  EfficiencyCurve attention;              ///< batched QK^T / ·V GEMMs (or flash kernel), vs FLOPs
  EfficiencyCurve memory_bound;           ///< elementwise / norm / softmax kernels, vs bytes
  double contention_factor = 0.0;         ///< see sim::GpuDesc
  double comm_contention = 0.0;           ///< see sim::GpuDesc (gpu.comm_contention; 0 when the profile omits it)
  // Node and cluster
  int nodes = 1;
  int gpus_per_node = 8;
  IntraNode intra_node = IntraNode::kNvSwitch;
  LinkSpec nvlink;                        ///< per GPU per direction, to the NVSwitch
  /// GPUs of one NVLink domain (node.nvlink_domain_gpus): consecutive nodes whose GPUs share
  /// one NVLink switch fabric (GB200 NVL72: 72 GPUs in 18 trays of 4); 0: one node.
  int nvlink_domain_gpus = 0;
  /// GPUs of one NVLink domain: nvlink_domain_gpus, or gpus_per_node when it is 0.
  int domain_gpus() const { return nvlink_domain_gpus > 0 ? nvlink_domain_gpus : gpus_per_node; }
  LinkSpec pcie;                          ///< per GPU per direction, to its host bridge
  int gpus_per_pcie_switch = 2;           ///< GPUs sharing one bridge uplink (pcie nodes)
  LinkSpec pcie_host;                     ///< bridge uplink to the CPU root complex
  int nics_per_node = 8;                  ///< rail-aligned: GPU i uses NIC i % nics
  LinkSpec nic;                           ///< per NIC per direction
  double collective_efficiency = 1.0;     ///< achieved/link bandwidth of NCCL ring steps
  CollectiveModel collective_model = CollectiveModel::kAlphaBeta;
  NcclSpec nccl;                          ///< used when collective_model is kNccl
  bool operator==(const HardwareSpec&) const = default;
};

/// Activation recomputation strategies, in the paper's order (its figures' bars).
enum class RecomputeKind { kNone, kFull, kSelective, kCheckmate, kLynxHeu, kLynxOpt };

/// Scenario-file names of the strategies (recompute.strategy), indexed by RecomputeKind: the one
/// list of these spellings (the field table, to_string, the paper experiment derive from it).
inline constexpr std::array<const char*, 6> kRecomputeKindNames = {
    "none", "full", "selective", "checkmate", "lynx-heu", "lynx-opt"};
static_assert(kRecomputeKindNames.size() == static_cast<std::size_t>(RecomputeKind::kLynxOpt) + 1);

/// Scenario-file name of a recomputation strategy.
constexpr const char* recompute_kind_name(RecomputeKind kind) {
  return kRecomputeKindNames[static_cast<std::size_t>(kind)];
}
enum class FullMethod { kUniform, kBlock };

enum class PartitionKind { kUniform, kBalanced };

struct RecomputeSpec {
  RecomputeKind strategy = RecomputeKind::kNone;
  FullMethod method = FullMethod::kUniform;
  int num_layers = 1;  ///< full: uniform = layers per recompute chunk; block = layers per stage
  /// Layers per pipeline stage: equal, or chosen by recomputation-aware dynamic programming.
  PartitionKind partition = PartitionKind::kUniform;
  /// lynx-opt / checkmate: branch-and-bound nodes per CBC pass of a stage's MILP (a budget
  /// independent of the machine's speed; strategies/milp_planner.hpp).
  int solver_node_limit = 100000;
  bool operator==(const RecomputeSpec&) const = default;
};

/// exact: the event engine runs the whole iteration; fast: steps simulated alone, composed (fast/).
enum class SimMode { kExact, kFast };

/// Tasks a simulation may build unless the scenario raises sim.max_tasks: about 12 GiB and two
/// minutes of CPU (measured on GPT-175B, 1024 GPUs, 4.5M tasks: 163 B and 1.5 us of CPU each).
inline constexpr int kDefaultMaxTasks = 50'000'000;

struct SimSpec {
  bool exploit_symmetry = true;  ///< simulate one TP rank and one DP replica (exact, tested)
  int max_tasks = kDefaultMaxTasks;  ///< refuse a simulation estimated to build more tasks
  SimMode mode = SimMode::kExact;
  bool fast_forward = true;      ///< skip repeating 1F1B steady-state periods (exact, proven per run)
  /// Exact mode: the planners rank their alternatives in fast mode and run exactly only those
  /// that may beat the plan found (see runner/planning.hpp).
  bool fast_screening = true;
  /// One-GPU stand-in for communication (live mode on one GPU; 0: off): one GPU of the layout
  /// is simulated (tp rank 0; pp = dp = 1) and each TP collective becomes copy-engine transfers
  /// of the bytes that rank would send, device to host then host to device, over two links of
  /// this bandwidth (docs/live.md).
  std::uint64_t comm_standin_bw_bytes_per_s = 0;
  TimePs comm_standin_latency_ps = 0;  ///< latency of each of the two transfers
  bool operator==(const SimSpec&) const = default;
};

/// GPUs the layout uses: tp · cp · pp · dp (overflow-checked).
inline std::int64_t gpus_used(const ParallelSpec& p) {
  return checked_product("parallel.tp x parallel.cp x parallel.pp x parallel.dp", {p.tp, p.cp, p.pp, p.dp});
}

/// Ranks that hold a copy of every parameter of a GPU's shard: dp · cp (Megatron-Core's
/// data-parallel group with context parallelism), over which gradients are reduced and the
/// distributed optimizer shards.
inline int grad_replicas(const ParallelSpec& p) { return p.dp * p.cp; }

/// The expert tensor-parallel degree in force: parallel.etp, or tp where it is 0.
inline int expert_tp(const ParallelSpec& p) { return p.etp > 0 ? p.etp : p.tp; }
/// Whether `p`'s pipeline stages exchange blocking (Megatron's _communicate with
/// torch.cuda.synchronize()). kAuto follows Megatron-Core (megatron/training/arguments.py at
/// d98e8a64dd): its non-interleaved 1F1B forces overlap_p2p_comm off and exchanges blocking;
/// its interleaved schedule overlaps; gpipe and zb-h1 are not Megatron-Core's, and overlap.
inline bool blocking_exchange(const ParallelSpec& p) {
  if (p.pp == 1) return false;
  if (p.pipeline_exchange == PipelineExchange::kAuto) return p.schedule == ScheduleKind::kOneFOneB;
  return p.pipeline_exchange == PipelineExchange::kBlocking;
}

/// Micro-batches each pipeline runs per iteration: global_batch / (micro_batch · dp).
inline std::int64_t micro_batches_per_pipeline(const ParallelSpec& p) {
  return p.global_batch /
         checked_product("parallel.micro_batch x parallel.dp", {p.micro_batch, p.dp});
}

struct Scenario {
  std::string name;          ///< file stem or "default"
  std::string source_file;   ///< path it was read from ("<built-in>" for the default)
  ModelSpec model;
  ParallelSpec parallel;
  HardwareSpec hardware;
  RecomputeSpec recompute;
  SimSpec sim;
};

}  // namespace lynx
