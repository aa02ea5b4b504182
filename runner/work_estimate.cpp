#include "runner/work_estimate.hpp"

#include "common/bytes.hpp"
#include "common/checked.hpp"
#include "common/error.hpp"
#include "model/gpt.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace lynx::runner {

WorkEstimate estimate_work(const Scenario& sc, bool one_gpu_per_stage) {
  const ParallelSpec& p = sc.parallel;
  WorkEstimate w;
  w.simulated_gpus = one_gpu_per_stage ? p.pp : gpus_used(p);
  w.micro_batches = micro_batches_per_pipeline(p);
  const auto ops = [&](const std::vector<model::Op>& list) {
    return static_cast<std::int64_t>(list.size());
  };
  w.ops_per_gpu = checked_sum(
      "ops per GPU",
      {checked_product("ops per GPU", {sc.model.layers / p.pp, ops(model::layer_ops(sc.model, p))}),
       ops(model::embedding_ops(sc.model, p)), ops(model::head_ops(sc.model, p))});
  // Saturate instead of failing: an estimate past 2^63 is simply "too many".
  const auto product = try_product({w.simulated_gpus, w.micro_batches, w.ops_per_gpu, kTasksPerOp});
  w.tasks = product.value_or(INT64_MAX);
  w.gpus_in_topology = gpus_used(p);
  w.bytes = try_sum({try_product({w.tasks, kBytesPerTask}).value_or(INT64_MAX),
                     w.gpus_in_topology * kTopologyBytesPerGpu})
                .value_or(INT64_MAX);
  return w;
}

std::uint64_t usable_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  std::uint64_t usable = pages > 0 && page_bytes > 0
                             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_bytes)
                             : UINT64_MAX;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    usable = std::min<std::uint64_t>(usable, limit.rlim_cur);
  return usable;
}

void check_work_bounded(const Scenario& sc, bool one_gpu_per_stage) {
  const WorkEstimate w = estimate_work(sc, one_gpu_per_stage);
  const ParallelSpec& p = sc.parallel;
  const std::string formula = fmt::format(
      "{} simulated GPUs ({}) x {} micro-batches (parallel.global_batch / (micro_batch x dp)) x "
      "{} ops per GPU (model.layers / parallel.pp x ops per layer) x {} passes",
      w.simulated_gpus, one_gpu_per_stage ? "parallel.pp, one GPU per stage" : p.cp > 1 ? "tp x cp x pp x dp" : "tp x pp x dp",
      w.micro_batches, w.ops_per_gpu, kTasksPerOp);
  const std::string remedy =
      one_gpu_per_stage || p.tp * grad_replicas(p) == 1
          ? "simulate a smaller parallel.global_batch or fewer model.layers"
          : "simulate a smaller parallel.global_batch, or use sim.exploit_symmetry on a cluster "
            "with NVSwitch nodes";
  if (w.tasks > sc.sim.max_tasks)
    fail(ErrorCode::kWorkTooLarge, 
        "{}: key 'sim.max_tasks': the simulation would build about {:.3g} tasks ({}), more than "
        "sim.max_tasks = {} (about {:.1f} GiB and {:.0f} s of CPU); {}, or raise sim.max_tasks for a "
        "deliberately huge run",
        sc.source_file, static_cast<double>(w.tasks), formula, sc.sim.max_tasks,
        to_gib(w.bytes), static_cast<double>(w.tasks) * kCpuSecondsPerTask, remedy);
  const std::uint64_t usable = usable_memory_bytes();
  const bool graph_dominates = w.gpus_in_topology * kTopologyBytesPerGpu > w.bytes / 2;
  if (static_cast<std::uint64_t>(w.bytes) > usable)
    fail(ErrorCode::kWorkTooLarge, 
        "{}: the simulation would need about {:.1f} GiB ({:.3g} tasks x {} B: {}; and {} GPUs "
        "in the link graph x {} B), more than the {:.1f} GiB of memory this machine lets it use; "
        "{}",
        sc.source_file, to_gib(w.bytes), static_cast<double>(w.tasks), kBytesPerTask, formula,
        w.gpus_in_topology, kTopologyBytesPerGpu,
        to_gib(static_cast<std::int64_t>(std::min<std::uint64_t>(usable, INT64_MAX))),
        graph_dominates ? "simulate a layout of fewer GPUs (parallel.tp x pp x dp)" : remedy);
}

}  // namespace lynx::runner
