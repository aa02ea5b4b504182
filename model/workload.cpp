#include "model/workload.hpp"

#include "model/expert_grid.hpp"
#include "model/sharding.hpp"

namespace lynx::model {

Workload gpt_workload(const ModelSpec& model, const ParallelSpec& parallel) {
  Workload w;
  w.layer = layer_ops(model, parallel);
  w.embedding = embedding_ops(model, parallel);
  w.head = head_ops(model, parallel);
  // The layer output crosses stage boundaries in 16-bit: this context-parallel rank's
  // seq_len / cp tokens, sequence-sharded with SP.
  w.boundary_bytes = 2ull * static_cast<std::uint64_t>(model.seq_len) * parallel.micro_batch *
                     static_cast<std::uint64_t>(model.hidden) /
                     (parallel.sequence_parallel ? static_cast<std::uint64_t>(parallel.tp) : 1ull) /
                     static_cast<std::uint64_t>(parallel.cp);
  // Megatron-LM's scatter-gather (megatron/p2p_communication.py at cfd2e21607): a tensor whose
  // element count tp divides is sent as 1/tp of it per rank (split_tensor_into_1d_equal_chunks)
  // and all-gathered after the receive (gather_split_1d_tensor); otherwise it is sent whole.
  const std::uint64_t tp = static_cast<std::uint64_t>(parallel.tp);
  if (parallel.pipeline_scatter_gather && !parallel.sequence_parallel && tp > 1 && (w.boundary_bytes / 2) % tp == 0) {
    w.boundary_gather_bytes = w.boundary_bytes;
    w.boundary_bytes /= tp;
  }
  w.layer_params = layer_parameter_count_per_gpu(model, parallel);
  w.layer_expert_params = layer_expert_parameter_count_per_gpu(model, parallel);
  w.embedding_params = embedding_parameter_count_per_gpu(model, parallel);
  w.head_params = head_parameter_count_per_gpu(model, parallel);
  w.tied_embedding_params = tied_embedding_parameter_count_per_gpu(model, parallel);
  w.layer_param_tensors = layer_parameter_tensors(model);
  w.embedding_param_tensors = embedding_parameter_tensors(model);
  w.head_param_tensors = head_parameter_tensors(model, parallel);
  if (mixes_dense_and_moe(model)) {
    const ModelSpec dense = dense_layer_model(model);
    w.dense_layer = layer_ops(dense, parallel);
    w.dense_layer_params = layer_parameter_count_per_gpu(dense, parallel);
    w.dense_layer_param_tensors = layer_parameter_tensors(dense);
    for (int l = 0; l < model.layers; ++l) w.dense_at.push_back(!is_moe_layer(model, l));
  }
  return w;
}

LayerParams Workload::params_of_layers(int first, int count) const {
  LayerParams out;
  for (int l = first; l < first + count; ++l) {
    const bool dense = is_dense_layer(l);
    out.params += dense ? dense_layer_params : layer_params;
    out.expert_params += dense ? 0 : layer_expert_params;
    out.tensors += dense ? dense_layer_param_tensors : layer_param_tensors;
  }
  return out;
}

std::int64_t static_bytes(const Scenario& sc, std::uint64_t parameters_per_gpu,
                          std::uint64_t expert_parameters_per_gpu) {
  // Bytes per parameter by sharding level: model/sharding.hpp (16 with 16-bit gradients and
  // no sharding, ZeRO, Rajbhandari et al. 2020, Sec. 3.1; Megatron keeps fp32 main gradients
  // then too, which its distributed-optimizer table counts as 20). The routed experts' state
  // is sharded over their expert-data-parallel group (tp · dp · cp / (etp · ep) ranks) instead.
  const ParallelSpec& p = sc.parallel;
  const double per_param = static_bytes_per_param(p, shard_group_size(p, sc.hardware.gpus_per_node));
  const int expert_shard = sharding_level(p) == Sharding::kNone ? 1 : expert_data_parallel_size(p);
  const double expert_per_param = static_bytes_per_param(p, expert_shard);
  return static_cast<std::int64_t>(per_param * static_cast<double>(parameters_per_gpu) +
                                   expert_per_param * static_cast<double>(expert_parameters_per_gpu)) +
         static_cast<std::int64_t>(sc.hardware.memory_reserve_bytes);
}

}  // namespace lynx::model
