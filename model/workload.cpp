#include "model/workload.hpp"

namespace lynx::model {

Workload gpt_workload(const ModelSpec& model, const ParallelSpec& parallel) {
  Workload w;
  w.layer = layer_ops(model, parallel);
  w.embedding = embedding_ops(model, parallel);
  w.head = head_ops(model, parallel);
  // The layer output crosses stage boundaries in 16-bit, sequence-sharded with SP.
  w.boundary_bytes = 2ull * static_cast<std::uint64_t>(model.seq_len) * parallel.micro_batch *
                     static_cast<std::uint64_t>(model.hidden) /
                     (parallel.sequence_parallel ? static_cast<std::uint64_t>(parallel.tp) : 1ull);
  w.layer_params = layer_parameter_count_per_gpu(model, parallel);
  w.embedding_params = embedding_parameter_count_per_gpu(model, parallel);
  w.head_params = head_parameter_count_per_gpu(model, parallel);
  return w;
}

std::int64_t static_bytes(const Scenario& sc, std::uint64_t parameters_per_gpu) {
  // Mixed-precision Adam: 2 (bf16 weights) + 2 (bf16 grads) + 12 (fp32 master weights,
  // momentum, variance) bytes per parameter — Rajbhandari et al. 2020 (ZeRO), Sec. 3.1.
  // The distributed optimizer (ZeRO-1) shards the 12 optimizer bytes over data parallelism.
  const double optimizer_bytes =
      sc.parallel.distributed_optimizer ? 12.0 / sc.parallel.dp : 12.0;
  const double per_param = 4.0 + optimizer_bytes;
  return static_cast<std::int64_t>(per_param * static_cast<double>(parameters_per_gpu)) +
         static_cast<std::int64_t>(sc.hardware.memory_reserve_bytes);
}

}  // namespace lynx::model
