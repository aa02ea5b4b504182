#include "live/op_stream.hpp"

#include "common/bytes.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "model/sharding.hpp"
#include "model/workload.hpp"
#include "schedule/program_builder.hpp"
#include "strategies/plan_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace lynx::live {

const char* launch_kind_name(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::kNone: return "marker";
    case LaunchKind::kGemm: return "gemm";
    case LaunchKind::kBatchedGemm: return "batched-gemm";
    case LaunchKind::kMemoryBound: return "kernel";
    case LaunchKind::kCollective: return "collective";
    case LaunchKind::kSend: return "send";
    case LaunchKind::kRecv: return "recv";
    case LaunchKind::kStandinCopy: return "standin-copy";
  }
  return "?";
}

const char* kernel_name(Kernel kernel) {
  switch (kernel) {
    case Kernel::kNone: return "none";
    case Kernel::kLayerNorm: return "layernorm";
    case Kernel::kBiasGelu: return "bias_gelu";
    case Kernel::kSoftmax: return "causal_softmax";
    case Kernel::kDropout: return "dropout";
    case Kernel::kDropoutResidual: return "dropout_residual";
    case Kernel::kCrossEntropy: return "cross_entropy";
    case Kernel::kEmbedding: return "embedding_gather";
    case Kernel::kStream: return "hbm_stream";
  }
  return "?";
}

const char* collective_name(model::CollectiveKind kind) {
  switch (kind) {
    case model::CollectiveKind::kNone: return "none";
    case model::CollectiveKind::kAllReduce: return "all_reduce";
    case model::CollectiveKind::kReduceScatter: return "reduce_scatter";
    case model::CollectiveKind::kAllGather: return "all_gather";
    case model::CollectiveKind::kBroadcast: return "broadcast";
    case model::CollectiveKind::kAllToAll: return "all_to_all";
  }
  return "?";
}

int recv_stream(const OpStream& ops) { return static_cast<int>(ops.stream_names.size()) - 1; }

namespace {

using schedule::NamedOp;

/// Sizes of one GPU's share of the model that the kernels' rows and columns come from.
struct KernelDims {
  std::int64_t tokens = 0;        ///< s·b
  std::int64_t local_tokens = 0;  ///< s·b/t with sequence parallelism
  std::int64_t hidden = 0;
  std::int64_t ffn_local = 0;
  std::int64_t heads_local = 0;
  std::int64_t vocab_local = 0;
  std::int64_t seq = 0;
  std::int64_t micro_batch = 0;
};

KernelDims kernel_dims(const Scenario& sc) {
  KernelDims d;
  const std::int64_t t = sc.parallel.tp;
  d.seq = sc.model.seq_len;
  d.micro_batch = sc.parallel.micro_batch;
  d.tokens = d.seq * d.micro_batch;
  d.local_tokens = sc.parallel.sequence_parallel ? d.tokens / t : d.tokens;
  d.hidden = sc.model.hidden;
  d.ffn_local = sc.model.ffn_hidden / t;
  d.heads_local = sc.model.heads / t;
  d.vocab_local = sc.model.vocab / t;
  return d;
}

/// The kernel that implements a memory-bound op's forward, with its rows × cols. Ops this
/// table does not know (other model families) stream their bytes through HBM.
void set_memory_kernel(LiveOp& op, const model::Op& m, const KernelDims& d) {
  struct Entry {
    const char* name;
    Kernel kernel;
    std::int64_t KernelDims::*rows;
    std::int64_t KernelDims::*cols;
  };
  static const Entry kTable[] = {
      {"ln1", Kernel::kLayerNorm, &KernelDims::local_tokens, &KernelDims::hidden},
      {"ln2", Kernel::kLayerNorm, &KernelDims::local_tokens, &KernelDims::hidden},
      {"final_layernorm", Kernel::kLayerNorm, &KernelDims::local_tokens, &KernelDims::hidden},
      {"attn_dropout_residual", Kernel::kDropoutResidual, &KernelDims::local_tokens, &KernelDims::hidden},
      {"mlp_dropout_residual", Kernel::kDropoutResidual, &KernelDims::local_tokens, &KernelDims::hidden},
      {"embedding_dropout", Kernel::kDropoutResidual, &KernelDims::local_tokens, &KernelDims::hidden},
      {"gelu", Kernel::kBiasGelu, &KernelDims::tokens, &KernelDims::ffn_local},
      {"embedding_lookup", Kernel::kEmbedding, &KernelDims::tokens, &KernelDims::hidden},
      {"cross_entropy", Kernel::kCrossEntropy, &KernelDims::tokens, &KernelDims::vocab_local},
  };
  op.launch = LaunchKind::kMemoryBound;
  op.bytes = static_cast<std::uint64_t>(m.fwd_bytes);
  if (m.name == "softmax" || m.name == "attn_dropout") {
    op.kernel = m.name == "softmax" ? Kernel::kSoftmax : Kernel::kDropout;
    op.m = d.micro_batch * d.heads_local * d.seq;
    op.n = d.seq;
    return;
  }
  for (const Entry& e : kTable) {
    if (m.name != e.name) continue;
    op.kernel = e.kernel;
    op.m = d.*e.rows;
    op.n = d.*e.cols;
    return;
  }
  op.kernel = Kernel::kStream;
}

/// The GEMM shapes of one pass: forward C = A·B; dgrad dA[m×k] = dC·Bᵀ; wgrad dB[k×n] = Aᵀ·dC.
/// Attention (two activations) runs both gradients in its dgrad; flash attention runs as its
/// two batched GEMMs (QKᵀ, then ·V).
void set_gemm(LiveOp& op, const model::Op& m, NamedOp::Pass pass) {
  const bool attention = m.kind == model::OpKind::kAttention;
  op.launch = attention ? LaunchKind::kBatchedGemm : LaunchKind::kGemm;
  op.batch = attention ? m.gemm_batch : 1;
  const bool flash = m.name == "flash_attention";
  switch (pass) {
    case NamedOp::Pass::kForward:
    case NamedOp::Pass::kRecompute:
      op.m = m.gemm_m, op.n = m.gemm_n, op.k = m.gemm_k;
      if (flash) op.m2 = m.gemm_m, op.n2 = m.gemm_k, op.k2 = m.gemm_n;
      break;
    case NamedOp::Pass::kDgrad:
      op.m = m.gemm_m, op.n = m.gemm_k, op.k = m.gemm_n;
      if (attention) op.m2 = m.gemm_k, op.n2 = m.gemm_n, op.k2 = m.gemm_m;
      break;
    default:  // wgrad
      op.m = m.gemm_k, op.n = m.gemm_n, op.k = m.gemm_m;
      break;
  }
  const auto operands = [&](std::int64_t a, std::int64_t b, std::int64_t c) {
    return static_cast<std::uint64_t>(kBytesPerElement * op.batch * (a * c + c * b + a * b));
  };
  op.bytes = operands(op.m, op.n, op.k) + (op.m2 > 0 ? operands(op.m2, op.n2, op.k2) : 0);
}

const char* pass_name(NamedOp::Pass pass) {
  switch (pass) {
    case NamedOp::Pass::kForward: return "fwd";
    case NamedOp::Pass::kRecompute: return "recompute";
    case NamedOp::Pass::kDgrad: return "dgrad";
    case NamedOp::Pass::kWgrad: return "wgrad";
    case NamedOp::Pass::kBackwardCollective: return "bwd-comm";
    case NamedOp::Pass::kInputAllGather: return "input-allgather";
  }
  return "?";
}

/// Payload S of a data-parallel collective from the bytes one member sends on its ring (the
/// builder plans them with hw_models::plan_collective: 2(n−1)/n·S for an all-reduce,
/// (n−1)/n·S for a reduce-scatter or all-gather, rounded up).
std::uint64_t ring_payload(std::uint64_t member_bytes, model::CollectiveKind kind, int n) {
  if (n <= 1) return member_bytes;
  const std::uint64_t factor = kind == model::CollectiveKind::kAllReduce ? 2 : 1;
  return member_bytes * static_cast<std::uint64_t>(n) / (factor * static_cast<std::uint64_t>(n - 1));
}

/// Live mode runs each GEMM whole, in bf16 (cuBLAS), and each TP collective beside it: a plan
/// that chunks them to overlap (parallel.tp_comm_overlap) or runs FP8 GEMMs would be measured
/// as another plan than the one it was made for. Without `run_as_bf16_unchunked` it is
/// refused at the key that asks for it; with it, the keys are returned as the --set
/// overrides that make the simulation predict what live mode runs.
std::vector<std::string> what_live_runs_otherwise(const model::ResolvedScenario& resolved, const strategies::PlanFile& plan,
                                                  const std::string& plan_label, const std::vector<std::string>& overrides,
                                                  bool run_as_bf16_unchunked) {
  const Scenario& sc = resolved.scenario();
  // The --set override that gave the key, else the plan file's line of it.
  const auto origin = [&](const std::string& key) {
    const bool overridden = std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
      return trim(std::string_view(o).substr(0, o.find('='))) == key;
    });
    if (overridden) return resolved.origins().origin_of(key);
    const std::string at = plan.scenario_origins.origin_of(key);
    return at.empty() ? plan_label : at;
  };
  std::vector<std::string> runs_as;
  if (sc.parallel.cp > 1)
    fail(ErrorCode::kNotModelled, "{}: key 'parallel.cp': live mode does not run context parallelism (its backends have "
         "no ring attention); make the plan with parallel.cp=1 to run it live", origin("parallel.cp"));
  // Sharded data parallelism beyond the distributed optimizer: its per-unit parameter
  // all-gathers and per-micro-batch reduce-scatters are not run by live mode's executor.
  const Sharding level = model::sharding_level(sc.parallel);
  if (level >= Sharding::kGradients || (level != Sharding::kNone && sc.parallel.shard_group == ShardGroup::kNode))
    fail(ErrorCode::kNotModelled, "{}: key 'parallel.sharding': live mode does not run sharding {}{} (per-layer "
         "parameter all-gathers, per-micro-batch gradient reduce-scatters, hybrid shard groups); make the plan with "
         "parallel.sharding none or optimizer and parallel.shard_group dp",
         origin("parallel.sharding"), kShardingNames[static_cast<std::size_t>(level)],
         sc.parallel.shard_group == ShardGroup::kNode ? " with shard_group node" : "");
  if (model::is_moe(sc.model))
    fail(ErrorCode::kNotModelled, "{}: key 'model.moe.num_experts': live mode does not run mixture-of-experts layers "
         "(no token dispatch or grouped GEMMs on GPUs); simulate the plan instead", origin("model.moe.num_experts"));
  if (schedule::tp_overlap_chunks(sc.parallel) > 1) {
    if (!run_as_bf16_unchunked)
      fail(ErrorCode::kNotModelled, "{}: key 'parallel.tp_comm_overlap': live mode runs each TP collective and GEMM whole, "
           "not chunked and overlapped as this plan does; make the plan with parallel.tp_comm_overlap=false, or run it "
           "unchunked with --run-as-bf16-unchunked", origin("parallel.tp_comm_overlap"));
    runs_as.push_back("parallel.tp_comm_overlap=false");
  }
  if (sc.model.gemm_precision == GemmPrecision::kFp8) {
    if (!run_as_bf16_unchunked)
      fail(ErrorCode::kNotModelled, "{}: key 'model.gemm_precision': live mode runs bf16 GEMMs, not this plan's FP8 ones; "
           "make the plan with model.gemm_precision=bf16, or run it as bf16 with --run-as-bf16-unchunked",
           origin("model.gemm_precision"));
    runs_as.push_back("model.gemm_precision=bf16");
  }
  return runs_as;
}

}  // namespace

std::string runs_as_note(const OpStream& ops) {
  if (ops.runs_as.empty()) return "";
  std::string sets;
  for (const std::string& set : ops.runs_as) sets += (sets.empty() ? "" : ", ") + set;
  return fmt::format("run as bf16 without chunked TP-comm overlap, not as the plan asks (--run-as-bf16-unchunked: {}); "
                     "predicted for what runs", sets);
}

OpStream build_op_stream(const strategies::PlanFile& plan, const std::string& plan_label,
                         const std::vector<std::string>& overrides, bool run_as_bf16_unchunked) {
  // Every GPU simulated (each rank gets its own program) in exact mode.
  std::vector<std::string> sets = overrides;
  sets.push_back("sim.exploit_symmetry=false");
  sets.push_back("sim.mode=exact");
  model::ResolvedScenario resolved = strategies::scenario_for_plan(plan, plan_label, "", sets);
  std::vector<std::string> runs_as = what_live_runs_otherwise(resolved, plan, plan_label, overrides, run_as_bf16_unchunked);
  if (!runs_as.empty()) {
    sets.insert(sets.end(), runs_as.begin(), runs_as.end());
    resolved = strategies::scenario_for_plan(plan, plan_label, "", sets);
  }
  runner::SimOptions sim_options;
  sim_options.plan = &plan.plan;
  sim_options.keep_trace_data = true;
  sim_options.record_event_order = true;

  OpStream out;
  out.runs_as = std::move(runs_as);
  out.sim = runner::simulate(resolved, sim_options);
  out.scenario = resolved.scenario();
  out.strategy = out.sim.result.strategy;
  const schedule::BuiltProgram& built = out.sim.built;
  const sim::Program& program = built.program;
  const sim::ExecResult& exec = out.sim.exec;
  // Every GPU is simulated, except with the one-GPU communication stand-in (one GPU by design).
  const bool standin = out.scenario.sim.comm_standin_bw_bytes_per_s > 0;
  LYNX_CHECK(!built.symmetric || standin, "live mode needs every GPU simulated");
  const auto standin_link = static_cast<sim::LinkId>(built.machine.links.size()) - 2;
  for (const sim::GpuDesc& g : built.machine.gpus) out.gpu_names.push_back(g.name);
  out.stream_names = built.machine.gpus.at(0).stream_names;
  out.stream_names.push_back("pp_recv");
  out.tags = program.tags;
  out.static_bytes = program.static_bytes_per_gpu;
  out.predicted_peak_bytes = exec.peak_bytes;
  out.predicted_iteration_ps = exec.makespan_ps;
  out.num_tasks = program.tasks.size();

  const model::Workload workload = model::gpt_workload(out.scenario.model, out.scenario.parallel);
  const KernelDims dims = kernel_dims(out.scenario);
  const auto workload_op = [&](const NamedOp& named) -> const model::Op& {
    const std::vector<model::Op>& list = named.list == NamedOp::List::kLayer        ? workload.layer
                                         : named.list == NamedOp::List::kDenseLayer ? workload.dense_layer
                                         : named.list == NamedOp::List::kEmbedding  ? workload.embedding
                                                                                    : workload.head;
    return list.at(static_cast<std::size_t>(named.index));
  };

  // Collective groups: the ranks of each rendezvous, then one communicator per (stream, ranks).
  std::map<std::int32_t, std::vector<int>> group_ranks;
  for (const sim::Task& t : program.tasks)
    if (t.group >= 0) group_ranks[t.group].push_back(t.gpu);
  std::map<std::pair<int, std::vector<int>>, int> comm_ids;

  // One receive per cross-GPU dependency; reserved so references into ops stay valid.
  std::size_t transfers = 0;
  for (const sim::Task& t : program.tasks)
    for (std::uint32_t k = 0; k < t.num_deps; ++k)
      transfers += program.tasks[static_cast<std::size_t>(program.deps[t.first_dep + k])].gpu != t.gpu;
  out.ops.reserve(program.tasks.size() + transfers);
  out.ops.resize(program.tasks.size());
  const int recv = recv_stream(out);
  std::vector<std::vector<int>> recvs_before(program.tasks.size());
  for (std::size_t i = 0; i < program.tasks.size(); ++i) {
    const sim::Task& task = program.tasks[i];
    LiveOp& op = out.ops[i];
    op.task = static_cast<sim::TaskId>(i);
    op.rank = task.gpu;
    op.stream = task.stream;
    op.label = sim::task_label(program, op.task);
    op.category = task.category;
    op.predicted_start_ps = exec.task_start_ps[i];
    op.predicted_end_ps = exec.task_end_ps[i];
    op.flops = built.task_flops[i];
    op.mem.assign(program.mem.begin() + task.first_mem, program.mem.begin() + task.first_mem + task.num_mem);
    const std::string& name = program.names.at(task.name);
    const NamedOp named = built.name_ops.at(task.name);
    op.op = named.list == NamedOp::List::kNone ? name : workload_op(named).name;
    op.pass = named.list == NamedOp::List::kNone ? "" : pass_name(named.pass);

    if (task.kind == sim::TaskKind::kMarker) {
      op.pass = "marker";
    } else if (task.kind == sim::TaskKind::kKernel) {
      if (task.category == sim::Category::kOptimizer) {
        op.launch = LaunchKind::kMemoryBound;
        op.kernel = Kernel::kStream;
        op.pass = "optimizer";
        op.bytes = static_cast<std::uint64_t>(built.optimizer_bytes.at(static_cast<sim::TaskId>(i)));
      } else {
        LYNX_CHECK(named.list != NamedOp::List::kNone, "kernel task '{}' has no workload op", op.label);
        const model::Op& m = workload_op(named);
        if (m.kind == model::OpKind::kMemoryBound) {
          if (named.pass == NamedOp::Pass::kForward || named.pass == NamedOp::Pass::kRecompute) {
            set_memory_kernel(op, m, dims);
          } else {
            op.launch = LaunchKind::kMemoryBound;
            op.kernel = Kernel::kStream;
            op.bytes = static_cast<std::uint64_t>(named.pass == NamedOp::Pass::kWgrad ? m.bwd_wgrad_bytes
                                                                                       : m.bwd_dgrad_bytes);
          }
        } else {
          set_gemm(op, m, named.pass);
        }
      }
    } else if (standin && task.category != sim::Category::kPpComm) {
      LYNX_CHECK(task.num_flows == 1, "stand-in transfer '{}' has {} flows", op.label, task.num_flows);
      const sim::Flow& f = program.flows[task.first_flow];
      op.launch = LaunchKind::kStandinCopy;
      op.to_host = program.path_links[f.first_link] == standin_link;
      op.pass = op.to_host ? "standin-d2h" : "standin-h2d";
      op.bytes = f.bytes;
    } else if (task.category == sim::Category::kPpComm) {
      op.launch = LaunchKind::kSend;
      op.pass = "send";
      LYNX_CHECK(task.num_flows == 1, "pipeline send '{}' has {} flows", op.label, task.num_flows);
      const sim::Flow& f = program.flows[task.first_flow];
      op.bytes = f.payload_bytes > 0 ? f.payload_bytes : f.bytes;
    } else if (i > 0 && program.tasks[i - 1].gpu == task.gpu && program.tasks[i - 1].stream == task.stream &&
               program.tasks[i - 1].kind == sim::TaskKind::kComm && program.tasks[i - 1].name == task.name &&
               program.tasks[i - 1].instance == task.instance && task.num_deps == 0) {
      op.pass = "phase";  // a later phase of the collective the previous task launched
    } else {
      op.launch = LaunchKind::kCollective;
      LYNX_CHECK(task.group >= 0, "collective '{}' has no rendezvous group", op.label);
      std::vector<int> ranks = group_ranks.at(task.group);
      std::sort(ranks.begin(), ranks.end());
      const auto [it, inserted] =
          comm_ids.try_emplace({task.stream, ranks}, static_cast<int>(out.comms.size()));
      if (inserted) {
        std::string members;
        for (int r : ranks) members += fmt::format("{}{}", members.empty() ? "" : ",", r);
        out.comms.push_back({fmt::format("{}[{}]", out.stream_names.at(task.stream), members), task.stream, ranks});
      }
      op.comm = it->second;
      if (named.list != NamedOp::List::kNone) {
        const model::Op& m = workload_op(named);
        op.collective = named.pass == NamedOp::Pass::kBackwardCollective ? m.bwd_collective
                        : named.pass == NamedOp::Pass::kInputAllGather  ? model::CollectiveKind::kAllGather
                                                                        : m.collective;
        op.bytes = named.pass == NamedOp::Pass::kInputAllGather ? m.bwd_input_allgather_bytes : m.collective_bytes;
      } else if (name == "batch_sizes_broadcast" || name == "batch_broadcast") {
        // The micro-batch load's broadcasts from tp rank 0 (every member the same payload).
        const schedule::MicroBatchLoadBytes load = schedule::micro_batch_load_bytes(out.scenario);
        op.collective = model::CollectiveKind::kBroadcast;
        op.pass = "batch-load";
        op.bytes = name == "batch_broadcast" ? load.data : load.sizes;
      } else {
        op.collective = name == "dp_reducescatter" ? model::CollectiveKind::kReduceScatter
                        : name == "dp_allgather"   ? model::CollectiveKind::kAllGather
                                                   : model::CollectiveKind::kAllReduce;
        op.pass = "dp-comm";
        std::uint64_t member = 0;
        for (std::uint32_t k = 0; k < task.num_flows; ++k) {
          const sim::Flow& f = program.flows[task.first_flow + k];
          member += f.payload_bytes > 0 ? f.payload_bytes : f.bytes;
        }
        op.bytes = ring_payload(member, op.collective, static_cast<int>(ranks.size()));
      }
    }
  }
  // Dependencies (once every task's op is known): same-rank ones as they are; one on another
  // rank is a pipeline transfer, which the receiving rank gets as a receive of its own.
  for (std::size_t i = 0; i < program.tasks.size(); ++i) {
    const sim::Task& task = program.tasks[i];
    LiveOp& op = out.ops[i];
    for (std::uint32_t k = 0; k < task.num_deps; ++k) {
      const sim::TaskId dep = program.deps[task.first_dep + k];
      if (program.tasks[static_cast<std::size_t>(dep)].gpu == task.gpu) {
        op.deps.push_back(dep);
        continue;
      }
      // A send waiting for the receiver's blocking exchange (parallel.pipeline_exchange
      // blocking): the rendezvous that NCCL's send and receive make by themselves.
      if (program.tasks[static_cast<std::size_t>(dep)].kind == sim::TaskKind::kMarker) continue;
      LiveOp& send = out.ops[static_cast<std::size_t>(dep)];
      LYNX_CHECK(send.launch == LaunchKind::kSend && send.match < 0,
                 "'{}' waits for '{}' on another GPU, which is not a pipeline send received once",
                 op.label, send.label);
      LiveOp r;
      r.rank = task.gpu;
      r.stream = recv;
      r.label = "recv " + send.label;
      r.op = send.op;
      r.pass = "recv";
      r.launch = LaunchKind::kRecv;
      r.bytes = send.bytes;
      r.peer = send.rank;
      r.match = dep;
      r.category = sim::Category::kPpComm;
      r.predicted_start_ps = send.predicted_start_ps;
      r.predicted_end_ps = send.predicted_end_ps;
      const int index = static_cast<int>(out.ops.size());
      send.peer = task.gpu;
      send.match = index;
      out.ops.push_back(std::move(r));
      op.deps.push_back(index);
      recvs_before[i].push_back(index);
    }
  }
  out.rank_ops.resize(out.gpu_names.size());
  for (std::size_t i = 0; i < program.tasks.size(); ++i) {
    auto& list = out.rank_ops[static_cast<std::size_t>(program.tasks[i].gpu)];
    for (int r : recvs_before[i]) list.push_back(r);
    list.push_back(static_cast<int>(i));
  }
  return out;
}

}  // namespace lynx::live
