#include "search/bounds.hpp"

#include "model/workload.hpp"
#include "schedule/pipeline_schedule.hpp"

#include <algorithm>

namespace lynx::search {

std::int64_t memory_lower_bound_bytes(const Scenario& sc) {
  const ParallelSpec& p = sc.parallel;
  const model::Workload w = model::gpt_workload(sc.model, p);
  std::int64_t layer_input = 0;  // what full recomputation keeps of a layer
  for (const model::Op& op : w.layer)
    if (op.group == model::OpGroup::kLayerInput) layer_input += static_cast<std::int64_t>(op.saved_bytes);
  std::int64_t embedding = 0, head = 0;  // kept by every strategy
  for (const model::Op& op : w.embedding) embedding += static_cast<std::int64_t>(op.saved_bytes);
  for (const model::Op& op : w.head) head += static_cast<std::int64_t>(op.saved_bytes);
  const int micro_batches = static_cast<int>(micro_batches_per_pipeline(p));
  const int v = p.virtual_stages;
  const int chunk_layers = sc.model.layers / (p.pp * v);
  // The partition may move layers between stages; uniform is what this bound assumes, and a
  // balanced partition gets the bound of its stage with the fewest layers: none.
  const bool uniform = sc.recompute.partition == PartitionKind::kUniform;
  std::int64_t most = 0;
  for (int k = 0; k < p.pp; ++k) {
    std::uint64_t params = 0;
    if (uniform) params += w.layer_params * static_cast<std::uint64_t>(chunk_layers * v);
    if (k == 0) params += w.embedding_params;
    if (k == p.pp - 1) params += w.head_params;
    const std::int64_t in_flight_chunks =
        schedule::max_in_flight_micro_batches(p.schedule, p.pp, k, micro_batches, v);
    std::int64_t activations = uniform ? in_flight_chunks * chunk_layers * layer_input : 0;
    // The embedding / head chunk is one of v on its GPU: at least one micro-batch of it alive.
    if (k == 0) activations += embedding;
    if (k == p.pp - 1) activations += head;
    most = std::max(most, model::static_bytes(sc, params) + activations);
  }
  return most;
}

double compute_lower_bound_s(const Scenario& sc) {
  const ParallelSpec& p = sc.parallel;
  const model::Workload w = model::gpt_workload(sc.model, p);
  double layer_flops = 0;  // one layer, one micro-batch, one GPU: forward + backward
  for (const model::Op& op : w.layer) layer_flops += op.fwd_flops + op.bwd_dgrad_flops + op.bwd_wgrad_flops;
  const double peak = static_cast<double>(sc.hardware.peak_flops_per_s);
  const double micro_batches = static_cast<double>(micro_batches_per_pipeline(p));
  if (sc.recompute.partition != PartitionKind::kUniform)
    return micro_batches * sc.model.layers / p.pp * layer_flops / peak;
  const int v = p.virtual_stages;
  const double chunk_s = static_cast<double>(sc.model.layers / (p.pp * v)) * layer_flops / peak;
  return (micro_batches * v + (p.pp - 1)) * chunk_s;
}

}  // namespace lynx::search
