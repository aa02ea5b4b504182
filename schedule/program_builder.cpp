#include "schedule/program_builder.hpp"

#include "hw_models/collectives.hpp"
#include "common/error.hpp"
#include "hw_models/compute_model.hpp"
#include "model/gpt.hpp"
#include "schedule/pipeline_schedule.hpp"

#include <fmt/format.h>

#include <functional>
#include <iterator>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>

namespace lynx::schedule {

using hw_models::OpTimes;
using hw_models::op_times;
using model::Workload;
using strategies::Action;
using strategies::LayerDecision;
using strategies::RecomputePlan;
using strategies::StagePlan;
using strategies::Window;
using strategies::recompute_ops;

hw_models::Rank global_rank(const ParallelSpec& p, int stage, int dp_rank, int tp_rank) {
  return stage * (p.tp * p.dp) + dp_rank * p.tp + tp_rank;
}

namespace {

using model::Op;
using model::OpGroup;
using model::OpKind;

/// A task of this op is one GEMM call for the host model (hardware.gpu.host_gemm): a linear
/// layer's forward, dgrad or wgrad, or a batched attention GEMM (or the flash kernel).
bool is_gemm_call(const Op& op) { return op.kind == OpKind::kGemm || op.kind == OpKind::kAttention; }

/// Whether layer l's on-demand recompute ran with the layer above's: l + 1 drops its input, so
/// the two are one recompute chunk (full uniform recompute, num_layers > 1).
bool recomputed_with_layer_above(const strategies::StagePlan& sp, int l) {
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
  std::vector<OpWithTimes> with_times(const std::vector<Op>& ops, NamedOp::List list) {
    std::vector<OpWithTimes> out;
    for (const Op& op : ops) {
      const OpNames names{intern_name(op.name),          intern_name(op.name + "_dgrad"),
                          intern_name(op.name + "_wgrad"), intern_name("re." + op.name),
                          intern_name(op.name + "_bwd"),   intern_name(op.name + "_input_ag")};
      using P = NamedOp::Pass;
      const int index = static_cast<int>(out.size());
      for (auto [name, pass] : {std::pair{names.fwd, P::kForward}, {names.dgrad, P::kDgrad},
                                {names.wgrad, P::kWgrad}, {names.re, P::kRecompute},
                                {names.bwd, P::kBackwardCollective}, {names.input_ag, P::kInputAllGather}}) {
        if (name_ops_.size() <= name) name_ops_.resize(name + 1);
        name_ops_[name] = {list, index, pass};
      }
      out.push_back({op, op_times(sc_.hardware, op), names});
    }
    return out;
  }

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
                  recompute_ready = kNoName;
  };
  StepNames step_names_;
  sim::TagId tag_of(OpGroup g) const { return static_cast<sim::TagId>(g); }
  /// Reserves the program's arrays for `num_gpus` GPUs like the first one (+5%), so they do not
  /// grow by doubling (each growth copies them and briefly holds twice their size). Capacity
  /// only: the program built is the same. The large ones are advised for huge pages.
  void reserve_like_first_gpu(std::size_t num_gpus) {
    auto grow = [num_gpus](auto& v) { v.reserve(v.size() * num_gpus + v.size() * num_gpus / 20); };
    grow(prog_.tasks);
    grow(prog_.deps);
    grow(prog_.flows);
    grow(prog_.path_links);
    grow(prog_.mem);
    grow(flops_);
    grow(prog_.issue_ps);
    sim::advise_huge_pages(prog_.tasks);
    sim::advise_huge_pages(prog_.deps);
    sim::advise_huge_pages(prog_.mem);
    sim::advise_huge_pages(prog_.flows);
    sim::advise_huge_pages(prog_.path_links);
    sim::advise_huge_pages(flops_);
  }

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
  TimePs host_cost_ps(const TaskArgs& a) const {
    const int kernels = a.kind == sim::TaskKind::kKernel && a.work_ps == 0 ? 0
                        : a.kernels >= 0                                   ? a.kernels
                        : a.kind == sim::TaskKind::kKernel                 ? 1
                                                                           : 0;
    TimePs kernels_ps = 0;
    if (__builtin_mul_overflow(static_cast<TimePs>(kernels), sc_.hardware.host_kernel_ps, &kernels_ps))
      fail(ErrorCode::kTimeOverflow, "simulated time overflow (2^63 ps) in a task's host time: {} kernels × hardware.gpu.host_kernel {} ps",
           kernels, sc_.hardware.host_kernel_ps);
    const char* what = "a task's host time (hardware.gpu.host_kernel, gpu.host_collective, gpu.host_gemm)";
    const TimePs calls_ps = checked_add(a.host_call ? sc_.hardware.host_collective_ps : 0,
                                        a.gemm_call && kernels > 0 ? sc_.hardware.host_gemm_ps : 0, what);
    return checked_add(kernels_ps, calls_ps, what);
  }

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
    return static_cast<sim::TaskId>(prog_.tasks.size() - 1);
  }
  /// Host model: the current GPU's host thread blocks, before issuing its next task, until
  /// `until` has ended on the GPU (sim::Program::host_waits). Without the host model, or for
  /// `until` < 0, nothing.
  void host_waits_for(sim::TaskId until) {
    if (host_model_ && until >= 0) host_wait_until_ = until;
  }
  /// Adds a dependency slot to be filled later with the task registered under `key`.
  void add_pending_dep(sim::TaskId task, std::int64_t key) {
    if (part_) return;  // a stage built alone: other stages' transfers are not waited for
    // Only valid for the task just added (its deps range is the tail of prog_.deps).
    LYNX_CHECK(task == static_cast<sim::TaskId>(prog_.tasks.size() - 1), "pending dep order");
    pending_.push_back({static_cast<std::uint32_t>(prog_.deps.size()), key});
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
                std::uint64_t payload_bytes = 0, double efficiency = 1.0) {
    LYNX_CHECK(task == static_cast<sim::TaskId>(prog_.tasks.size() - 1), "flow order");
    sim::Flow f;
    f.bytes = bytes;
    f.payload_bytes = payload_bytes;
    f.efficiency = efficiency;
    f.first_link = static_cast<std::uint32_t>(prog_.path_links.size());
    for (sim::LinkId l : topo_.path(src, dst)) prog_.path_links.push_back(map_link(l));
    f.num_links = static_cast<std::uint32_t>(prog_.path_links.size()) - f.first_link;
    prog_.flows.push_back(f);
    prog_.tasks.back().num_flows++;
  }
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
                              std::initializer_list<sim::TaskId> deps) {
    // By reference: a copy would allocate every phase's flow list again per collective.
    const std::vector<hw_models::Phase>& phases = phase_cache(kind, ranks, bytes);
    if (standin_link_ >= 0) return emit_standin(stream, cat, phases, name, deps);
    sim::TaskId last = -1;
    bool first = true;
    for (const hw_models::Phase& ph : phases) {
      TaskArgs a;
      a.stream = stream;
      a.kind = sim::TaskKind::kComm;
      a.category = cat;
      a.work_ps = ph.latency_ps;
      a.name = name;
      a.group = group_id(communicator);
      // One call (one NCCL kernel) issues every phase.
      a.kernels = first ? 1 : 0;
      a.host_call = first;
      last = first ? add_task(a, deps) : add_task(a, {});
      first = false;
      for (const hw_models::FlowSpec& f : ph.flows)
        if (f.src == rank_)
          add_flow(last, f.src, f.dst, f.bytes, f.payload_bytes, sc_.hardware.collective_efficiency);
    }
    return last;
  }
  /// The one-GPU stand-in of a collective (sim.comm_standin): the bytes this rank would send
  /// go device to host, then host to device, on `stream`.
  sim::TaskId emit_standin(sim::StreamId stream, sim::Category cat, const std::vector<hw_models::Phase>& phases,
                           std::uint32_t name, std::initializer_list<sim::TaskId> deps) {
    std::uint64_t bytes = 0;
    for (const hw_models::Phase& ph : phases)
      for (const hw_models::FlowSpec& f : ph.flows)
        if (f.src == rank_) bytes += f.payload_bytes > 0 ? f.payload_bytes : f.bytes;
    sim::TaskId last = -1;
    for (int leg = 0; leg < 2; ++leg) {
      TaskArgs a;
      a.stream = stream;
      a.kind = sim::TaskKind::kComm;
      a.category = cat;
      a.name = name;
      last = leg == 0 ? add_task(a, deps) : add_task(a, {});
      sim::Flow f;
      f.bytes = bytes;
      f.first_link = static_cast<std::uint32_t>(prog_.path_links.size());
      f.num_links = 1;
      prog_.path_links.push_back(standin_link_ + leg);
      prog_.flows.push_back(f);
      prog_.tasks.back().num_flows++;
    }
    return last;
  }
  const std::vector<hw_models::Phase>& phase_cache(hw_models::Collective kind, const std::vector<hw_models::Rank>& ranks,
                                            std::uint64_t bytes) {
    // Looked up by reference (std::less<>): a hit copies no rank list.
    auto it = phases_.find(std::forward_as_tuple(static_cast<int>(kind), ranks, bytes));
    if (it == phases_.end())
      it = phases_
               .emplace(std::make_tuple(static_cast<int>(kind), ranks, bytes),
                        hw_models::plan_collective(topo_, sc_.hardware, kind, hw_models::Algorithm::kRing, ranks,
                                                   bytes))
               .first;
    return it->second;
  }
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
    std::vector<sim::TaskId> tasks;   ///< what the optimizer step waits for
  };
  /// All-reduces the open bucket (if any) after `after` and empties it.
  void flush_dp_bucket(DpBuckets& dp, sim::TaskId after);
  /// What the steps of the current GPU carry from one to the next.
  struct GpuSteps {
    sim::TaskId compute_tail = -1;  ///< the last compute task of the previous step
    DpBuckets dp;
  };
  /// One layer's gradients are final after `after` (bucketed: into the open bucket).
  void layer_gradients_final(GpuSteps& g, sim::TaskId after);
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
  sim::TaskId emit_forward_ops(const std::vector<OpWithTimes>& ops, const LayerDecision* decision,
                               sim::TaskId after, const WindowHook& on_window = {});
  /// The recompute pass of a layer on `stream` (compute: on demand; recompute: overlapped).
  sim::TaskId emit_recompute(const LayerDecision& d, sim::StreamId stream, sim::TaskId after);
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
  /// Memory tag of the output gradients a deferred wgrad holds (ZB-H1 only).
  static constexpr sim::TagId kOutputGradTag = static_cast<sim::TagId>(model::OpGroup::kLayerInput) + 1;
  sim::TaskId emit_dp_allreduce(std::uint64_t params, sim::TaskId after);
  /// After `reduced` (the gradient reductions): the tied-embedding gradient all-reduce of the
  /// first and last stage (pp > 1, tied); returns what the optimizer step waits for.
  sim::TaskId emit_tied_embedding_allreduce(sim::TaskId reduced);
  /// Megatron's optimizer step over `params` gradients of the stage (`stage_params` in all).
  void emit_optimizer_step(std::uint64_t params, std::uint64_t stage_params, sim::TaskId after);
  /// Pipeline transfer of one micro-batch's activation (forward) or gradient from virtual
  /// stage from_vs to to_vs on the pp stream, after `after`; the receiver waits for it.
  void emit_send(int from_vs, int to_vs, int micro_batch, bool forward, sim::TaskId after);

  void add_step_span(const PipeStep& st, sim::TaskId marker, sim::TaskId tail, bool sent) {
    const auto end = static_cast<sim::TaskId>(prog_.tasks.size());
    step_spans_.push_back({gpu_, st, step_first_, marker, tail, sent ? end - 1 : -1, end});
  }

  /// The fast-forward hint of the current GPU (sim::Program::period_tasks_per_gpu): in 1F1B
  /// one period is one (forward, backward) pair of the steady state; GPU 0's pairs anchor them.
  void note_period(const std::vector<sim::TaskId>& pair_starts) {
    sim::TaskId period = 0;
    const size_t middle = pair_starts.size() / 2;
    if (p_.schedule == ScheduleKind::kOneFOneB && p_.virtual_stages == 1 && pair_starts.size() >= 3)
      period = pair_starts[middle] - pair_starts[middle - 1];
    prog_.period_tasks_per_gpu.push_back(period);
    if (gpu_ == 0 && period > 0) prog_.period_anchors = pair_starts;
    if (prog_.omitted_periods == 0) return;
    // Compressed: where the omitted periods go, and their flows.
    const auto at = [&](int pair) { return pair_starts[static_cast<size_t>(pair)]; };
    if (pair_starts.size() <= static_cast<size_t>(kCutPair)) {
      compressible_ = false;
      return;
    }
    for (int i = kPeriodicFromPair; i < kCutPair; ++i)
      compressible_ = compressible_ && at(i + 1) - at(i) == period;
    const auto flow_of = [&](sim::TaskId t) { return prog_.tasks[static_cast<size_t>(t)].first_flow; };
    prog_.period_flows_per_gpu.push_back(flow_of(at(kCutPair)) - flow_of(at(kCutPair - 1)));
    prog_.period_cut_per_gpu.push_back(at(kCutPair));
    prog_.periodic_from_per_gpu.push_back(at(kPeriodicFromPair));
  }

  /// Parameters per GPU of virtual stage `vs`: its layers, plus embedding / head extras.
  std::uint64_t chunk_params(int vs) const {
    std::uint64_t n = work_.layer_params * plan_.stages[static_cast<size_t>(vs)].layers.size();
    if (vs == 0) n += work_.embedding_params;
    if (vs == p_.pp * p_.virtual_stages - 1) n += work_.head_params;
    return n;
  }

  /// The current GPU's TP group and DP group (global ranks), set by build_gpu.
  const std::vector<hw_models::Rank>& tp_ranks() const { return tp_ranks_; }
  const std::vector<hw_models::Rank>& dp_ranks() const { return dp_ranks_; }
  int tp_communicator() const { return stage_ * p_.dp + dp_rank_; }
  int dp_communicator() const { return 1'000'000 + stage_ * p_.tp + tp_rank_; }
  int embedding_communicator() const { return 2'000'000 + dp_rank_ * p_.tp + tp_rank_; }
  hw_models::Rank stage_rank(int stage) const { return global_rank(p_, stage, dp_rank_, tp_rank_); }
  std::int64_t transfer_key(int virtual_stage, int micro_batch, bool forward) const {
    return ((static_cast<std::int64_t>(virtual_stage) * p_.global_batch + micro_batch) * 2 +
            (forward ? 0 : 1)) * (p_.tp * p_.dp) + dp_rank_ * p_.tp + tp_rank_;
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
  /// recompute_ops of each of the plan's layer decisions (emit_recompute).
  std::unordered_map<const LayerDecision*, std::vector<int>> recompute_indices_;
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
  };
  std::vector<Pending> pending_;
  std::unordered_map<std::int64_t, sim::TaskId> transfers_;
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
  bool overlaps_param_gather() const { return p_.overlap_param_gather && p_.distributed_optimizer && p_.dp > 1; }
  /// Overlapped recomputes issued in a forward step for the next backward: (vs, mb, layer).
  std::map<std::tuple<int, int, int>, sim::TaskId> fwd_ready_;  ///< reduced simulation: simulated rank standing for each rank

  bool symmetric_ = false;
  sim::LinkId standin_link_ = -1;  ///< sim.comm_standin: the device-to-host link (host-to-device is next)
  int micro_batches_ = 0;
  std::vector<OpWithTimes> layer_;
  /// TP-comm overlap: per layer op, one row chunk of it (GEMMs only; others a copy).
  std::vector<OpWithTimes> layer_chunk_;
  int tp_chunks_ = 1;  ///< tp_overlap_chunks(p_)
  std::vector<OpWithTimes> embedding_;
  std::vector<OpWithTimes> head_;
  // current GPU
  sim::GpuId gpu_ = 0;
  hw_models::Rank rank_ = 0;
  int stage_ = 0, dp_rank_ = 0, tp_rank_ = 0;
  std::vector<hw_models::Rank> tp_ranks_, dp_ranks_;
  std::vector<std::vector<PipeStep>> order_;  ///< every stage's pipeline order
  std::string label_;  ///< reused buffer for instance labels
};

/// A chain of forward ops: kernels on `stream` in order, collectives on the tp stream with the
/// next kernel waiting for them. `wait`: a task the first op must wait for (cross-stream).
/// Returns the chain's last task (a trailing collective, if any, so the caller waits on it).
sim::TaskId Builder::emit_forward_chain(const ForwardChain& chain, sim::TaskId wait) {
  sim::TaskId last = wait;
  sim::TaskId last_kernel = -1;
  bool window_opened = false;
  auto open_window = [&](sim::TaskId waited) {
    if (!window_opened && chain.on_window && *chain.on_window && waited >= 0 && last_kernel >= 0 &&
        prog_.tasks[static_cast<size_t>(waited)].kind == sim::TaskKind::kComm) {
      window_opened = true;  // the compute stream idles from here until the collective ends
      (*chain.on_window)(last_kernel);
    }
  };
  // TP-comm overlap: the layer's GEMMs run in row chunks beside chunked collectives (its
  // forward on the compute stream, first pass or on-demand recompute alike).
  const bool chunked = tp_chunks_ > 1 && chain.ops == &layer_ && chain.stream == kCompute;
  auto op_at = [&](size_t j) -> const OpWithTimes* {
    return j < chain.indices.size() ? &(*chain.ops)[static_cast<size_t>(chain.indices[j])] : nullptr;
  };
  auto is_gemm = [](const OpWithTimes* o) { return o && o->op.kind == OpKind::kGemm; };
  const sim::Category comm_category = chain.recompute ? sim::Category::kRecompute : sim::Category::kTpComm;
  std::vector<sim::TaskId> gathered;  // all-gather chunks the next GEMM's chunks wait for
  for (size_t j = 0; j < chain.indices.size(); ++j) {
    const int index = chain.indices[j];
    const OpWithTimes& o = (*chain.ops)[static_cast<size_t>(index)];
    const std::uint32_t name = chain.recompute ? o.names.re : o.names.fwd;
    if (o.op.kind == OpKind::kCollective) {
      if (o.op.collective == model::CollectiveKind::kNone || p_.tp == 1) continue;
      LYNX_CHECK(chain.stream == kCompute, "overlapped recompute of '{}' needs communication", o.op.name);
      if (chunked && o.op.collective == model::CollectiveKind::kAllGather && is_gemm(op_at(j + 1))) {
        // Chunk k of the gathered rows arrives while the GEMM works on chunk k - 1.
        gathered.clear();
        for (int k = 0; k < tp_chunks_; ++k)
          gathered.push_back(emit_collective(kTp, comm_category, hw_models::Collective::kAllGather, tp_ranks(),
                                             tp_communicator(), o.op.collective_bytes / tp_chunks_, name,
                                             {k == 0 ? last : -1}));
        last = gathered.back();
        wait = last;
        continue;
      }
      last = emit_collective(kTp, comm_category, hw_models::to_collective(o.op.collective), tp_ranks(),
                             tp_communicator(), o.op.collective_bytes, name, {last});
      wait = last;
      continue;
    }
    TaskArgs a;
    a.stream = chain.stream;
    a.category = !chain.recompute             ? sim::Category::kCompute
                 : chain.stream == kCompute ? sim::Category::kRecompute
                                              : sim::Category::kRecomputeOverlapped;
    a.name = name;
    a.gemm_call = is_gemm_call(o.op);
    // First forward: saved activations are allocated while the op writes them, unless the plan
    // drops them (the recompute pass allocates those when it starts).
    const bool kept = !chain.decision || chain.decision->action(o.op.group) == Action::kKeep;
    const auto saved = !chain.recompute && kept ? static_cast<std::int64_t>(o.op.saved_bytes) : 0;
    const OpWithTimes* after_op = op_at(j + 1);
    const bool scatter_after = chunked && o.op.kind == OpKind::kGemm && after_op &&
                               after_op->op.kind == OpKind::kCollective &&
                               after_op->op.collective == model::CollectiveKind::kReduceScatter;
    if (chunked && o.op.kind == OpKind::kGemm && (!gathered.empty() || scatter_after)) {
      // Row chunks of the GEMM: each after its all-gather chunk, or followed by the
      // reduce-scatter of its output rows.
      const OpWithTimes& chunk = layer_chunk_[static_cast<size_t>(index)];
      a.work_ps = chunk.t.fwd_ps;
      a.flops = chunk.op.fwd_flops;
      a.kernels = chunk.op.fwd_kernels;
      open_window(gathered.empty() ? wait : gathered.front());
      sim::TaskId scattered = -1;
      for (int k = 0; k < tp_chunks_; ++k) {
        last = add_task(a, {gathered.empty() ? (k == 0 ? wait : -1) : gathered[static_cast<size_t>(k)]});
        if (k == 0) add_mem(last, saved, tag_of(o.op.group), false);
        last_kernel = last;
        if (scatter_after) {
          const std::uint32_t scatter_name = chain.recompute ? after_op->names.re : after_op->names.fwd;
          scattered = emit_collective(kTp, comm_category, hw_models::Collective::kReduceScatter, tp_ranks(),
                                      tp_communicator(), after_op->op.collective_bytes / tp_chunks_,
                                      scatter_name, {last});
        }
      }
      gathered.clear();
      wait = -1;
      if (scatter_after) {
        ++j;  // the reduce-scatter is emitted
        last = scattered;
        wait = scattered;
      }
      continue;
    }
    open_window(wait);
    a.work_ps = o.t.fwd_ps;
    a.flops = o.op.fwd_flops;
    a.kernels = o.op.fwd_kernels;
    last = add_task(a, {wait});
    last_kernel = last;
    wait = -1;
    add_mem(last, saved, tag_of(o.op.group), false);
  }
  return wait >= 0 ? wait : last;
}

sim::TaskId Builder::emit_forward_ops(const std::vector<OpWithTimes>& ops,
                                      const LayerDecision* decision, sim::TaskId after,
                                      const WindowHook& on_window) {
  // Every op, in order: a prefix of 0, 1, 2, ...
  while (iota_.size() < ops.size()) iota_.push_back(static_cast<int>(iota_.size()));
  return emit_forward_chain({&ops, std::span<const int>(iota_).first(ops.size()), decision, kCompute,
                             false, &on_window},
                            after);
}

sim::TaskId Builder::emit_recompute(const LayerDecision& d, sim::StreamId stream,
                                    sim::TaskId after) {
  // The dropped tensors come back during this pass: allocate them when it starts (they are
  // freed one by one by the backward ops that consume them).
  TaskArgs start;
  start.stream = stream;
  start.kind = sim::TaskKind::kMarker;
  start.name = name_recompute_;
  const sim::TaskId marker = add_task(start, {after});
  for (const OpWithTimes& o : layer_)
    if (d.action(o.op.group) != Action::kKeep)
      add_mem(marker, static_cast<std::int64_t>(o.op.saved_bytes), tag_of(o.op.group), false);
  // The plan's decisions outlive the builder: their op lists are computed once each.
  auto [it, inserted] = recompute_indices_.try_emplace(&d);
  if (inserted) it->second = recompute_ops(work_.layer, d);
  return emit_forward_chain({&layer_, it->second, &d, stream, true}, marker);
}

sim::TaskId Builder::emit_backward_ops(const std::vector<OpWithTimes>& ops, sim::TaskId after,
                                       const WindowHook& on_window, bool defer_wgrad) {
  sim::TaskId wait = after;
  sim::TaskId last = after;
  sim::TaskId last_kernel = -1;
  bool window_opened = false;
  // The compute stream is about to wait on a collective: an overlap window opens when the
  // last kernel before the wait ends.
  auto waiting_on_comm = [&](sim::TaskId w) {
    if (window_opened || w < 0 || last_kernel < 0 || !on_window) return;
    if (prog_.tasks[static_cast<size_t>(w)].kind != sim::TaskKind::kComm) return;
    window_opened = true;
    on_window(last_kernel);
  };
  // TP-comm overlap: the all-gather of the output gradient before a layer GEMM's dgrad runs in
  // chunks, the dgrad's row chunks each after its own (the mirror of the forward's
  // reduce-scatter pipeline).
  const bool chunked = tp_chunks_ > 1 && &ops == &layer_;
  std::vector<sim::TaskId> gathered;
  // Whether op c's backward all-gather feeds the dgrad of the GEMM below it: it is chunked.
  auto chunks_gather = [&](size_t c) {
    return chunked && ops[c].op.bwd_collective == model::CollectiveKind::kAllGather && c > 0 &&
           ops[c - 1].op.kind == OpKind::kGemm;
  };
  auto gather_chunks = [&](size_t c, sim::TaskId first_after) {
    gathered.clear();
    for (int k = 0; k < tp_chunks_; ++k)
      gathered.push_back(emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllGather, tp_ranks(),
                                         tp_communicator(), ops[c].op.collective_bytes / tp_chunks_,
                                         ops[c].names.bwd, {k == 0 ? first_after : -1}));
  };
  for (size_t i = ops.size(); i-- > 0;) {
    const Op& op = ops[i].op;
    if (op.kind == OpKind::kCollective) {
      // Collectives whose backward is issued after the dgrad of the op they feed are emitted
      // there (overlapping its wgrad, as Megatron does); the rest run here, compute waiting.
      if (op.bwd_collective == model::CollectiveKind::kNone || p_.tp == 1) continue;
      if (i + 1 < ops.size() && ops[i + 1].op.kind != OpKind::kCollective) continue;
      if (chunks_gather(i)) {
        gather_chunks(i, last);
        last = gathered.back();
        wait = gathered.front();  // what the first dgrad chunk waits for
        continue;
      }
      last = emit_collective(kTp, sim::Category::kTpComm, hw_models::to_collective(op.bwd_collective), tp_ranks(),
                             tp_communicator(), op.collective_bytes, ops[i].names.bwd, {last});
      wait = last;
      continue;
    }
    // Sequence parallelism: the GEMM's input was saved sharded; its all-gather is issued
    // before the dgrad (overlapping it) and the wgrad waits for it (Megatron's SP backward).
    const bool has_wgrad = ops[i].t.wgrad_ps > 0;
    const bool wgrad_here = has_wgrad && !defer_wgrad;
    sim::TaskId input_gather = -1;
    if (op.bwd_input_allgather_bytes > 0 && p_.tp > 1 && wgrad_here)
      input_gather = emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllGather,
                                     tp_ranks(), tp_communicator(), op.bwd_input_allgather_bytes,
                                     ops[i].names.input_ag, {last});
    waiting_on_comm(wait);
    TaskArgs a;
    a.name = ops[i].names.dgrad;
    a.work_ps = ops[i].t.dgrad_ps;
    a.flops = op.bwd_dgrad_flops;
    a.kernels = op.bwd_dgrad_kernels;
    a.gemm_call = is_gemm_call(op);
    sim::TaskId dgrad = -1;
    if (!gathered.empty() && op.kind == OpKind::kGemm) {
      const OpWithTimes& chunk = layer_chunk_[i];
      a.work_ps = chunk.t.dgrad_ps;
      a.flops = chunk.op.bwd_dgrad_flops;
      a.kernels = chunk.op.bwd_dgrad_kernels;
      for (sim::TaskId g : gathered) dgrad = add_task(a, {g});
      gathered.clear();
    } else {
      dgrad = add_task(a, {wait});
    }
    wait = -1;
    last = dgrad;
    last_kernel = dgrad;
    // The op's saved activations are consumed by its dgrad and wgrad (freed after the last);
    // a deferred wgrad keeps its input and the output gradient until the weight pass.
    const auto saved = static_cast<std::int64_t>(op.saved_bytes);
    if (!has_wgrad) add_mem(dgrad, -saved, tag_of(op.group), true);
    if (has_wgrad && defer_wgrad) {
      const WeightPassBytes held = weight_pass_bytes(op);
      add_mem(dgrad, held.output_grad, kOutputGradTag, false);
      add_mem(dgrad, held.input - saved, tag_of(op.group), true);
    }
    // The collective feeding this op in forward (Megatron's `f`: identity forward, all-reduce
    // backward; with SP the all-gather whose backward is a reduce-scatter) starts right after
    // the dgrad and overlaps the wgrad.
    sim::TaskId input_grad_comm = -1;
    if (i > 0 && ops[i - 1].op.kind == OpKind::kCollective &&
        ops[i - 1].op.bwd_collective != model::CollectiveKind::kNone && p_.tp > 1) {
      const Op& c = ops[i - 1].op;
      if (chunks_gather(i - 1)) {
        gather_chunks(i - 1, dgrad);
        input_grad_comm = gathered.front();  // what the first dgrad chunk waits for
      } else {
        input_grad_comm =
            emit_collective(kTp, sim::Category::kTpComm, hw_models::to_collective(c.bwd_collective), tp_ranks(),
                            tp_communicator(), c.collective_bytes, ops[i - 1].names.bwd, {dgrad});
      }
    }
    if (wgrad_here) {
      TaskArgs w;
      w.name = ops[i].names.wgrad;
      w.work_ps = ops[i].t.wgrad_ps;
      w.flops = op.bwd_wgrad_flops;
      w.kernels = op.bwd_wgrad_kernels;
      w.gemm_call = is_gemm_call(op);
      last = add_task(w, {input_gather});
      last_kernel = last;
      add_mem(last, -saved, tag_of(op.group), true);
    }
    if (input_grad_comm >= 0) wait = input_grad_comm;
  }
  return wait >= 0 ? wait : last;
}

sim::TaskId Builder::emit_weight_ops(const std::vector<OpWithTimes>& ops, sim::TaskId after) {
  sim::TaskId last = after;
  for (size_t i = ops.size(); i-- > 0;) {
    const Op& op = ops[i].op;
    if (op.kind == OpKind::kCollective || ops[i].t.wgrad_ps <= 0) continue;
    // SP: the input was kept sharded; gather it again for the wgrad (the tp stream runs the
    // gathers of a weight step back to back, ahead of the GEMMs that wait for them).
    sim::TaskId input_gather = -1;
    if (op.bwd_input_allgather_bytes > 0 && p_.tp > 1)
      input_gather = emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllGather,
                                     tp_ranks(), tp_communicator(), op.bwd_input_allgather_bytes,
                                     ops[i].names.input_ag, {after});
    TaskArgs w;
    w.name = ops[i].names.wgrad;
    w.work_ps = ops[i].t.wgrad_ps;
    w.flops = op.bwd_wgrad_flops;
    w.kernels = op.bwd_wgrad_kernels;
    w.gemm_call = is_gemm_call(op);
    last = add_task(w, {last, input_gather});
    const WeightPassBytes held = weight_pass_bytes(op);
    add_mem(last, -held.input, tag_of(op.group), true);
    add_mem(last, -held.output_grad, kOutputGradTag, true);
  }
  return last;
}

sim::TaskId Builder::emit_dp_allreduce(std::uint64_t params, sim::TaskId after) {
  if (p_.dp == 1 || params == 0) return after;
  // Gradients as accumulated (model::grad_bytes_per_param: fp32 main gradients by default).
  // The distributed optimizer reduce-scatters them; its bf16 parameter all-gather follows the
  // optimizer step.
  const std::uint64_t bytes = model::grad_bytes_per_param(p_) * params;
  if (p_.distributed_optimizer)
    return emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kReduceScatter, dp_ranks(),
                           dp_communicator(), bytes, intern_name("dp_reducescatter"), {after});
  return emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, dp_ranks(),
                         dp_communicator(), bytes, intern_name("dp_allreduce"), {after});
}

void Builder::emit_send(int from_vs, int to_vs, int micro_batch, bool forward, sim::TaskId after) {
  TaskArgs send;
  send.stream = kPp;
  send.kind = sim::TaskKind::kComm;
  send.category = sim::Category::kPpComm;
  send.name = forward ? intern_once(step_names_.send_activation, "send_activation")
                      : intern_once(step_names_.send_gradient, "send_gradient");
  send.kernels = 1;  // NCCL's send kernel
  send.host_call = true;
  const sim::TaskId t = add_task(send, {after});
  add_flow(t, rank_, stage_rank(to_vs % p_.pp), work_.boundary_bytes);
  transfers_[transfer_key(from_vs, micro_batch, forward)] = t;
}

void Builder::emit_param_gathers(const std::vector<int>& chunks) {
  set_instance("");
  const std::uint32_t name = intern_name("dp_param_allgather");
  for (int vs : chunks) {
    ParamGates& gates = param_gates_[vs];
    const StagePlan& sp = plan_.stages[static_cast<size_t>(vs)];
    gates.layer.assign(sp.layers.size(), -1);
    // Units in forward order: embedding, layers, head; each waits for the bucket it closed in.
    std::vector<sim::TaskId*> open;
    std::uint64_t params = 0;
    auto flush = [&] {
      if (params == 0) return;
      // bf16 parameters (2 bytes each), as the all-gather after the optimizer step moves them.
      const sim::TaskId gather = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllGather,
                                                 dp_ranks(), dp_communicator(), 2 * params, name, {});
      for (sim::TaskId* unit : open) *unit = gather;
      open.clear();
      params = 0;
    };
    auto add = [&](sim::TaskId* unit, std::uint64_t unit_params) {
      open.push_back(unit);
      params += unit_params;
      if (params >= std::max<std::uint64_t>(1, p_.dp_bucket_bytes / 2)) flush();
    };
    if (vs == 0) add(&gates.embedding, work_.embedding_params);
    for (sim::TaskId& layer : gates.layer) add(&layer, work_.layer_params);
    if (vs == p_.pp * p_.virtual_stages - 1) add(&gates.head, work_.head_params);
    flush();
  }
}

sim::TaskId Builder::wait_for_params(sim::TaskId after, sim::TaskId gather, sim::TaskId& waited) {
  if (gather < 0 || gather == waited) return after;
  waited = gather;
  TaskArgs join;
  join.kind = sim::TaskKind::kMarker;
  join.name = intern_name("params_gathered");
  return add_task(join, {after, gather});
}

void Builder::flush_dp_bucket(DpBuckets& dp, sim::TaskId after) {
  if (dp.bucket_params > 0) dp.tasks.push_back(emit_dp_allreduce(dp.bucket_params, after));
  dp.total_params += dp.bucket_params;
  dp.bucket_params = 0;
}

Builder::StepInfo Builder::step_info(const PipeStep& st) const {
  const int vs = st.chunk * p_.pp + stage_;
  return {st, vs, plan_.stages[static_cast<size_t>(vs)]};
}

std::string Builder::step_label(const StepInfo& step) const {
  return p_.virtual_stages > 1 ? fmt::format("mb{}.c{}.", step.st.micro_batch, step.st.chunk)
                               : fmt::format("mb{}.", step.st.micro_batch);
}

void Builder::set_step_instance(const StepInfo& step, int l) {
  // Each (micro-batch, chunk, layer) has its own label: its id is looked up by the numbers,
  // and the label written only the first time (the ids stay set_instance's, in first-use
  // order).
  const int layer = l < 0 ? -1 : step.sp.first_layer + l;
  const bool in_table = step.st.micro_batch >= 0 && step.st.chunk >= 0 && step.st.chunk < p_.virtual_stages &&
                        layer < sc_.model.layers;
  const std::size_t slot = !in_table ? 0
                                     : (static_cast<std::size_t>(step.st.micro_batch) * static_cast<std::size_t>(p_.virtual_stages) +
                                        static_cast<std::size_t>(step.st.chunk)) * (static_cast<std::size_t>(sc_.model.layers) + 1) +
                                           static_cast<std::size_t>(layer + 1);
  if (in_table && slot >= step_instance_ids_.size()) step_instance_ids_.resize(slot + 1 + slot / 2, 0);
  if (in_table && step_instance_ids_[slot] > 0) {
    instance_ = step_instance_ids_[slot] - 1;
    return;
  }
  label_ = step_label(step);
  if (layer >= 0) fmt::format_to(std::back_inserter(label_), "L{}.", layer);
  set_instance(label_);
  if (in_table) step_instance_ids_[slot] = instance_ + 1;
}

void Builder::emit_forward_step(const StepInfo& step, const PipeStep* next, GpuSteps& g) {
  const PipeStep& st = step.st;
  const int vs = step.vs;
  const StagePlan& sp = step.sp;
  const int last_vs = p_.pp * p_.virtual_stages - 1;
  TaskArgs marker;
  marker.kind = sim::TaskKind::kMarker;
  marker.name = intern_once(step_names_.forward, "forward");
  const sim::TaskId recv = add_task(marker, {});
  if (vs > 0) add_pending_dep(recv, transfer_key(vs - 1, st.micro_batch, true));
  sim::TaskId after = recv;
  if (vs == 0 || vs == last_vs) after = emit_micro_batch_load(recv);
  // overlap_param_gather: the first forward of a chunk waits for each bucket's gather.
  ParamGates* gates = nullptr;
  if (auto it = param_gates_.find(vs); it != param_gates_.end() && !it->second.waited && (!part_ || !next || next == &part_->following)) {
    gates = &it->second;
    gates->waited = true;
  }
  sim::TaskId waited = -1;
  if (gates) after = wait_for_params(after, vs == 0 ? gates->embedding : -1, waited);
  if (vs == 0) after = emit_forward_ops(embedding_, nullptr, after);
  // Lynx forward windows: the backward step that follows on this GPU (1F1B steady state)
  // may recompute its layers in this forward's exposed TP collectives.
  const bool next_is_backward = next && next->backward() && next->chunk == st.chunk;
  for (size_t l = 0; l < sp.layers.size(); ++l) {
    WindowHook hook;
    if (next_is_backward && sp.layers[l].overlapped() && sp.layers[l].window == Window::kFwdTpComm) {
      const StepInfo next_step = step_info(*next);
      hook = [this, &sp, vs, l, next_step](sim::TaskId anchor) {
        const std::uint32_t outer = instance_;
        set_layer_instance(next_step, static_cast<int>(l));
        fwd_ready_[{vs, next_step.st.micro_batch, static_cast<int>(l)}] =
            emit_recompute(sp.layers[l], kRecomputeStream, anchor);
        instance_ = outer;
      };
    }
    set_layer_instance(step, static_cast<int>(l));
    if (gates) after = wait_for_params(after, gates->layer[l], waited);
    const sim::TaskId first = static_cast<sim::TaskId>(prog_.tasks.size());
    after = emit_forward_ops(layer_, &sp.layers[l], after, hook);
    layer_fwd_spans_.push_back({gpu_, vs, st.micro_batch, sp.first_layer + static_cast<int>(l), first,
                                static_cast<sim::TaskId>(prog_.tasks.size()), recv});
  }
  set_step_instance(step);
  if (gates && vs == last_vs) after = wait_for_params(after, gates->head, waited);
  if (vs == last_vs) after = emit_forward_ops(head_, nullptr, after);
  g.compute_tail = after;
  if (vs < last_vs) emit_send(vs, vs + 1, st.micro_batch, true, after);
  add_step_span(st, recv, after, vs < last_vs);
}

sim::TaskId Builder::emit_micro_batch_load(sim::TaskId recv) {
  // Megatron's get_batch (pretrain_gpt.py; Megatron-DeepSpeed's get_batch_pipe for DeepSpeed's
  // PipelineEngine, whose LoadMicroBatch runs on the first and the last stage, after the
  // activation's receive) calls tensor_parallel.broadcast_data. Its
  // _build_key_size_numel_dictionaries makes the sizes a CUDA tensor (torch.cuda.LongTensor:
  // a blocking copy, so the host waits for the current stream, the receive included),
  // broadcasts them over the TP group and copies them back with `sizes_cuda.cpu()` (the host
  // waits for the broadcast: a rendezvous of the group's host threads); then the data is
  // broadcast. torch.distributed's NCCL calls are stream-ordered with the current stream
  // (ProcessGroupNCCL waits for it and makes it wait for them): here on the tp stream between
  // the marker and a compute-stream marker the first forward op follows.
  // The broadcasts are emitted always at tp > 1 (Megatron calls broadcast_data whatever the
  // host does); the host's waits for the GPU (host_waits_for) and the TP group's host
  // rendezvous they make are the host model's only, as every host wait is. On some 1F1B
  // pipelines the broadcasts make the state repeat every two periods (the last stage's data
  // broadcast shares its uplink with the gradient send: a 1 ps alternation), which the
  // executor's fast-forward proves as a two-period cycle (sim/executor.cpp).
  host_waits_for(recv);
  if (p_.tp == 1) return recv;  // tp 1: no TP group, no NCCL work
  const MicroBatchLoadBytes bytes = micro_batch_load_bytes(sc_);
  const sim::TaskId sizes =
      emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kBroadcast, tp_ranks(), tp_communicator(),
                      bytes.sizes, intern_name("batch_sizes_broadcast"), {recv});
  host_waits_for(sizes);
  const sim::TaskId data =
      emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kBroadcast, tp_ranks(), tp_communicator(),
                      bytes.data, intern_name("batch_broadcast"), {sizes});
  // On the compute stream, so that the wait for the broadcasts is a gap before this marker,
  // not inside the first layer's forward (whose TP idle the Lynx windows measure).
  TaskArgs loaded;
  loaded.kind = sim::TaskKind::kMarker;
  loaded.name = intern_name("batch_loaded");
  return add_task(loaded, {data});
}

void Builder::emit_backward_step(const StepInfo& step, bool grads_final, GpuSteps& g) {
  const PipeStep& st = step.st;
  const int vs = step.vs;
  const StagePlan& sp = step.sp;
  const int last_vs = p_.pp * p_.virtual_stages - 1;
  const int layers_here = static_cast<int>(sp.layers.size());
  // Overlapped recomputes already issued (recompute-stream task each layer waits for).
  std::vector<sim::TaskId> overlap_ready(sp.layers.size(), -1);
  for (size_t l = 0; l < sp.layers.size(); ++l) {  // issued in the preceding forward
    const auto it = fwd_ready_.find({vs, st.micro_batch, static_cast<int>(l)});
    if (it == fwd_ready_.end()) continue;
    overlap_ready[l] = it->second;
    fwd_ready_.erase(it);
  }
  auto issue_overlap = [&](int l, sim::TaskId anchor) {
    if (l < 0 || overlap_ready[static_cast<size_t>(l)] >= 0) return;
    const std::uint32_t outer = instance_;
    set_layer_instance(step, l);
    overlap_ready[static_cast<size_t>(l)] =
        emit_recompute(sp.layers[static_cast<size_t>(l)], kRecomputeStream, anchor);
    instance_ = outer;
  };
  auto window_for = [&](int l) -> WindowHook {
    if (l < 0) return {};
    const LayerDecision& below = sp.layers[static_cast<size_t>(l)];
    if (!below.overlapped() || below.window != Window::kBwdTpComm) return {};
    return [&issue_overlap, l](sim::TaskId anchor) { issue_overlap(l, anchor); };
  };
  // The top layer may hide its recompute in the wait for this micro-batch's gradient.
  const int top = layers_here - 1;
  if (top >= 0 && sp.layers[static_cast<size_t>(top)].overlapped() &&
      sp.layers[static_cast<size_t>(top)].window == Window::kPpRecvWait)
    issue_overlap(top, g.compute_tail);
  TaskArgs marker;
  marker.kind = sim::TaskKind::kMarker;
  marker.name = intern_once(step_names_.backward, "backward");
  sim::TaskId after = add_task(marker, {});
  const sim::TaskId step_marker = after;
  if (vs < last_vs) add_pending_dep(after, transfer_key(vs + 1, st.micro_batch, false));
  if (vs == last_vs) after = emit_backward_ops(head_, after, window_for(top));
  for (int l = top; l >= 0; --l) {
    const LayerDecision& d = sp.layers[static_cast<size_t>(l)];
    set_layer_instance(step, l);
    if (d.overlapped()) {
      issue_overlap(l, after);  // no window was found above: start now
      TaskArgs join;
      join.kind = sim::TaskKind::kMarker;
      join.name = intern_once(step_names_.recompute_ready, "recompute_ready");
      after = add_task(join, {after, overlap_ready[static_cast<size_t>(l)]});
    } else if (!d.keeps_everything() && !recomputed_with_layer_above(sp, l)) {
      // A recompute chunk (layers below dropping their input): its whole forward, bottom-up.
      int bottom = l;
      while (bottom > 0 && sp.layers[static_cast<size_t>(bottom)].action(OpGroup::kLayerInput) != Action::kKeep)
        --bottom;
      for (int j = bottom; j <= l; ++j) {
        set_layer_instance(step, j);
        after = emit_recompute(sp.layers[static_cast<size_t>(j)], kCompute, after);
      }
      set_layer_instance(step, l);
    }
    const sim::TaskId first_backward = static_cast<sim::TaskId>(prog_.tasks.size());
    after = emit_backward_ops(layer_, after, window_for(l - 1), zero_bubble());
    layer_spans_.push_back({gpu_, vs, st.micro_batch, sp.first_layer + l, first_backward,
                            static_cast<sim::TaskId>(prog_.tasks.size()), step_marker});
    if (grads_final) layer_gradients_final(g, after);
  }
  set_step_instance(step);
  if (vs == 0) after = emit_backward_ops(embedding_, after);
  g.compute_tail = after;
  if (grads_final) chunk_gradients_final(vs, g, after);
  if (vs > 0) emit_send(vs, vs - 1, st.micro_batch, false, after);
  add_step_span(st, step_marker, after, vs > 0);
}

void Builder::layer_gradients_final(GpuSteps& g, sim::TaskId after) {
  if (p_.dp_overlap != DpOverlap::kBucketed) return;
  g.dp.bucket_params += work_.layer_params;
  if (g.dp.bucket_params >= std::max<std::uint64_t>(1, p_.dp_bucket_bytes / 2)) flush_dp_bucket(g.dp, after);
}

void Builder::chunk_gradients_final(int vs, GpuSteps& g, sim::TaskId after) {
  const std::uint64_t layer_grads = work_.layer_params * plan_.stages[static_cast<size_t>(vs)].layers.size();
  const std::uint64_t chunk_extra = chunk_params(vs) - layer_grads;  // embedding / head
  if (p_.dp_overlap == DpOverlap::kBucketed) {
    g.dp.bucket_params += chunk_extra;
    flush_dp_bucket(g.dp, after);
  } else {
    g.dp.total_params += chunk_extra + layer_grads;
  }
}

void Builder::emit_weight_step(const StepInfo& step, bool grads_final, GpuSteps& g) {
  TaskArgs marker;
  marker.kind = sim::TaskKind::kMarker;
  marker.name = intern_name("weight");
  sim::TaskId after = add_task(marker, {});
  const sim::TaskId step_marker = after;
  for (int l = static_cast<int>(step.sp.layers.size()) - 1; l >= 0; --l) {
    set_layer_instance(step, l);
    after = emit_weight_ops(layer_, after);
    if (grads_final) layer_gradients_final(g, after);
  }
  set_step_instance(step);
  g.compute_tail = after;
  if (grads_final) chunk_gradients_final(step.vs, g, after);
  add_step_span(step.st, step_marker, after, false);
}

void Builder::build_gpu(int stage, int dp_rank, int tp_rank) {
  stage_ = stage;
  dp_rank_ = dp_rank;
  tp_rank_ = tp_rank;
  host_clock_ps_ = part_ && part_->host_start_ps > 0 ? part_->host_start_ps : 0;
  host_wait_until_ = -1;
  rank_ = global_rank(p_, stage, dp_rank, tp_rank);
  tp_ranks_.clear();
  for (int t = 0; t < p_.tp; ++t) tp_ranks_.push_back(global_rank(p_, stage_, dp_rank_, t));
  dp_ranks_.clear();
  for (int d = 0; d < p_.dp; ++d) dp_ranks_.push_back(global_rank(p_, stage_, d, tp_rank_));
  // Every stage's order at once; computed for the first GPU only (a part brings its own steps).
  if (!part_ && order_.empty()) order_ = pipeline_order(p_.schedule, p_.pp, micro_batches_, p_.virtual_stages);
  const auto& steps = part_ ? part_->steps : order_[static_cast<size_t>(stage)];

  // Last backward step of each chunk: gradients of that chunk are final after it (ZB-H1: its
  // last weight step, which comes after every input-gradient step).
  std::vector<int> last_bwd_step(static_cast<size_t>(p_.virtual_stages), -1);
  for (size_t i = 0; i < steps.size(); ++i)
    if (!steps[i].forward) last_bwd_step[static_cast<size_t>(steps[i].chunk)] = static_cast<int>(i);

  param_gates_.clear();
  if (overlaps_param_gather() && (!part_ || part_->param_gathers)) {
    // Steady state of one iteration: this iteration's gathers (issued by the previous
    // iteration's optimizer step in Megatron) run from its start, beside the forward passes.
    std::vector<int> chunks;
    for (int c = 0; c < p_.virtual_stages; ++c)
      if (!part_ || c == steps.back().chunk) chunks.push_back(c * p_.pp + stage);
    emit_param_gathers(chunks);
  }
  GpuSteps g;
  std::vector<sim::TaskId> pair_starts;  // first task of each (forward, backward) pair
  for (size_t si = 0; si < steps.size(); ++si) {
    if (steps[si].forward && si + 1 < steps.size() && !steps[si + 1].forward)
      pair_starts.push_back(static_cast<sim::TaskId>(prog_.tasks.size()));
    const StepInfo step = step_info(steps[si]);
    set_step_instance(step);
    step_first_ = static_cast<sim::TaskId>(prog_.tasks.size());
    const PipeStep* next = si + 1 < steps.size()             ? &steps[si + 1]
                           : part_ && part_->has_following ? &part_->following
                                                           : nullptr;
    const bool grads_final = part_ ? part_->grads_final[si]
                                   : static_cast<int>(si) == last_bwd_step[static_cast<size_t>(step.st.chunk)];
    if (step.st.forward) {
      emit_forward_step(step, next, g);
    } else if (step.st.weight) {
      emit_weight_step(step, grads_final, g);
    } else {
      emit_backward_step(step, grads_final, g);
    }
  }
  if (!part_) note_period(pair_starts);  // a part (fast mode) is too short to repeat
  if (part_ && !part_->with_tail) return;
  std::uint64_t stage_params = 0;  // a part's steps may not have seen every chunk's gradients
  for (int c = 0; c < p_.virtual_stages; ++c) stage_params += chunk_params(c * p_.pp + stage);
  if (part_ && p_.dp_overlap == DpOverlap::kEnd) g.dp.total_params = stage_params;
  if (p_.dp_overlap == DpOverlap::kEnd)
    g.dp.tasks.push_back(emit_dp_allreduce(g.dp.total_params, g.compute_tail));
  if (part_) g.dp.total_params = stage_params;  // the optimizer updates every parameter

  set_instance("");
  g.dp.tasks.push_back(g.compute_tail);
  TaskArgs join;
  join.kind = sim::TaskKind::kMarker;
  join.name = intern_name("grads_reduced");
  const sim::TaskId reduced = add_task(join, g.dp.tasks.begin(), g.dp.tasks.end());
  emit_optimizer_step(g.dp.total_params, stage_params, emit_tied_embedding_allreduce(reduced));
}

sim::TaskId Builder::emit_tied_embedding_allreduce(sim::TaskId reduced) {
  // Megatron-LM's finalize_model_grads: after the data-parallel reduction, the first and last
  // stage all-reduce the word embedding's main gradient (_allreduce_word_embedding_grads, the
  // embedding group of each (dp, tp) rank), and the optimizer step of both waits for it. A
  // stage built alone (fast mode) leaves it out: fast/compose.cpp couples the two stages.
  const bool member = stage_ == 0 || stage_ == p_.pp - 1;
  if (part_ || !member || work_.tied_embedding_params == 0) return reduced;
  const std::uint32_t name = intern_name("embedding_grad_allreduce");
  const auto ranks = embedding_group_ranks(p_, dp_rank_, tp_rank_);
  const std::uint64_t bytes = tied_embedding_grad_bytes(p_, work_);
  // Every GPU simulated: a rendezvous group, as every other collective has (live mode runs it
  // as one NCCL call of the two ranks).
  if (!symmetric_)
    return emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, ranks,
                           embedding_communicator(), bytes, name, {reduced});
  // The reduced simulation has no groups (and groups turn the executor's steady-state
  // fast-forward off): both members start it when both are ready and go on when both have
  // finished, by dependencies on the other member's tasks.
  const auto key = [this](int member_stage, int what) -> std::int64_t {
    const int side = member_stage == 0 ? 0 : 1;
    return -1 - ((side * 2 + what) * static_cast<std::int64_t>(p_.tp * p_.dp) + dp_rank_ * p_.tp + tp_rank_);
  };
  const int other = stage_ == 0 ? p_.pp - 1 : 0;
  transfers_[key(stage_, 0)] = reduced;
  TaskArgs join;
  join.kind = sim::TaskKind::kMarker;
  join.name = intern_name("embedding_group_ready");
  const sim::TaskId ready = add_task(join, {reduced});
  add_pending_dep(ready, key(other, 0));
  const sim::TaskId allreduce =
      emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllReduce, ranks, -1, bytes, name, {ready});
  transfers_[key(stage_, 1)] = allreduce;
  join.name = intern_name("embedding_grads_reduced");
  const sim::TaskId done = add_task(join, {allreduce});
  add_pending_dep(done, key(other, 1));
  return done;
}

void Builder::emit_optimizer_step(std::uint64_t params, std::uint64_t stage_params, sim::TaskId after) {
  // Megatron's optimizer step, as memory-bound multi-tensor kernels over the local shard
  // (params / dp with the distributed optimizer); bf16 has no loss scaler (no unscale / inf
  // check). Bytes per local parameter: with 16-bit gradients the copy to fp32 main gradients
  // reads 2, writes 4 (with fp32 main gradients they are the optimizer's: no copy); gradient
  // L2 norm reads 4; clipping (applied when the norm exceeds clip_grad, as early in training)
  // reads and writes 4; fused Adam reads weight, gradient, momentum, variance (16) and writes
  // weight, momentum, variance (12); the bf16 copy of the weights reads 4, writes 2. Zeroing
  // the gradient buffer for the next iteration writes its bytes for every parameter of the
  // stage (the buffer is not sharded).
  const double local = static_cast<double>(params) /
                       (p_.distributed_optimizer ? static_cast<double>(p_.dp) : 1.0);
  // Kernels launched (host cost): the fp32 gradient copy one per parameter tensor
  // (Megatron's _copy_model_grads_to_main_grads), the norm, clip, Adam and bf16 copy apex
  // multi-tensor kernels of depth 1, 2, 4, 2 (model::multi_tensor_launches; the norm adds its
  // power), zeroing one per gradient buffer. Tensors of the local shard: the stage's, split
  // over dp by the distributed optimizer.
  std::int64_t tensors = 0;
  for (int c = 0; c < p_.virtual_stages; ++c) {
    const int vs = c * p_.pp + stage_;
    tensors += work_.layer_param_tensors * static_cast<std::int64_t>(plan_.stages[static_cast<size_t>(vs)].layers.size());
    if (vs == 0) tensors += work_.embedding_param_tensors;
    if (vs == p_.pp * p_.virtual_stages - 1) tensors += work_.head_param_tensors;
  }
  if (p_.distributed_optimizer) tensors = (tensors + p_.dp - 1) / p_.dp;
  const auto launches = [&](int depth) { return model::multi_tensor_launches(local, tensors, depth); };
  const auto kernel = [&](const char* name, double bytes_per_param, double count, sim::TaskId dep,
                          int kernels) {
    TaskArgs k;
    k.category = sim::Category::kOptimizer;
    k.name = intern_name(name);
    k.kernels = kernels;
    k.work_ps = hw_models::kernel_time_ps(sc_.hardware, OpKind::kMemoryBound, 0, bytes_per_param * count);
    const sim::TaskId id = add_task(k, {dep});
    optimizer_bytes_.emplace(id, bytes_per_param * count);
    return id;
  };
  if (!p_.fp32_main_grads) after = kernel("grad_cast_fp32", 6.0, local, after, static_cast<int>(tensors));
  sim::TaskId last = kernel("grad_norm", 4.0, local, after, launches(1) + 1);
  // The squared norm is summed over the model-parallel group (and the data-parallel one with
  // the distributed optimizer); only the tensor-parallel part is modelled (the cross-stage
  // sum would couple stages in fast mode; one 4-byte all-reduce of latency only).
  if (p_.tp > 1)
    last = emit_collective(kTp, sim::Category::kTpComm, hw_models::Collective::kAllReduce, tp_ranks(),
                           tp_communicator(), 4, intern_name("grad_norm_allreduce"), {last});
  // Host model: the clip factor is computed on the host. Megatron's clip_grad_norm_fp32
  // (megatron/optimizer/clip_grads.py) all-reduces the squared norm over the model-parallel
  // group and then takes `total_norm.item() ** (1.0 / norm_type)` (DeepSpeed's get_grad_norm
  // likewise `.item()`s it): the host blocks until the norm is on the GPU, and only then issues
  // the clipping, Adam and the copies.
  host_waits_for(last);
  last = kernel("grad_clip", 8.0, local, last, launches(2));
  last = kernel("adam", 28.0, local, last, launches(4));
  last = kernel("param_copy_bf16", 6.0, local, last, launches(2));
  if (p_.distributed_optimizer && p_.dp > 1 && !overlaps_param_gather())
    last = emit_collective(kDp, sim::Category::kDpComm, hw_models::Collective::kAllGather, dp_ranks(),
                           dp_communicator(), 2 * params, intern_name("dp_param_allgather"), {last});
  kernel("zero_grads", static_cast<double>(model::grad_bytes_per_param(p_)), static_cast<double>(stage_params), last, 1);
}

BuiltProgram Builder::build() {
  micro_batches_ = p_.global_batch / (p_.micro_batch * p_.dp);
  symmetric_ = simulates_one_gpu_per_stage(sc_, topo_);
  host_model_ = (!part_ || part_->host_start_ps >= 0) &&
                sc_.hardware.host_model_on();
  // Steady-state compression: 1F1B without interleaving, one rank per stage (no collective
  // groups). Every GPU has the same number of steady pairs beyond its warm-up, and omitting
  // some from all of them is the program for fewer micro-batches.
  // Not with the host model: its waits for the GPU (sim::Program::host_waits) turn the
  // executor's fast-forward off, which a compressed program needs.
  if (built_pairs_ > kCutPair && !part_ && !host_model_ && p_.schedule == ScheduleKind::kOneFOneB && p_.virtual_stages == 1 &&
      (symmetric_ || p_.tp * p_.dp == 1)) {
    const int first_gpu_pairs = micro_batches_ - p_.pp + 1;
    if (first_gpu_pairs > built_pairs_) {
      prog_.omitted_periods = first_gpu_pairs - built_pairs_;
      micro_batches_ -= first_gpu_pairs - built_pairs_;
    }
  }
  layer_ = with_times(work_.layer, NamedOp::List::kLayer);
  tp_chunks_ = tp_overlap_chunks(p_);
  if (tp_chunks_ > 1) {
    layer_chunk_ = layer_;
    for (OpWithTimes& o : layer_chunk_) {
      if (o.op.kind != OpKind::kGemm) continue;
      o.op = model::gemm_row_chunk(o.op, tp_chunks_);
      o.t = op_times(sc_.hardware, o.op);
    }
  }
  embedding_ = with_times(work_.embedding, NamedOp::List::kEmbedding);
  head_ = with_times(work_.head, NamedOp::List::kHead);
  set_instance("");
  name_recompute_ = intern_name("recompute");
  prog_.tags = {"act/post", "act/attn_proj_input", "act/attn_core", "act/mlp", "act/layer_input"};
  if (zero_bubble()) prog_.tags.push_back("grad/held_for_weight_pass");  // kOutputGradTag

  if (sc_.sim.comm_standin_bw_bytes_per_s > 0) {
    if (p_.pp != 1 || p_.dp != 1)
      fail(ErrorCode::kIncompatibleSettings, "sim.comm_standin.bw: the one-GPU stand-in for communication needs pp = 1 and dp = 1, got pp {} and dp {}",
           p_.pp, p_.dp);
    standin_link_ = static_cast<sim::LinkId>(topo_.links().size());
  }
  BuiltProgram out;
  out.symmetric = symmetric_;
  out.replication = symmetric_ ? p_.tp * p_.dp : 1;

  struct Sim {
    int stage, dp, tp;
  };
  std::vector<Sim> gpus;
  for (int s = 0; s < p_.pp; ++s) {
    if (part_ && s != part_->stage) continue;
    for (int d = 0; d < (symmetric_ ? 1 : p_.dp); ++d)
      for (int t = 0; t < (symmetric_ ? 1 : p_.tp); ++t) gpus.push_back({s, d, t});
  }
  if (symmetric_) {
    rank_to_rep_.resize(static_cast<size_t>(topo_.num_gpus()), -1);
    for (int s = 0; s < p_.pp; ++s)
      for (int d = 0; d < p_.dp; ++d)
        for (int t = 0; t < p_.tp; ++t)
          rank_to_rep_[static_cast<size_t>(global_rank(p_, s, d, t))] = global_rank(p_, s, 0, 0);
  }

  for (size_t g = 0; g < gpus.size(); ++g) {
    gpu_ = static_cast<sim::GpuId>(g);
    sim::GpuDesc desc;
    desc.name = fmt::format("stage{}.dp{}.tp{}", gpus[g].stage, gpus[g].dp, gpus[g].tp);
    desc.stream_names = kStreamNames;
    desc.memory_capacity_bytes = sc_.hardware.memory_bytes;
    desc.contention_factor = sc_.hardware.contention_factor;
    desc.comm_contention = sc_.hardware.comm_contention;
    out.machine.gpus.push_back(desc);
    out.gpu_stage.push_back(gpus[g].stage);
    out.gpu_rank.push_back(global_rank(p_, gpus[g].stage, gpus[g].dp, gpus[g].tp));

    std::uint64_t params = 0;
    for (int c = 0; c < p_.virtual_stages; ++c) params += chunk_params(c * p_.pp + gpus[g].stage);
    prog_.static_bytes_per_gpu.push_back(model::static_bytes(sc_, params));
    build_gpu(gpus[g].stage, gpus[g].dp, gpus[g].tp);
    if (g == 0 && gpus.size() > 1) reserve_like_first_gpu(gpus.size());
  }
  for (const Pending& pd : pending_) {
    auto it = transfers_.find(pd.key);
    LYNX_CHECK(it != transfers_.end(), "pipeline transfer {} never sent", pd.key);
    prog_.deps[pd.dep_index] = it->second;
  }
  out.machine.links = topo_.links();
  if (standin_link_ >= 0)
    for (const char* leg : {"standin.device->host", "standin.host->device"})
      out.machine.links.push_back(
          {leg, sc_.sim.comm_standin_bw_bytes_per_s, sc_.sim.comm_standin_latency_ps});
  out.program = std::move(prog_);
  out.task_flops = std::move(flops_);
  out.layer_backward = std::move(layer_spans_);
  out.layer_forward = std::move(layer_fwd_spans_);
  out.steps = std::move(step_spans_);
  name_ops_.resize(out.program.names.size());
  out.name_ops = std::move(name_ops_);
  out.optimizer_bytes = std::move(optimizer_bytes_);
  out.compressed = out.program.omitted_periods > 0;
  if (out.compressed && (!compressible_ || next_group_ > 0 || out.program.period_flows_per_gpu.size() != gpus.size()))
    out.compressed = false;  // build_program builds it again in full
  return out;
}

}  // namespace

std::vector<hw_models::Rank> embedding_group_ranks(const ParallelSpec& p, int dp_rank, int tp_rank) {
  return {global_rank(p, 0, dp_rank, tp_rank), global_rank(p, p.pp - 1, dp_rank, tp_rank)};
}

std::uint64_t tied_embedding_grad_bytes(const ParallelSpec& p, const Workload& workload) {
  return model::grad_bytes_per_param(p) * workload.tied_embedding_params;
}

MicroBatchLoadBytes micro_batch_load_bytes(const Scenario& sc) {
  constexpr std::uint64_t kMaxDataDim = 5, kKeys = 1, kInt64Bytes = 8;
  MicroBatchLoadBytes b;
  b.sizes = kMaxDataDim * kKeys * kInt64Bytes;
  b.data = static_cast<std::uint64_t>(sc.parallel.micro_batch) * (static_cast<std::uint64_t>(sc.model.seq_len) + 1) *
           kInt64Bytes;
  return b;
}

int tp_overlap_chunks(const ParallelSpec& p) {
  if (!p.tp_comm_overlap || !p.sequence_parallel || p.tp == 1) return 1;
  return p.tp_comm_overlap_chunks > 0 ? p.tp_comm_overlap_chunks : p.tp;
}

bool simulates_one_gpu_per_stage(const Scenario& sc, const hw_models::Topology& topo) {
  if (sc.sim.comm_standin_bw_bytes_per_s > 0) return sc.parallel.tp * sc.parallel.dp > 1;
  return sc.sim.exploit_symmetry && sc.parallel.tp * sc.parallel.dp > 1 &&
         topo.links_private_per_gpu();
}

BuiltProgram build_program(const Scenario& sc, const RecomputePlan& plan, const hw_models::Topology& topo,
                           const Workload& workload, int steady_pairs) {
  const int virtual_stages = sc.parallel.pp * sc.parallel.virtual_stages;
  if (static_cast<int>(plan.stages.size()) != virtual_stages)
    fail(ErrorCode::kPlanMismatch, "plan has {} stages, the layout needs {}", plan.stages.size(), virtual_stages);
  if (steady_pairs > 0) {
    BuiltProgram built = Builder(sc, plan, topo, workload, nullptr, steady_pairs).build();
    if (built.compressed || built.program.omitted_periods == 0) return built;
  }
  return Builder(sc, plan, topo, workload).build();
}

BuiltProgram build_stage_steps(const Scenario& sc, const RecomputePlan& plan,
                               const hw_models::Topology& topo, const Workload& workload,
                               const StageSteps& part) {
  LYNX_CHECK(part.grads_final.size() == part.steps.size(), "grads_final needs one flag per step");
  return Builder(sc, plan, topo, workload, &part).build();
}

}  // namespace lynx::schedule
