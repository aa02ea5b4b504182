#pragma once
/// The program builder's working state (schedule::build_program): the Builder class that turns
/// a plan into per-GPU task programs, and its records. Internal to schedule/: only the
/// builder's .cpp files include it (program_builder.cpp: entry points and the iteration's end;
/// builder_tasks.cpp: tasks, flows and collectives; builder_layers.cpp: one layer's ops;
/// builder_steps.cpp: pipeline steps of one GPU).
#include "schedule/program_builder.hpp"

#include "hw_models/collectives.hpp"
#include "common/error.hpp"
#include "hw_models/compute_model.hpp"
#include "model/expert_grid.hpp"
#include "model/gpt.hpp"
#include "model/sharding.hpp"
#include "schedule/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <array>
#include <functional>
#include <iterator>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>

// Hidden: internal to the library (see sim/execution.hpp).
namespace lynx::schedule {
namespace detail __attribute__((visibility("hidden"))) {

using hw_models::OpTimes;
using hw_models::op_times;
using model::Workload;
using strategies::Action;
using strategies::LayerDecision;
using strategies::RecomputePlan;
using strategies::StagePlan;
using strategies::Window;
using strategies::recompute_ops;

using model::Op;
using model::OpGroup;
using model::OpKind;

/// A task of this op is one GEMM call for the host model (hardware.gpu.host_gemm): a linear
/// layer's forward, dgrad or wgrad, or a batched attention GEMM (or the flash kernel).
inline bool is_gemm_call(const Op& op) { return op.kind == OpKind::kGemm || op.kind == OpKind::kAttention; }

/// Whether layer l's on-demand recompute ran with the layer above's: l + 1 drops its input, so
/// the two are one recompute chunk (full uniform recompute, num_layers > 1).
inline bool recomputed_with_layer_above(const strategies::StagePlan& sp, int l) {
  const auto above = static_cast<size_t>(l + 1);
  return above < sp.layers.size() && sp.layers[above].action(OpGroup::kLayerInput) != Action::kKeep;
}

/// Task-name ids of one op's tasks (interned once, not per task).
struct OpNames {
  std::uint32_t fwd = 0, dgrad = 0, wgrad = 0, re = 0, bwd = 0, input_ag = 0;
};

struct OpWithTimes {
  Op op;
  OpTimes t;
  OpNames names;
  OpTimes block;  ///< one ring-attention block (op.cp_steps > 1; model::ring_attention_block)
};

/// Identifies one rendezvous instance across the members of a communicator in the full
/// simulation: members run identical programs, so the n-th collective on a communicator is the
/// same instance on every member.
struct GroupKey {
  int communicator;
  std::int64_t sequence;
  bool operator<(const GroupKey& o) const {
    return communicator != o.communicator ? communicator < o.communicator : sequence < o.sequence;
  }
};

class Builder {
 public:
  Builder(const Scenario& sc, const RecomputePlan& plan, const hw_models::Topology& topo,
          const Workload& workload, const StageSteps* part = nullptr, int built_pairs = 0)
      : sc_(sc), p_(sc.parallel), plan_(plan), topo_(topo), work_(workload), part_(part), built_pairs_(built_pairs) {}
  /// Pairs whose starts give periodic_from_per_gpu and period_cut_per_gpu (sim::FullProgram):
  /// dependencies reach at most one pair back across stages, so copies of the pair before the
  /// cut depend on pairs from periodic_from on.
  static constexpr int kPeriodicFromPair = 1, kCutPair = 4;

  BuiltProgram build();

 private:
  // ----- per-op tables -----
  std::vector<OpWithTimes> with_times(const std::vector<Op>& ops, NamedOp::List list);

  // ----- program construction helpers -----
  /// The instance label (e.g. "mb3.L12.") later tasks carry until the next call.
  void set_instance(const std::string& label) {
    auto [it, inserted] = instance_ids_.try_emplace(label, static_cast<std::uint32_t>(prog_.instances.size()));
    if (inserted) prog_.instances.push_back(label);
    instance_ = it->second;
  }
  std::uint32_t intern_name(const std::string& name) {
    auto [it, inserted] = name_ids_.try_emplace(name, static_cast<std::uint32_t>(prog_.names.size()));
    if (inserted) prog_.names.push_back(name);
    return it->second;
  }
  /// intern_name(name) for a name every step uses, kept in `id` after the first call (so ids
  /// stay in first-use order) instead of hashed again per task.
  std::uint32_t intern_once(std::uint32_t& id, const char* name) {
    if (id == kNoName) id = intern_name(name);
    return id;
  }
  static constexpr std::uint32_t kNoName = UINT32_MAX;
  struct StepNames {
    std::uint32_t forward = kNoName, backward = kNoName, send_activation = kNoName, send_gradient = kNoName,
                  recompute_ready = kNoName, exchange_posted = kNoName, exchange_done = kNoName;
  };
  StepNames step_names_;
  sim::TagId tag_of(OpGroup g) const { return static_cast<sim::TagId>(g); }
  /// Reserves the program's arrays for `num_gpus` GPUs like the first one (+5%), so they do not
  /// grow by doubling (each growth copies them and briefly holds twice their size). Capacity
  /// only: the program built is the same. The large ones are advised for huge pages.
  void reserve_like_first_gpu(std::size_t num_gpus);

  struct TaskArgs {
    sim::StreamId stream = kCompute;
    sim::TaskKind kind = sim::TaskKind::kKernel;
    sim::Category category = sim::Category::kCompute;
    TimePs work_ps = 0;
    std::uint32_t name = 0;
    double flops = 0;
    std::int32_t group = -1;
    /// CUDA kernels it launches (model::Op's counts); -1: one for a kernel task. A kernel
    /// task without work launches none.
    int kernels = -1;
    /// A collective call or pipeline send: hardware.gpu.host_collective on top of its kernel.
    bool host_call = false;
    /// A GEMM call (a task of a GEMM or attention op): hardware.gpu.host_gemm on top of its kernels.
    bool gemm_call = false;
  };
  /// Host time to issue `a`: hardware.gpu.host_kernel per kernel it launches, plus
  /// gpu.host_collective for a collective call or send and gpu.host_gemm for a GEMM call.
  TimePs host_cost_ps(const TaskArgs& a) const;

  /// Appends a task of the current GPU; deps are the ids in `deps` (-1 entries skipped).
  sim::TaskId add_task(const TaskArgs& a, std::initializer_list<sim::TaskId> deps) {
    return add_task(a, deps.begin(), deps.end());
  }
  template <typename It>
  sim::TaskId add_task(const TaskArgs& a, It dep_begin, It dep_end) {
    sim::Task t;
    t.gpu = gpu_;
    t.stream = a.stream;
    t.kind = a.kind;
    t.category = a.category;
    t.work_ps = a.work_ps;
    t.name = a.name;
    t.instance = instance_;
    t.group = a.group;
    t.first_dep = static_cast<std::uint32_t>(prog_.deps.size());
    for (It it = dep_begin; it != dep_end; ++it)
      if (*it >= 0) prog_.deps.push_back(*it);
    t.num_deps = static_cast<std::uint32_t>(prog_.deps.size()) - t.first_dep;
    t.first_flow = static_cast<std::uint32_t>(prog_.flows.size());
    t.first_mem = static_cast<std::uint32_t>(prog_.mem.size());
    if (host_model_) {
      if (host_wait_until_ >= 0) {
        prog_.host_waits.push_back({static_cast<sim::TaskId>(prog_.tasks.size()), host_wait_until_, host_clock_ps_});
        host_wait_until_ = -1;
      }
      // The GPU's host thread issues its tasks in program order, one after another.
      host_clock_ps_ = checked_add(host_clock_ps_, host_cost_ps(a), "a GPU's host issue clock (hardware.gpu.host_kernel, gpu.host_collective, gpu.host_gemm)");
      prog_.issue_ps.push_back(host_clock_ps_);
    }
    prog_.tasks.push_back(t);
    flops_.push_back(a.flops);
    const auto id = static_cast<sim::TaskId>(prog_.tasks.size() - 1);
    if (blocking_exchange_) stream_tail_[a.stream] = id;
    return id;
  }
  /// Host model: the current GPU's host thread blocks, before issuing its next task, until
  /// `until` has ended on the GPU (sim::Program::host_waits). Without the host model, or for
  /// `until` < 0, nothing.
  void host_waits_for(sim::TaskId until) {
    if (host_model_ && until >= 0) host_wait_until_ = until;
  }
  /// Adds a dependency slot to be filled later with the task registered under `key` (in
  /// transfers_, or with `posted` in exchanges_posted_).
  void add_pending_dep(sim::TaskId task, std::int64_t key, bool posted = false) {
    if (part_) return;  // a stage built alone: other stages' transfers are not waited for
    // Only valid for the task just added (its deps range is the tail of prog_.deps).
    LYNX_CHECK(task == static_cast<sim::TaskId>(prog_.tasks.size() - 1), "pending dep order");
    pending_.push_back({static_cast<std::uint32_t>(prog_.deps.size()), key, posted});
    prog_.deps.push_back(-1);
    prog_.tasks.back().num_deps++;
  }
  void add_mem(sim::TaskId task, std::int64_t bytes, sim::TagId tag, bool at_end) {
    LYNX_CHECK(task == static_cast<sim::TaskId>(prog_.tasks.size() - 1), "mem order");
    if (bytes == 0) return;
    prog_.mem.push_back({bytes, tag, at_end});
    prog_.tasks.back().num_mem++;
  }
  /// `payload_bytes` and `efficiency` only label the trace (0: the payload is `bytes`).
  void add_flow(sim::TaskId task, hw_models::Rank src, hw_models::Rank dst, std::uint64_t bytes,
                std::uint64_t payload_bytes = 0, double efficiency = 1.0);
  /// In the reduced simulation, a link used by a GPU that is not simulated carries, by
  /// symmetry, the same traffic as the same-role link of the simulated GPU of its stage.
  sim::LinkId map_link(sim::LinkId l) const {
    return symmetric_ ? topo_.mirror_link(l, rank_to_rep_) : l;
  }

  /// Emits a collective for the current GPU as one comm task per phase (chained on `stream`);
  /// returns the last task. `deps` gate the first phase.
  sim::TaskId emit_collective(sim::StreamId stream, sim::Category cat, hw_models::Collective kind,
                              const std::vector<hw_models::Rank>& ranks, int communicator,
                              std::uint64_t bytes, std::uint32_t name,
                              std::initializer_list<sim::TaskId> deps);
  /// The one-GPU stand-in of a collective (sim.comm_standin): the bytes this rank would send
  /// go device to host, then host to device, on `stream`.
  sim::TaskId emit_standin(sim::StreamId stream, sim::Category cat, const std::vector<hw_models::Phase>& phases,
                           std::uint32_t name, std::initializer_list<sim::TaskId> deps);
  const std::vector<hw_models::Phase>& phase_cache(hw_models::Collective kind, const std::vector<hw_models::Rank>& ranks,
                                            std::uint64_t bytes);
  std::int32_t group_id(int communicator) {
    if (symmetric_ || communicator < 0) return -1;
    const GroupKey key{communicator, comm_sequence_[{gpu_, communicator}]++};
    auto [it, inserted] = groups_.try_emplace(key, next_group_);
    if (inserted) ++next_group_;
    return it->second;
  }

  // ----- the training step -----
  void build_gpu(int stage, int dp_rank, int tp_rank);
  /// Gradient all-reduce bookkeeping of one GPU: with bucketed overlap, gradients fill buckets
  /// (dp_bucket_bytes) that are all-reduced as soon as full and at the end of a chunk's last
  /// backward; otherwise everything is reduced once after the last step.
  struct DpBuckets {
    std::uint64_t bucket_params = 0;  ///< gradients waiting in the open bucket
    std::uint64_t total_params = 0;   ///< gradients handed to all-reduces so far (or counted for the end)
    /// The same for the routed experts' gradients, reduced over the expert-data-parallel group.
    std::uint64_t expert_bucket_params = 0;
    std::uint64_t expert_total_params = 0;
    std::vector<sim::TaskId> tasks;   ///< what the optimizer step waits for
    std::int64_t held_bytes = 0;      ///< unsharded gradients of the open bucket (sharding gradients)
  };
  /// All-reduces the open bucket (if any) after `after` and empties it.
  void flush_dp_bucket(DpBuckets& dp, sim::TaskId after);
  /// Sharding gradients: `params` unsharded gradients held from `after` until their bucket's
  /// reduce-scatter (flush_dp_bucket frees them).
  void hold_unsharded_grads(DpBuckets& dp, std::uint64_t params, sim::TaskId after);
  /// The same for the open expert-gradient bucket.
  void flush_expert_bucket(DpBuckets& dp, sim::TaskId after);
  /// What the steps of the current GPU carry from one to the next.
  struct GpuSteps {
    sim::TaskId compute_tail = -1;  ///< the last compute task of the previous step
    DpBuckets dp;
  };
  /// Global layer `layer`'s gradients are final after `after` (bucketed: into the open bucket).
  void layer_gradients_final(GpuSteps& g, int layer, sim::TaskId after);
  /// Virtual stage vs's gradients are final after `after`: its embedding / head parameters
  /// join the last bucket, which is flushed (or everything is counted for the end).
  void chunk_gradients_final(int vs, GpuSteps& g, sim::TaskId after);
  /// One pipeline step of the current GPU: its virtual stage, plan and instance prefix.
  struct StepInfo {
    PipeStep st;
    int vs = 0;
    const StagePlan& sp;
  };
  StepInfo step_info(const PipeStep& st) const;
  /// The step's instance label: "mb3." or "mb3.c1." (interleaved).
  std::string step_label(const StepInfo& step) const;
  /// The instance of the step (l = -1) or of its layer l ("mb3.L12." for the stage's l-th layer).
  void set_step_instance(const StepInfo& step, int l = -1);
  void set_layer_instance(const StepInfo& step, int l) { set_step_instance(step, l); }
  /// A forward step: receive, embedding, layers (issuing forward-window recomputes for `next`,
  /// the step after it), head, send.
  void emit_forward_step(const StepInfo& step, const PipeStep* next, GpuSteps& g);
  /// Loading the micro-batch on the first and last virtual stage, after its forward marker
  /// `recv`: the TP broadcasts of Megatron's broadcast_data (micro_batch_load_bytes) and the
  /// host's waits in it. Returns what the step's first forward op waits for.
  sim::TaskId emit_micro_batch_load(sim::TaskId recv);
  /// A backward step: overlapped and on-demand recomputes, layer backwards top-down with their
  /// gradient buckets (`grads_final`: the chunk's last backward), embedding, send.
  void emit_backward_step(const StepInfo& step, bool grads_final, GpuSteps& g);
  /// Called once per backward pass with the kernel after which the compute stream first waits
  /// on a collective: where an overlapped recompute of the layer below can start.
  using WindowHook = std::function<void(sim::TaskId anchor)>;
  struct ForwardChain {
    const std::vector<OpWithTimes>* ops;
    std::span<const int> indices;     ///< which ops, in order
    const LayerDecision* decision;    ///< null: keep everything
    sim::StreamId stream;
    bool recompute;
    const WindowHook* on_window = nullptr;  ///< called at the first wait on a collective
  };
  sim::TaskId emit_forward_chain(const ForwardChain& chain, sim::TaskId wait);
  // ----- context parallelism (builder_context_parallel.cpp) -----
  /// One ring step's transfer on the cp stream: this GPU sends `bytes` to the next rank of its
  /// ring (and, by the same call on every member, receives from the previous one), after
  /// `after`. A rendezvous of the ring in the full simulation, as NCCL's paired send/recv.
  sim::TaskId emit_ring_shift(std::uint64_t bytes, std::uint32_t name, sim::Category category, sim::TaskId after,
                              sim::TaskId also_after = -1);
  /// The forward (or recompute) of a ring-attention op on `args.stream`: cp blocks, block j
  /// after the transfer that brought its key/value block; `after`: what K, V wait for.
  /// `on_wait(waited, last_kernel)` is called before each block that waits on a transfer.
  /// Returns the last block.
  sim::TaskId emit_ring_forward(const OpWithTimes& o, TaskArgs args, sim::TaskId after, std::int64_t saved_bytes,
                                const std::function<void(sim::TaskId, sim::TaskId)>& on_wait);
  /// The backward of a ring-attention op: cp blocks, each after its key/value block; after each
  /// block the partial key/value gradient moves on (once the previous rank's has arrived); the
  /// last one goes back to its owner, which the returned marker (the op's input gradient) waits for.
  sim::TaskId emit_ring_backward(const OpWithTimes& o, TaskArgs args, sim::TaskId after,
                                 const std::function<void(sim::TaskId, sim::TaskId)>& on_wait);
  sim::TaskId emit_forward_ops(const std::vector<OpWithTimes>& ops, const LayerDecision* decision,
                               sim::TaskId after, const WindowHook& on_window = {});
  /// The recompute pass of the l-th layer of `sp` on `stream` (compute: on demand; recompute:
  /// overlapped).
  sim::TaskId emit_recompute(const StagePlan& sp, int l, sim::StreamId stream, sim::TaskId after);
  /// `defer_wgrad` (ZB-H1's B pass): dgrads only; what each weight GEMM's wgrad still needs
  /// (schedule::weight_pass_bytes) stays allocated for emit_weight_ops.
  sim::TaskId emit_backward_ops(const std::vector<OpWithTimes>& ops, sim::TaskId after,
                                const WindowHook& on_window = {}, bool defer_wgrad = false);
  /// ZB-H1's W pass of one layer: the wgrad GEMMs deferred by emit_backward_ops, in backward
  /// order (with SP, each after the all-gather of its sharded input), freeing what they held.
  sim::TaskId emit_weight_ops(const std::vector<OpWithTimes>& ops, sim::TaskId after);
  /// ZB-H1's weight step: every layer's W pass of one micro-batch, top-down, with the gradient
  /// buckets (`grads_final`: the chunk's last weight step).
  void emit_weight_step(const StepInfo& step, bool grads_final, GpuSteps& g);
  bool zero_bubble() const { return p_.schedule == ScheduleKind::kZbH1; }
  /// Memory tag of the output gradients a deferred wgrad holds (ZB-H1 only): the first tag
  /// after the op groups' (tag_of).
  static constexpr sim::TagId kOutputGradTag = static_cast<sim::TagId>(model::kOpGroupNames.size());
  /// The data-parallel reduction of `params` gradients after `after`: an all-reduce over dp, or
  /// with sharding a reduce-scatter in the shard group (then an all-reduce of the shard across
  /// the replicas, shard_group node); its last task frees `held_bytes` of unsharded gradients.
  sim::TaskId emit_dp_allreduce(std::uint64_t params, sim::TaskId after, std::int64_t held_bytes = 0);

  // ----- full sharding (ZeRO-3 / FSDP; builder_sharding.cpp) -----
  /// Per GPU (build_gpu): the shard and replica groups and their communicators.
  void set_shard_groups();
  /// A step's FSDP units (embedding, layers, head; in the step's compute order) start: their
  /// parameter counts; the first unit's all-gather is issued.
  void fsdp_begin_step(const StepInfo& step, bool backward);
  /// A part built alone (fast mode) with a sharded following step: holds the following step's
  /// first unit's gathered parameters from when the whole iteration allocates them to `tail`.
  void fsdp_hold_following(sim::TaskId tail);
  /// Before unit k of the step computes: issues unit k + 1's all-gather (the prefetch) and
  /// returns a task after `after` that waits for unit k's.
  sim::TaskId fsdp_enter_unit(int k, sim::TaskId after);
  /// After unit k computed (`after`): frees its gathered parameters; in backward, holds its
  /// unsharded gradients and reduce-scatters them (into g.dp.tasks).
  void fsdp_leave_unit(int k, sim::TaskId after, bool backward, GpuSteps& g);
  /// The all-gather of unit k of the step (issuing those up to it not yet issued).
  sim::TaskId fsdp_gather(int k);
  /// The step's unit index of its l-th layer.
  int fsdp_layer_unit(int l) const { return fsdp_.layer_unit0 + (fsdp_.backward ? fsdp_.layers - 1 - l : l); }
  bool shards_params() const { return sharding_ == Sharding::kFull; }
  struct FsdpStep {
    std::vector<std::uint64_t> params;  ///< per unit
    std::vector<sim::TaskId> gathers;   ///< issued all-gathers (the task compute waits for)
    bool backward = false;
    int layers = 0, layer_unit0 = 0;
  };
  /// The FSDP units of a step, in its compute order (none issued).
  FsdpStep fsdp_units(const StepInfo& step, bool backward) const;
  FsdpStep fsdp_;
  /// The current GPU's gathered-parameter releases, in all-gather order: all-gather j waits for
  /// release j − 2 (two units resident: the one computing and the one prefetched).
  std::vector<sim::TaskId> fsdp_releases_;
  std::size_t fsdp_issued_ = 0;  ///< all-gathers issued on the current GPU
  Sharding sharding_ = Sharding::kNone;
  int shard_size_ = 1, shard_replicas_ = 1;
  std::vector<hw_models::Rank> shard_ranks_, replica_ranks_;
  int shard_communicator_ = -1, replica_communicator_ = -1;
  sim::TagId gathered_tag_ = 0, unsharded_grad_tag_ = 0;  ///< memory tags (sharding gradients / full)
  /// The routed experts' gradient reduction over the expert-data-parallel group (tp · dp · cp /
  /// (etp · ep) ranks): all-reduce, or reduce-scatter with the distributed optimizer.
  sim::TaskId emit_expert_grad_reduction(std::uint64_t params, sim::TaskId after);
  /// After `reduced` (the gradient reductions): the tied-embedding gradient all-reduce of the
  /// first and last stage (pp > 1, tied); returns what the optimizer step waits for.
  sim::TaskId emit_tied_embedding_allreduce(sim::TaskId reduced);
  /// Megatron's optimizer step over `params` gradients of the stage (`stage_params` in all).
  void emit_optimizer_step(std::uint64_t params, std::uint64_t stage_params, sim::TaskId after);
  /// Pipeline transfer of one micro-batch's activation (forward) or gradient from virtual
  /// stage from_vs to to_vs on the pp stream, after `after`; the receiver waits for it.
  void emit_send(int from_vs, int to_vs, int micro_batch, bool forward, sim::TaskId after);
  /// parallel.pipeline_scatter_gather: the all-gather over tp of a received boundary tensor,
  /// after `received` (returned unchanged when the tensor was sent whole).
  sim::TaskId gather_received(sim::TaskId received);

  /// `sent`: the step's send is its last task (not with blocking exchanges, which send later).
  void add_step_span(const PipeStep& st, sim::TaskId marker, sim::TaskId tail, bool sent) {
    sent = sent && !blocking_exchange_;
    const auto end = static_cast<sim::TaskId>(prog_.tasks.size());
    step_spans_.push_back({gpu_, st, step_first_, marker, tail, sent ? end - 1 : -1, end});
  }

  /// The fast-forward hint of the current GPU (sim::Program::period_tasks_per_gpu): in 1F1B
  /// one period is one (forward, backward) pair of the steady state; GPU 0's pairs anchor them.
  void note_period(const std::vector<sim::TaskId>& pair_starts);

  /// Parameters per GPU of the layers of virtual stage `vs` (each layer's kind's).
  model::LayerParams chunk_layer_params(int vs) const {
    const StagePlan& sp = plan_.stages[static_cast<size_t>(vs)];
    return work_.params_of_layers(sp.first_layer, static_cast<int>(sp.layers.size()));
  }
  /// Parameters per GPU of virtual stage `vs`: its layers, plus embedding / head extras.
  std::uint64_t chunk_params(int vs) const {
    std::uint64_t n = chunk_layer_params(vs).params;
    if (vs == 0) n += work_.embedding_params;
    if (vs == p_.pp * p_.virtual_stages - 1) n += work_.head_params;
    return n;
  }

  /// The current GPU's TP group and DP group (global ranks), set by build_gpu.
  const std::vector<hw_models::Rank>& tp_ranks() const { return tp_ranks_; }
  const std::vector<hw_models::Rank>& dp_ranks() const { return dp_ranks_; }
  int tp_communicator() const { return stage_ * grad_replicas(p_) + dp_rank_; }
  /// The current GPU's context-parallel ring (global ranks, ring order), set by build_gpu.
  const std::vector<hw_models::Rank>& cp_ranks() const { return cp_ranks_; }
  int cp_communicator() const { return 3'000'000 + (stage_ * p_.dp + dp_rank_ / p_.cp) * p_.tp + tp_rank_; }
  int dp_communicator() const { return 1'000'000 + stage_ * p_.tp + tp_rank_; }
  /// Expert parallelism: the current GPU's expert-tensor-parallel, expert-parallel and
  /// expert-data-parallel groups (global ranks; model/expert_grid.hpp), set by build_gpu.
  /// Communicator bases: tp 0, dp 1M, embedding 2M, cp 3M, shard 4M, replica 5M, ep 6M, edp 7M,
  /// etp 8M (distinct: group_id matches collectives by communicator). The etp group is the TP
  /// group's GPUs when etp = tp, and then shares its communicator.
  int ep_communicator() const { return 6'000'000 + stage_ * (stage_gpus() / p_.ep) + expert_.ep_index; }
  int edp_communicator() const { return 7'000'000 + stage_ * (expert_tp(p_) * p_.ep) + expert_.edp_index; }
  int etp_communicator() const {
    const int etp = expert_tp(p_);
    return etp == p_.tp ? tp_communicator() : 8'000'000 + stage_ * (stage_gpus() / etp) + expert_.etp_index;
  }
  /// The ranks and communicator of a layer op's collective (its comm_group).
  const std::vector<hw_models::Rank>& group_ranks(const Op& op) const {
    switch (op.comm_group) {
      case model::CommGroup::kEp: return ep_ranks_;
      case model::CommGroup::kEtp: return etp_ranks_;
      case model::CommGroup::kTp: break;
    }
    return tp_ranks_;
  }
  int group_communicator(const Op& op) const {
    switch (op.comm_group) {
      case model::CommGroup::kEp: return ep_communicator();
      case model::CommGroup::kEtp: return etp_communicator();
      case model::CommGroup::kTp: break;
    }
    return tp_communicator();
  }
  /// GPUs of one pipeline stage: tp · dp · cp.
  int stage_gpus() const { return p_.tp * grad_replicas(p_); }
  /// Routed-expert parameters per GPU of virtual stage `vs` (0 for a dense model).
  std::uint64_t chunk_expert_params(int vs) const { return chunk_layer_params(vs).expert_params; }
  /// Routed-expert parameters of the current GPU's chunks.
  std::uint64_t gpu_expert_params() const {
    std::uint64_t n = 0;
    for (int c = 0; c < p_.virtual_stages; ++c) n += chunk_expert_params(c * p_.pp + stage_);
    return n;
  }
  int embedding_communicator() const { return 2'000'000 + dp_rank_ * p_.tp + tp_rank_; }
  hw_models::Rank stage_rank(int stage) const { return global_rank(p_, stage, dp_rank_, tp_rank_); }
  std::int64_t transfer_key(int virtual_stage, int micro_batch, bool forward) const {
    return ((static_cast<std::int64_t>(virtual_stage) * p_.global_batch + micro_batch) * 2 +
            (forward ? 0 : 1)) * (p_.tp * grad_replicas(p_)) + dp_rank_ * p_.tp + tp_rank_;
  }

  const Scenario& sc_;
  const ParallelSpec& p_;
  const RecomputePlan& plan_;
  const hw_models::Topology& topo_;
  const Workload& work_;
  const StageSteps* part_;  ///< build only this part of one stage (fast mode); null: everything
  /// > 0: omit steady-state periods where the executor can insert them, keeping this many
  /// (forward, backward) pairs on the first GPU (the one with the fewest).
  int built_pairs_ = 0;
  bool compressible_ = true;  ///< every GPU's kept pairs from kPeriodicFromPair to kCutPair are one period long
  sim::Program prog_;
  std::vector<double> flops_;
  std::vector<NamedOp> name_ops_;
  std::unordered_map<sim::TaskId, double> optimizer_bytes_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  std::unordered_map<std::string, std::uint32_t> instance_ids_;
  /// Instance ids + 1 (0: not yet used) of steps and their layers (set_step_instance), at
  /// ((micro-batch · virtual stages + chunk) · (layers + 1) + layer + 1), layer -1 for the step.
  std::vector<std::uint32_t> step_instance_ids_;
  std::uint32_t instance_ = 0;
  std::uint32_t name_recompute_ = 0;
  std::vector<int> iota_;  ///< 0, 1, 2, ... (indices of "every op")
  /// recompute_ops of each of the plan's layer decisions (emit_recompute), per layer kind
  /// (index 1: a mixed model's dense layers), as the indices are into that kind's ops.
  std::array<std::unordered_map<const LayerDecision*, std::vector<int>>, 2> recompute_indices_;
  std::map<std::tuple<int, std::vector<hw_models::Rank>, std::uint64_t>, std::vector<hw_models::Phase>, std::less<>>
      phases_;
  std::map<GroupKey, std::int32_t> groups_;
  std::map<std::pair<int, int>, std::int64_t> comm_sequence_;
  std::int32_t next_group_ = 0;
  /// Host model (hardware.gpu.host_kernel / host_collective > 0; for a stage built alone in
  /// fast mode only with StageSteps::host_start_ps >= 0).
  bool host_model_ = false;
  TimePs host_clock_ps_ = 0;  ///< the current GPU's host: when it has issued its last task
  sim::TaskId host_wait_until_ = -1;   ///< host_waits_for: what the next task's issue waits for
  struct Pending {
    std::uint32_t dep_index;
    std::int64_t key;
    bool posted = false;  ///< a receiver's exchange (exchanges_posted_), not a transfer
  };
  std::vector<Pending> pending_;
  std::unordered_map<std::int64_t, sim::TaskId> transfers_;
  // ----- blocking pipeline exchanges (parallel.pipeline_exchange blocking) -----
  bool blocking_exchange_ = false;
  sim::StreamId pp_grad_stream_ = kPp;  ///< the gradient sends' stream (beside kPp's activations)
  /// Per transfer key: the receiver's marker of the exchange that receives it (its NCCL call
  /// posted), which the send waits for.
  std::unordered_map<std::int64_t, sim::TaskId> exchanges_posted_;
  /// The current GPU's last exchange, done (its transfers and the synchronize): what the next
  /// step's marker waits for; -1 before the first.
  sim::TaskId exchange_done_ = -1;
  struct QueuedSend {
    int from_vs, to_vs, micro_batch;
    bool forward;
    std::uint32_t instance;  ///< the sending step's label
  };
  std::vector<QueuedSend> exchange_sends_;  ///< sends since the last exchange
  /// A pipeline send task of `q` on `stream` after `after` (with `rendezvous`, also after its
  /// receiver's exchange_posted marker), registered for its receiver.
  void add_send(const QueuedSend& q, sim::StreamId stream, sim::TaskId after, bool rendezvous);
  std::vector<sim::TaskId> stream_tail_;    ///< the current GPU's last task per stream
  /// A blocking exchange after the current GPU's last step (before steps[next] on): the
  /// queued sends, and the receives of steps[next] up to the next exchange.
  void emit_exchange(const std::vector<PipeStep>& steps, std::size_t next, sim::TaskId after);
  std::vector<hw_models::Rank> rank_to_rep_;
  std::vector<LayerSpan> layer_spans_;
  std::vector<LayerSpan> layer_fwd_spans_;
  std::vector<StepSpan> step_spans_;
  sim::TaskId step_first_ = 0;  ///< first task of the step being emitted
  /// overlap_param_gather: per virtual stage, the parameter all-gathers (by bucket) its first
  /// forward waits for before its embedding, each layer and its head (-1: none).
  struct ParamGates {
    sim::TaskId embedding = -1, head = -1;
    std::vector<sim::TaskId> layer;
    bool waited = false;  ///< its first forward has been emitted
  };
  std::map<int, ParamGates> param_gates_;
  /// Issues the parameter all-gathers of virtual stages `chunks` on the dp stream, bucket by
  /// bucket in forward order (a bucket closes at dp_bucket / 2 parameters, as gradient buckets).
  void emit_param_gathers(const std::vector<int>& chunks);
  /// A marker after `after` that waits for `gather` unless it is -1 or `waited` (then `after`).
  sim::TaskId wait_for_params(sim::TaskId after, sim::TaskId gather, sim::TaskId& waited);
  bool overlaps_param_gather() const {
    return p_.overlap_param_gather && grad_replicas(p_) > 1 &&
           (sharding_ == Sharding::kOptimizer || sharding_ == Sharding::kGradients);
  }
  /// Overlapped recomputes issued in a forward step for the next backward: (vs, mb, layer).
  std::map<std::tuple<int, int, int>, sim::TaskId> fwd_ready_;  ///< reduced simulation: simulated rank standing for each rank

  bool symmetric_ = false;
  sim::LinkId standin_link_ = -1;  ///< sim.comm_standin: the device-to-host link (host-to-device is next)
  int micro_batches_ = 0;
  std::vector<OpWithTimes> layer_;
  std::vector<OpWithTimes> dense_layer_;  ///< a mixed model's dense layers (Workload::dense_layer)
  /// The ops of the l-th layer of `sp` (its kind's: layer_ or dense_layer_).
  const std::vector<OpWithTimes>& layer_ops(const StagePlan& sp, int l) const {
    return work_.is_dense_layer(sp.first_layer + l) ? dense_layer_ : layer_;
  }
  /// TP-comm overlap: per layer op, one row chunk of it (GEMMs only; others a copy).
  std::vector<OpWithTimes> layer_chunk_;
  int tp_chunks_ = 1;  ///< tp_overlap_chunks(p_)
  std::vector<OpWithTimes> embedding_;
  std::vector<OpWithTimes> head_;
  // current GPU
  sim::GpuId gpu_ = 0;
  hw_models::Rank rank_ = 0;
  int stage_ = 0, dp_rank_ = 0, tp_rank_ = 0;
  std::vector<hw_models::Rank> tp_ranks_, dp_ranks_, cp_ranks_, ep_ranks_, edp_ranks_, etp_ranks_;
  model::ExpertGroups expert_;  ///< the current GPU's expert groups (stage ranks and indices)
  std::vector<std::vector<PipeStep>> order_;  ///< every stage's pipeline order
  std::string label_;  ///< reused buffer for instance labels
};

}  // namespace detail
}  // namespace lynx::schedule
