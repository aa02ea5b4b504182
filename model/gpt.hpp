#pragma once
/// Megatron-style decoder workload (GPT, and the Llama family: grouped-query attention, SwiGLU,
/// RMSNorm, rotary embeddings, untied embeddings, no biases): presets, parameter and FLOP
/// formulas, and the per-layer op graph (FLOPs, HBM bytes, activation bytes saved for backward,
/// TP/SP collectives) for one pipeline-stage GPU (tensor-parallel degree t, micro-batch b). All
/// sizes in bytes, 16-bit training (bf16/fp16 activations, 1-byte dropout masks).
#include "common/error.hpp"
#include "scenarios/scenario.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lynx::model {

/// A model shape or parallel layout that cannot be simulated. keys(): the scenario keys
/// involved, in the order the message names them (resolve_scenario points at one of them).
class LayoutError : public Error {
 public:
  LayoutError(ErrorCode code, std::vector<std::string> keys, const std::string& message)
      : Error(code, message), keys_(std::move(keys)) {}
  /// The scenario keys involved, in the order the message names them.
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  std::vector<std::string> keys_;
};

/// Fills layers/hidden/heads/kv_heads/ffn_hidden/vocab and the architecture choices from
/// spec.preset (if set; explicit fields win), else GPT's defaults (kv_heads = heads, ffn 4h,
/// vocab 51200, GeLU, LayerNorm, learned positions, tied embeddings, biases), and checks the
/// shape; throws LayoutError naming the preset or field. Known names: preset_names(). Scenarios
/// get this once, from resolve_scenario; every other function here takes a resolved ModelSpec.
ModelSpec resolve_model(const ModelSpec& spec);
/// Names of the model presets (GPT and Llama), in `lynxsim presets` order.
std::vector<std::string> preset_names();
/// The model.* keys `preset` fills when a scenario leaves them out (empty for an unknown name):
/// errors about those keys point at model.preset.
std::vector<std::string> preset_keys(const std::string& preset);

/// Checks that a resolved model shards over `p`: heads, kv_heads, ffn_hidden and vocab divisible by tp,
/// seq_len divisible by tp with sequence parallelism, layers divisible by pp·virtual_stages.
/// Throws LayoutError with one message per problem (the first found).
void check_layout(const ModelSpec& m, const ParallelSpec& p);
/// Layers on each pipeline stage (GPU k of pp, all its model chunks): layers / pp each, or
/// parallel.first_stage_layers / last_stage_layers on the first / last stage with the rest split
/// evenly over the others (Megatron-Core's uneven pipeline). Throws LayoutError naming the keys
/// when they do not divide (or a stage's count is not divisible by virtual_stages).
std::vector<int> pipeline_stage_layers(int layers, const ParallelSpec& p);

/// 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)) — Narayanan et al. 2021, Eq. 2 (incl. position emb.).
/// Counted exactly per layer (layer_parameter_count_per_gpu at tp 1: 4h² + 2hf + 9h + f for GPT,
/// equal to Eq. 2 when f = 4h), plus V·h (twice when untied) and s·h (learned positions only);
/// final norm omitted as in Eq. 2.
double parameter_count(const ModelSpec& m);
/// Model FLOPs per iteration: forward + backward of every op (layer_ops × layers, embedding,
/// LM head and loss) with no recomputation, counted from the ops themselves so any ffn_hidden
/// is right; flash attention's recomputed QK^T is not model work. Equals Eq. 7 when f = 4h.
double model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);
/// Korthikanti et al. 2022 Eq. 7, closed form (assumes f = 4h, as do Eq. 8 and Eq. 3 below).
double eq7_model_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);
/// Eq. 8: executed FLOPs with selective recomputation.
double selective_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);
/// Narayanan et al. 2021 Eq. 3: executed FLOPs with full recomputation.
double full_recompute_flops_per_iteration(const ModelSpec& m, std::int64_t global_batch);

/// FLOPs in Op are matmul FLOPs only (2·m·n·k per GEMM), the convention of Eq. 7/8 and of
/// Narayanan Eq. 3; memory-bound ops report 0 FLOPs (the compute model ignores them anyway).
enum class OpKind : std::uint8_t {
  kGemm,         ///< dense GEMM (tensor cores)
  kAttention,    ///< batched QK^T / ·V GEMMs, or the fused flash-attention kernel
  kMemoryBound,  ///< LayerNorm / RMSNorm, softmax, dropout, GeLU / SwiGLU, rotary, residual
                 ///< add, cross-entropy
  kCollective,   ///< TP all-reduce / reduce-scatter / all-gather
                 ///< (`collective` may be kNone when only the backward communicates)
};

/// The op groups a recomputation plan decides about (README "Lynx, as this project defines it": Decisions).
enum class OpGroup : std::uint8_t {
  kPost,           ///< the small post-collective tensors: LN2 input and both residual dropout
                   ///< masks — keeping them makes every other group's recompute local
  kAttnProjInput,  ///< QKV GEMM input and its outputs Q, K, V (saved on the QKV GEMM, or on
                   ///< rotary, which rotates Q, K: the core's backward reads them, and
                   ///< selective recomputation keeps them), out-projection input
  kAttnCore,       ///< QK^T, softmax, dropout, ·V: softmax output, dropout mask and output
                   ///< (the 5·a·s²·b/t that selective recomputation drops); with GQA and no
                   ///< flash attention also K, V expanded to every query head
  kMlp,            ///< FC1 input, GeLU (or SwiGLU) input, FC2 input; in an MoE layer every
                   ///< tensor of the MoE MLP but the experts' FC2 input (kMoeAct)
  /// MoE layers only (empty in dense ones): the routed experts' FC2 input, i.e. their
  /// activation output, as Megatron-Core's `--recompute-modules moe_act` drops it; its
  /// recompute re-runs the experts' activation alone, from their kept FC1 output
  /// (model/gpt_moe.cpp), so it is communication-free.
  kMoeAct,
  kLayerInput,     ///< the layer input (kept by every strategy); also every embedding/head op
};

/// Plan-file names of the op groups, indexed by OpGroup (the one list of these spellings).
inline constexpr std::array<const char*, 6> kOpGroupNames = {"post", "proj", "core", "mlp", "moe_act", "input"};
/// The layer input is the last group: memory tags after it (schedule/builder.hpp) build on that.
static_assert(kOpGroupNames.size() == static_cast<std::size_t>(OpGroup::kLayerInput) + 1);

/// Plan-file name of an op group: post, proj, core, mlp, moe_act, input.
constexpr const char* op_group_name(OpGroup group) {
  return kOpGroupNames[static_cast<std::size_t>(group)];
}

/// kBroadcast: no layer op has it; the micro-batch load's broadcasts (schedule/program_builder.hpp
/// micro_batch_load_bytes) are collectives live mode launches as one.
/// kAllToAll: the MoE token dispatch and combine over the expert-parallel group.
enum class CollectiveKind : std::uint8_t { kNone, kAllReduce, kReduceScatter, kAllGather, kBroadcast, kAllToAll };

/// The GPUs a layer op's collective runs over: the tensor-parallel group, the expert-parallel
/// group, or the expert-tensor-parallel group (model/expert_grid.hpp; the TP group's GPUs when
/// etp = tp).
enum class CommGroup : std::uint8_t { kTp, kEp, kEtp };

/// Which tensors an op's saved_bytes are: what it reads (its input, the previous op's output),
/// what it writes, or both. Ops of a layer form a chain (op i reads op i−1's output; op 0 reads
/// the layer input), so this is enough for a planner to know what must be re-run to bring a
/// dropped tensor back (strategies/recompute_plan.cpp).
enum class Saves : std::uint8_t { kInput, kOutput, kInputAndOutput };

struct Op {
  std::string name;         ///< e.g. "qkv_gemm", "softmax", "tp_allreduce_attn"
  OpKind kind = OpKind::kGemm;
  OpGroup group = OpGroup::kAttnCore;
  double fwd_flops = 0;     ///< per GPU
  double fwd_bytes = 0;     ///< HBM bytes read + written, per GPU
  /// Backward split as Megatron runs it: input-gradient (dgrad) and weight-gradient (wgrad).
  double bwd_dgrad_flops = 0, bwd_dgrad_bytes = 0;
  double bwd_wgrad_flops = 0, bwd_wgrad_bytes = 0;
  /// Activation bytes this op's backward needs that the forward leaves in memory (per GPU);
  /// exception: Q, K, V are counted on qkv_gemm, which produces them (see OpGroup).
  std::uint64_t saved_bytes = 0;
  Saves saves = Saves::kInput;
  /// GEMM shape per GPU (kGemm: one GEMM; kAttention: `gemm_batch` GEMMs) — C[m×n] = A[m×k]·B[k×n].
  std::int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0, gemm_batch = 1;
  CollectiveKind collective = CollectiveKind::kNone;  ///< forward collective
  CollectiveKind bwd_collective = CollectiveKind::kNone;  ///< its mirror in backward
  std::uint64_t collective_bytes = 0;  ///< full (unsharded) tensor size of the collective
                                       ///< (all-to-all: what one rank sends, its own share included)
  CommGroup comm_group = CommGroup::kTp;  ///< the group the collective runs over
  /// Sequence parallelism: this GEMM saved its input sharded (1/t) and all-gathers it again
  /// (this many bytes, full tensor) before its wgrad (Korthikanti et al. 2022, Sec. 4.2.2).
  std::uint64_t bwd_input_allgather_bytes = 0;
  /// kGemm: forward, dgrad and wgrad run on FP8 tensor cores (model.gemm_precision fp8).
  bool fp8 = false;
  /// CUDA kernels Megatron-LM launches for this op — the host's unit of work
  /// (hardware.gpu.host_kernel each): forward (and each recompute of it), input gradient,
  /// weight gradient. docs/host.md derives every count. A collective's NCCL kernel is charged
  /// per call by the program builder, not here.
  int fwd_kernels = 1, bwd_dgrad_kernels = 1, bwd_wgrad_kernels = 0;
  /// kGemm with model.gradient_accumulation_fusion off: HBM bytes of the memory-bound kernel
  /// after the wgrad GEMM that adds its fresh 16-bit gradient into the gradient buffer (one of
  /// bwd_wgrad_kernels); hw_models::op_times times it as a kernel of its own in the wgrad task.
  double bwd_wgrad_accumulate_bytes = 0;
  /// Context parallelism (parallel.cp > 1; the flash-attention op only): the op runs as this
  /// many ring-attention blocks of equal work (its FLOPs and bytes are the sum), block j after
  /// the j-th key/value block has arrived from the previous rank of the ring (model/
  /// gpt_context_parallel.cpp). 1: one kernel, no ring.
  int cp_steps = 1;
  /// Bytes of one key/value block (K and V of seq_len / cp tokens, kv_heads / tp heads, 16-bit):
  /// what each forward ring step sends to the next rank; backward steps send it and its gradient.
  std::uint64_t cp_kv_block_bytes = 0;
};

/// Whether a collective op's forward (`backward` false) or backward collective moves data under
/// `p`: it has one, and its group (tp, or ep for the MoE all-to-alls) has more than one GPU.
bool communicates(const Op& op, const ParallelSpec& p, bool backward = false);

/// Forward ops of one transformer layer in execution order (Megatron-LM's GPT layer, as the
/// README's "What is modelled" lists it); the backward runs them in reverse. With tp > 1 there are four TP ops per layer:
///   no SP: tp_copy_{attn,mlp} (before QKV / FC1: forward nothing, backward all-reduce) and
///          tp_allreduce_{attn,mlp} (after out-proj / FC2: forward all-reduce, backward nothing);
///   SP:    sp_allgather_{attn,mlp} (forward all-gather, backward reduce-scatter) and
///          sp_reducescatter_{attn,mlp} (forward reduce-scatter, backward all-gather).
/// Sum of saved_bytes = Korthikanti et al. 2022 per-layer activation memory, exactly (GPT).
/// Llama layers: rmsnorm1/2 for ln1/2, `rotary` after qkv_gemm, `gqa_expand_kv` before
/// qk_matmul (GQA without flash attention), `swiglu` for gelu (FC1 twice as wide).
std::vector<Op> layer_ops(const ModelSpec& m, const ParallelSpec& p);
/// One of `chunks` equal row blocks of a GEMM op (Megatron-Core's TP-comm overlap splits the
/// token rows): m / chunks rows, the same weight; FLOPs and HBM bytes of that shape, nothing
/// saved (the whole op's saved_bytes stay with the op). `gemm.gemm_m` must divide by `chunks`.
Op gemm_row_chunk(const Op& gemm, std::int64_t chunks);
/// One of the op's cp_steps ring-attention blocks: its FLOPs, bytes and kernels divided by
/// cp_steps (the load-balanced split gives every block equal work), nothing saved. An op
/// without a ring (cp_steps 1) comes back unchanged.
Op ring_attention_block(const Op& attention);
/// Embedding lookup (+ SP scatter) on the first stage.
std::vector<Op> embedding_ops(const ModelSpec& m, const ParallelSpec& p);
/// Final LayerNorm, LM head GEMM and vocab-parallel cross-entropy on the last stage.
std::vector<Op> head_ops(const ModelSpec& m, const ParallelSpec& p);

/// Mixture of experts (model/gpt_moe.cpp). Whether `m` has MoE layers (model.moe.num_experts > 0).
bool is_moe(const ModelSpec& m);
/// Whether layer `layer` (0-based) is an MoE layer: from model.moe.first_dense_layers on,
/// every model.moe.layer_freq-th one.
bool is_moe_layer(const ModelSpec& m, int layer);
/// MoE layers of `m` (0 for a dense model).
int moe_layer_count(const ModelSpec& m);
/// Whether `m` mixes dense and MoE layers (model.moe.first_dense_layers > 0 or layer_freq > 1
/// leaving some layer dense).
bool mixes_dense_and_moe(const ModelSpec& m);
/// `m` with its MoE turned off: the dense layers of a MoE model (ffn_hidden MLP).
ModelSpec dense_layer_model(const ModelSpec& m);
/// Parameters of one MoE layer's routed experts per GPU: E/ep experts, each FC1 (gates·h·f_e,
/// SwiGLU gates 2) and FC2 (f_e·h) sharded over the expert tensor-parallel degree (= tp);
/// 0 for a dense model. The router and the shared experts are counted with the layer.
std::uint64_t layer_expert_parameter_count_per_gpu(const ModelSpec& m, const ParallelSpec& p);
/// Parameters one token passes through (attention, norms, router, top-k routed experts, shared
/// experts, embedding and output layer): the "active" count MoE papers publish; for a dense
/// model, parameter_count.
double active_parameter_count(const ModelSpec& m);

/// Parameters (elements, not bytes) of one layer per GPU, for static memory:
/// QKV (3h²+3h)/t, out-proj h²/t + h, FC1 (hf+f)/t, FC2 fh/t + h, two LayerNorms 4h; with GQA
/// QKV is h·(h + 2·kv·d)/t (d = h/a), SwiGLU doubles FC1 (2hf/t), RMSNorm has γ only (2h for
/// both), and without biases the bias terms go.
std::uint64_t layer_parameter_count_per_gpu(const ModelSpec& m, const ParallelSpec& p);
/// Parameters on the first stage besides its layers: word embedding V·h/t + position s·h
/// (none with rotary embeddings).
std::uint64_t embedding_parameter_count_per_gpu(const ModelSpec& m, const ParallelSpec& p);
/// Parameters on the last stage besides its layers: the final norm (2h, RMSNorm h), plus the
/// output layer V·h/t when untied, or (tied, pp > 1) the copy of the word embedding Megatron
/// keeps there for the LM head.
std::uint64_t head_parameter_count_per_gpu(const ModelSpec& m, const ParallelSpec& p);
/// Word-embedding parameters whose gradient the first and last stage all-reduce after the
/// backward (Megatron-LM's embedding group): V·h/t when tied with pp > 1, else 0.
std::uint64_t tied_embedding_parameter_count_per_gpu(const ModelSpec& m, const ParallelSpec& p);

/// Parameter tensors (weights, biases, norm parameters: what the optimizer's multi-tensor
/// kernels and the fp32 gradient copy iterate over) of one layer, of the embedding (word,
/// and position unless rotary) and of the head (final norm, and the output layer when untied
/// or, tied with pp > 1, the embedding copy Megatron keeps on the last stage).
std::int64_t layer_parameter_tensors(const ModelSpec& m);
std::int64_t embedding_parameter_tensors(const ModelSpec& m);
std::int64_t head_parameter_tensors(const ModelSpec& m, const ParallelSpec& p);

/// Kernels apex's multi_tensor_apply (csrc/multi_tensor_apply.cuh) launches for one pass over
/// `tensors` tensors of `elements` elements in all with `depth` tensor lists (1: the L2 norm,
/// 2: scale / copy, 4: Adam): a launch takes at most {110, 64, 48, 36, 30}[depth − 1] tensors
/// and 320 blocks of 65536-element chunks (chunk_size 2048·32, as Megatron and FusedAdam call
/// it); it starts a new launch when either fills.
int multi_tensor_launches(double elements, std::int64_t tensors, int depth);

}  // namespace lynx::model
