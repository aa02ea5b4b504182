#include "live/dry_run.hpp"

#include "common/bytes.hpp"
#include "live/bootstrap_plan.hpp"
#include "live/host_backend.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <map>
#include <ostream>

namespace lynx::live {

std::string format_bytes(std::uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= static_cast<std::uint64_t>(kGiB)) return fmt::format("{:.2f} GiB", b / static_cast<double>(kGiB));
  if (bytes >= static_cast<std::uint64_t>(kMiB)) return fmt::format("{:.2f} MiB", b / static_cast<double>(kMiB));
  if (bytes >= static_cast<std::uint64_t>(kKiB)) return fmt::format("{:.2f} KiB", b / static_cast<double>(kKiB));
  return fmt::format("{} B", bytes);
}

std::string describe_launch(const OpStream& ops, const LiveOp& op) {
  switch (op.launch) {
    case LaunchKind::kNone:
      return op.pass == "phase" ? "(later phase of the collective above)" : "";
    case LaunchKind::kGemm:
    case LaunchKind::kBatchedGemm: {
      std::string s = op.batch > 1 ? fmt::format("bf16 {} x {}x{}x{}", op.batch, op.m, op.n, op.k)
                                   : fmt::format("bf16 {}x{}x{}", op.m, op.n, op.k);
      if (op.m2 > 0) s += fmt::format(" + {}x{}x{}", op.m2, op.n2, op.k2);
      return s + fmt::format(", {}", format_bytes(op.bytes));
    }
    case LaunchKind::kMemoryBound:
      if (op.kernel == Kernel::kStream) return fmt::format("hbm_stream {}", format_bytes(op.bytes));
      return fmt::format("{} {}x{}, {}", kernel_name(op.kernel), op.m, op.n, format_bytes(op.bytes));
    case LaunchKind::kCollective:
      return fmt::format("{} {} on {}", collective_name(op.collective), format_bytes(op.bytes),
                         ops.comms.at(static_cast<std::size_t>(op.comm)).name);
    case LaunchKind::kSend: return fmt::format("{} to rank {}", format_bytes(op.bytes), op.peer);
    case LaunchKind::kRecv: return fmt::format("{} from rank {}", format_bytes(op.bytes), op.peer);
    case LaunchKind::kStandinCopy:
      return fmt::format("{} {} (communication stand-in)", op.to_host ? "device->host" : "host->device",
                         format_bytes(op.bytes));
  }
  return "";
}

void write_dry_run(std::ostream& out, const OpStream& ops, const std::string& plan_label) {
  const Scenario& sc = ops.scenario;
  const ParallelSpec& p = sc.parallel;
  fmt::print(out, "lynxsim live --dry-run {}: plan '{}', scenario '{}'\n", plan_label, ops.strategy, sc.name);
  if (const std::string note = runs_as_note(ops); !note.empty()) fmt::print(out, "{}\n", note);
  fmt::print(out, "model: {} layers, hidden {}, heads {}, ffn {}, seq {}, vocab {}{}\n", sc.model.layers,
             sc.model.hidden, sc.model.heads, sc.model.ffn_hidden, sc.model.seq_len, sc.model.vocab,
             sc.model.flash_attention ? ", flash attention" : "");
  fmt::print(out, "layout: tp {} pp {} dp {}{}, micro-batch {}, global batch {}\n", p.tp, p.pp, p.dp,
             p.sequence_parallel ? " (sequence parallel)" : "", p.micro_batch, p.global_batch);
  std::string streams;
  for (const std::string& s : ops.stream_names) streams += (streams.empty() ? "" : " ") + s;
  fmt::print(out, "{} GPU rank(s), streams per rank: {}; {} ops ({} program tasks + {} receives)\n",
             ops.gpu_names.size(), streams, ops.ops.size(), ops.num_tasks, ops.ops.size() - ops.num_tasks);
  // The bootstrap: one process per node, and each NCCL communicator in creation order.
  const BootstrapPlan boot = plan_bootstrap(ops);
  if (boot.processes > 1)
    fmt::print(out, "processes: {}, one per node (mpirun -np {} --map-by node lynxsim-live {})\n", boot.processes,
               boot.processes, plan_label);
  const auto joined = [](const std::vector<int>& values) {
    std::string s;
    for (int v : values) s += fmt::format("{}{}", s.empty() ? "" : ",", v);
    return s;
  };
  for (std::size_t node = 0; node < boot.process_ranks.size(); ++node) {
    std::vector<int> devices;
    for (int r : boot.process_ranks[node]) devices.push_back(boot.rank_device[static_cast<std::size_t>(r)]);
    fmt::print(out, "node {}: ranks {} on devices {}\n", node, joined(boot.process_ranks[node]), joined(devices));
  }
  for (const CommGroup& g : boot.groups)
    fmt::print(out, "communicator {}: {} ranks on node{} {}, NCCL id from node {}\n", g.name, g.ranks.size(),
               g.processes.size() == 1 ? "" : "s", joined(g.processes), g.owner);

  HostBackend replay({.size_scale = 1e-12, .simulator_order = true});
  replay.prepare(ops);
  const Measured replayed = replay.run_iteration(ops);

  for (std::size_t r = 0; r < ops.rank_ops.size(); ++r) {
    fmt::print(out, "\nrank {} ({}): static {}, predicted peak {}\n", r, ops.gpu_names[r],
               format_bytes(static_cast<std::uint64_t>(ops.static_bytes[r])),
               format_bytes(static_cast<std::uint64_t>(ops.predicted_peak_bytes[r])));
    fmt::print(out, "{:>7}  {:<9}  {:<40} {:<12} {:<58} {:<16} {}\n", "op", "stream", "label", "launch",
               "shape / bytes", "deps", "memory");
    std::map<int, int> per_stream;
    std::uint64_t alloc_count = 0, free_count = 0, alloc_bytes = 0, free_bytes = 0;
    for (int index : ops.rank_ops[r]) {
      const LiveOp& op = ops.ops[static_cast<std::size_t>(index)];
      ++per_stream[op.stream];
      std::string deps;
      for (int d : op.deps) deps += fmt::format("{}{}", deps.empty() ? "" : ",", d);
      std::string mem;
      for (const sim::MemEffect& e : op.mem) {
        const bool alloc = e.bytes > 0;
        const auto bytes = static_cast<std::uint64_t>(alloc ? e.bytes : -e.bytes);
        mem += fmt::format("{}{}{} {}{}", mem.empty() ? "" : " ", alloc ? "+" : "-", ops.tags.at(e.tag),
                           format_bytes(bytes), e.at_end ? " at end" : "");
        (alloc ? alloc_count : free_count) += 1;
        (alloc ? alloc_bytes : free_bytes) += bytes;
      }
      fmt::print(out, "{:>7}  {:<9}  {:<40} {:<12} {:<58} {:<16} {}\n", index, ops.stream_names.at(op.stream),
                 op.label, launch_kind_name(op.launch), describe_launch(ops, op), deps, mem);
    }
    std::string counts;
    for (const auto& [stream, count] : per_stream)
      counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", ops.stream_names.at(stream), count);
    fmt::print(out, "rank {} ops per stream: {}\n", r, counts);
    fmt::print(out, "rank {} allocations: {} ({}), frees: {} ({})\n", r, alloc_count, format_bytes(alloc_bytes),
               free_count, format_bytes(free_bytes));
    fmt::print(out, "rank {} memory peak: {} replayed in the simulator's order, {} tracked by the simulator\n", r,
               format_bytes(static_cast<std::uint64_t>(replayed.peak_bytes[r])),
               format_bytes(static_cast<std::uint64_t>(ops.predicted_peak_bytes[r])));
  }
  fmt::print(out, "\npredicted iteration time: {:.6f} s\n", static_cast<double>(ops.predicted_iteration_ps) / 1e12);
}

}  // namespace lynx::live
