#pragma once
/// What one pipeline-stage GPU runs per micro-batch (the GPT ops of model/gpt.hpp, or synthetic
/// ops in tests) and the static memory formula: the inputs both the planners (strategies/) and
/// the program builder (schedule/) read, kept here so neither depends on the other.
#include "model/gpt.hpp"
#include "scenarios/scenario.hpp"

#include <cstdint>
#include <vector>

namespace lynx::model {

/// The ops and sizes of one pipeline-stage GPU (tensor-parallel shard) per micro-batch.
struct Workload {
  std::vector<Op> layer;      ///< forward ops of one transformer layer
  std::vector<Op> embedding;  ///< first virtual stage only
  std::vector<Op> head;       ///< last virtual stage only
  std::uint64_t boundary_bytes = 0;  ///< activation (and gradient) bytes sent between stages
  std::uint64_t layer_params = 0;    ///< parameters of one layer per GPU
  std::uint64_t embedding_params = 0;  ///< first virtual stage extra: word + position embedding
  std::uint64_t head_params = 0;       ///< last virtual stage extra: final LN (+ tied embedding copy)
};

/// The Megatron GPT workload of `model` under `parallel` (model must be resolved).
Workload gpt_workload(const ModelSpec& model, const ParallelSpec& parallel);

/// Static bytes per GPU of a stage holding `parameters_per_gpu` parameters (weights, grads, Adam
/// state; ZeRO paper's 16 bytes/parameter, 4 + 12/dp with the distributed optimizer) + reserve.
std::int64_t static_bytes(const Scenario& sc, std::uint64_t parameters_per_gpu);

}  // namespace lynx::model
