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
  w.layer_expert_params = layer_expert_parameter_count_per_gpu(model, parallel);
  w.embedding_params = embedding_parameter_count_per_gpu(model, parallel);
  w.head_params = head_parameter_count_per_gpu(model, parallel);
  w.tied_embedding_params = tied_embedding_parameter_count_per_gpu(model, parallel);
  w.layer_param_tensors = layer_parameter_tensors(model);
  w.embedding_param_tensors = embedding_parameter_tensors(model);
  w.head_param_tensors = head_parameter_tensors(model, parallel);
  return w;
}

std::int64_t static_bytes(const Scenario& sc, std::uint64_t parameters_per_gpu,
                          std::uint64_t expert_parameters_per_gpu) {
  // Megatron's bf16 training keeps 2 (bf16 weights) + 4 (fp32 main gradients: bf16 forces
  // gradient accumulation and reduction in fp32) + 12 (fp32 main weights, Adam momentum and
  // variance) = 18 bytes per parameter; the distributed optimizer shards the 12 over data
  // parallelism: 6 + 12/dp. Source: Megatron-LM docs, "Distributed Optimizer" (table "bf16
  // param, fp32 grads": 18 and 6 + 12/d); with 16-bit gradients 16 and 4 + 12/dp (the same
  // table's "fp16 param, fp16 grads" row counts 20 because Megatron then also keeps fp32 main
  // gradients; ZeRO, Rajbhandari et al. 2020, Sec. 3.1, counts 16).
  const double optimizer_bytes =
      sc.parallel.distributed_optimizer ? 12.0 / sc.parallel.dp : 12.0;
  const double per_param = 2.0 + static_cast<double>(grad_bytes_per_param(sc.parallel)) + optimizer_bytes;
  const std::int64_t reserve = static_cast<std::int64_t>(sc.hardware.memory_reserve_bytes);
  if (expert_parameters_per_gpu == 0)
    return static_cast<std::int64_t>(per_param * static_cast<double>(parameters_per_gpu)) + reserve;
  const double expert_dp = static_cast<double>(sc.parallel.dp / sc.parallel.ep);
  const double expert_per_param = 2.0 + static_cast<double>(grad_bytes_per_param(sc.parallel)) +
                                  (sc.parallel.distributed_optimizer ? 12.0 / expert_dp : 12.0);
  return static_cast<std::int64_t>(per_param * static_cast<double>(parameters_per_gpu) +
                                   expert_per_param * static_cast<double>(expert_parameters_per_gpu)) +
         reserve;
}

}  // namespace lynx::model
