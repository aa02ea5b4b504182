#include "search/bounds.hpp"

#include "hw_models/compute_model.hpp"
#include "model/gpt.hpp"
#include "model/workload.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "schedule/program_builder.hpp"
#include "strategies/recompute_plan.hpp"

#include <algorithm>

namespace lynx::search {

std::int64_t memory_lower_bound_bytes(const Scenario& sc) {
  const ParallelSpec& p = sc.parallel;
  const model::Workload w = model::gpt_workload(sc.model, p);
  // What full recomputation keeps of a layer (a mixed model: the smaller of its two kinds').
  auto input_bytes = [](const std::vector<model::Op>& ops) {
    std::int64_t bytes = 0;
    for (const model::Op& op : ops)
      if (op.group == model::OpGroup::kLayerInput) bytes += static_cast<std::int64_t>(op.saved_bytes);
    return bytes;
  };
  const std::int64_t layer_input =
      w.dense_layer.empty() ? input_bytes(w.layer) : std::min(input_bytes(w.layer), input_bytes(w.dense_layer));
  std::int64_t embedding = 0, head = 0;  // kept by every strategy
  for (const model::Op& op : w.embedding) embedding += static_cast<std::int64_t>(op.saved_bytes);
  for (const model::Op& op : w.head) head += static_cast<std::int64_t>(op.saved_bytes);
  const int micro_batches = static_cast<int>(micro_batches_per_pipeline(p));
  const int v = p.virtual_stages;
  // The partition may move layers between stages; the scenario's split (uniform or
  // first / last_stage_layers) is what this bound assumes, and a balanced partition gets the
  // bound of its stage with the fewest layers: none.
  const bool uniform = sc.recompute.partition == PartitionKind::kUniform;
  const std::vector<int> stage_layers = model::pipeline_stage_layers(sc.model.layers, p);
  // The layers of each virtual stage (chunk c of GPU k: c·pp + k), for their parameters.
  const std::vector<int> split = strategies::stage_partition(sc.model.layers, p);
  std::vector<int> first_layer(split.size(), 0);
  for (size_t vs = 1; vs < split.size(); ++vs) first_layer[vs] = first_layer[vs - 1] + split[vs - 1];
  std::int64_t most = 0;
  for (int k = 0; k < p.pp; ++k) {
    const int chunk_layers = stage_layers[static_cast<size_t>(k)] / v;
    std::uint64_t params = 0, expert_params = 0;
    for (int c = 0; uniform && c < v; ++c) {
      const auto vs = static_cast<size_t>(c * p.pp + k);
      const model::LayerParams held = w.params_of_layers(first_layer[vs], split[vs]);
      params += held.params;
      expert_params += held.expert_params;
    }
    if (k == 0) params += w.embedding_params;
    if (k == p.pp - 1) params += w.head_params;
    const std::int64_t in_flight_chunks =
        schedule::max_in_flight_micro_batches(p.schedule, p.pp, k, micro_batches, v);
    // Full uniform recomputation in chunks of num_layers keeps only each chunk's input.
    const std::int64_t kept_inputs = sc.recompute.method == FullMethod::kUniform
                                         ? (chunk_layers + sc.recompute.num_layers - 1) / sc.recompute.num_layers
                                         : chunk_layers;
    std::int64_t activations = uniform ? in_flight_chunks * kept_inputs * layer_input : 0;
    // The embedding / head chunk is one of v on its GPU: at least one micro-batch of it alive.
    if (k == 0) activations += embedding;
    if (k == p.pp - 1) activations += head;
    most = std::max(most, model::static_bytes(sc, params, expert_params) + activations);
  }
  return most;
}

double ops_solo_s(const Scenario& sc, const std::vector<model::Op>& ops) {
  // The engine runs a compute-stream kernel at rate <= 1, so it takes at least its solo time
  // (work_ps). Each op's kernels are emitted with hw_models::op_times unless the TP
  // communication overlap splits GEMMs into row chunks with their own times: then the FLOPs at
  // the GPU's peak (FP8 GEMMs at the 16-bit peak's share of their own).
  if (schedule::tp_overlap_chunks(sc.parallel) == 1) {
    TimePs solo_ps = 0;
    for (const model::Op& op : ops) {
      const hw_models::OpTimes t = hw_models::op_times(sc.hardware, op);
      solo_ps += t.fwd_ps + t.dgrad_ps + t.wgrad_ps;
    }
    return ps_to_s(solo_ps);
  }
  const double peak = static_cast<double>(sc.hardware.peak_flops_per_s);
  const double fp8_share = sc.hardware.fp8_peak_flops_per_s > 0
                               ? peak / static_cast<double>(sc.hardware.fp8_peak_flops_per_s)
                               : 1.0;
  double flops = 0;
  for (const model::Op& op : ops)
    flops += (op.fwd_flops + op.bwd_dgrad_flops + op.bwd_wgrad_flops) * (op.fp8 ? fp8_share : 1.0);
  return flops / peak;
}

double compute_lower_bound_s(const Scenario& sc) {
  const ParallelSpec& p = sc.parallel;
  const model::Workload w = model::gpt_workload(sc.model, p);
  // One layer, one micro-batch, one GPU: forward + backward on the compute stream (a mixed
  // model: its lighter kind of layer, so that the bound holds for every layer).
  const double layer_s = w.dense_layer.empty() ? ops_solo_s(sc, w.layer)
                                               : std::min(ops_solo_s(sc, w.layer), ops_solo_s(sc, w.dense_layer));
  // The LM head's forward + backward of every micro-batch run on the last stage's compute
  // stream too, between its last chunk's forward and backward.
  const double head_s = ops_solo_s(sc, w.head);
  const double micro_batches = static_cast<double>(micro_batches_per_pipeline(p));
  if (sc.recompute.partition != PartitionKind::kUniform)
    return micro_batches * (sc.model.layers * layer_s + head_s) / p.pp;
  const int v = p.virtual_stages;
  // The last stage's chunks, then one chunk step of every earlier stage for the fill and drain
  // (with first / last_stage_layers each stage's own count; uniform: (pp − 1) equal steps).
  const std::vector<int> stage_layers = model::pipeline_stage_layers(sc.model.layers, p);
  auto chunk_s = [&](int k) { return static_cast<double>(stage_layers[static_cast<size_t>(k)] / v) * layer_s; };
  double fill_s = 0;
  for (int k = 0; k + 1 < p.pp; ++k) fill_s += chunk_s(k);
  return micro_batches * (v * chunk_s(p.pp - 1) + head_s) + fill_s;
}

}  // namespace lynx::search
