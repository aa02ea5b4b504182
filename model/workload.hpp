#pragma once
/// What one pipeline-stage GPU runs per micro-batch (the GPT ops of model/gpt.hpp, or synthetic
/// ops in tests) and the static memory formula: the inputs both the planners (strategies/) and
/// the program builder (schedule/) read, kept here so neither depends on the other.
#include "model/gpt.hpp"
#include "scenarios/scenario.hpp"

#include <cstdint>
#include <vector>

namespace lynx::model {

/// Bytes of one parameter's gradient as accumulated and reduced over data parallelism: 4 with
/// parallel.fp32_main_grads (Megatron-LM's arguments.py turns accumulate_allreduce_grads_in_fp32
/// on for bf16), else 2.
inline std::uint64_t grad_bytes_per_param(const ParallelSpec& p) { return p.fp32_main_grads ? 4 : 2; }

/// Parameters per GPU of a run of layers (Workload::params_of_layers).
struct LayerParams {
  std::uint64_t params = 0;         ///< all but the routed experts
  std::uint64_t expert_params = 0;  ///< the routed experts (reduced over the expert-data-parallel group)
  std::int64_t tensors = 0;         ///< parameter tensors
};

/// The ops and sizes of one pipeline-stage GPU (tensor-parallel shard) per micro-batch.
/// A model mixing dense and MoE layers (model.moe.first_dense_layers, layer_freq) has two
/// kinds of layer: `layer` and its sizes describe its MoE layers, `dense_layer` and its sizes
/// its dense ones; read a global layer's through ops_of_layer / params_of_layers.
struct Workload {
  std::vector<Op> layer;      ///< forward ops of one transformer layer (mixed model: an MoE layer)
  std::vector<Op> embedding;  ///< first virtual stage only
  std::vector<Op> head;       ///< last virtual stage only
  std::uint64_t boundary_bytes = 0;  ///< activation (and gradient) bytes sent between stages
  /// parallel.pipeline_scatter_gather: the whole boundary tensor the receiving stage all-gathers
  /// over tp from the 1/tp parts sent (0: sent whole, no gather).
  std::uint64_t boundary_gather_bytes = 0;
  std::uint64_t layer_params = 0;    ///< parameters of one layer per GPU (MoE: without the routed experts)
  /// MoE: the routed experts' parameters of one layer per GPU (layer_expert_parameter_count_per_gpu),
  /// whose gradients are reduced over the expert-data-parallel group (tp · dp · cp / (etp · ep)
  /// ranks: model/expert_grid.hpp); 0 when dense.
  std::uint64_t layer_expert_params = 0;
  std::uint64_t embedding_params = 0;  ///< first virtual stage extra: word + position embedding
  std::uint64_t head_params = 0;       ///< last virtual stage extra: final LN (+ tied embedding copy)
  /// Word-embedding gradient the first and last stage all-reduce before the optimizer step
  /// (tied_embedding_parameter_count_per_gpu; 0 when untied or pp == 1).
  std::uint64_t tied_embedding_params = 0;
  /// Parameter tensors of the same (the optimizer's kernels launch per tensor list).
  std::int64_t layer_param_tensors = 0, embedding_param_tensors = 0, head_param_tensors = 0;

  /// Mixed model only: the forward ops of a dense layer (the dense MLP of model.ffn_hidden, as
  /// Megatron-Core builds the non-MoE layers of an MoE model), its parameters per GPU and
  /// parameter tensors; `dense_at[l]` whether global layer l is dense. Empty: every layer is `layer`.
  std::vector<Op> dense_layer;
  std::uint64_t dense_layer_params = 0;
  std::int64_t dense_layer_param_tensors = 0;
  std::vector<bool> dense_at;

  /// Whether global layer `l` is a dense layer of a mixed model (its ops are dense_layer).
  bool is_dense_layer(int l) const { return !dense_at.empty() && dense_at.at(static_cast<std::size_t>(l)); }
  /// The forward ops of global layer `l`.
  const std::vector<Op>& ops_of_layer(int l) const { return is_dense_layer(l) ? dense_layer : layer; }
  /// Parameters per GPU of global layers first .. first + count − 1.
  LayerParams params_of_layers(int first, int count) const;
};

/// The Megatron GPT workload of `model` under `parallel` (model must be resolved).
Workload gpt_workload(const ModelSpec& model, const ParallelSpec& parallel);

/// Static bytes per GPU of a stage holding `parameters_per_gpu` parameters + reserve: 16-bit
/// weights, gradients (grad_bytes_per_param) and fp32 Adam state (main weights, momentum,
/// variance), as the sharding level keeps them over its shard group
/// (model::static_bytes_per_param). Routed-expert parameters (`expert_parameters_per_gpu`)
/// count the same, except that their shard group is the expert-data-parallel group, tp · dp · cp /
/// (etp · ep).
std::int64_t static_bytes(const Scenario& sc, std::uint64_t parameters_per_gpu,
                          std::uint64_t expert_parameters_per_gpu = 0);

}  // namespace lynx::model
