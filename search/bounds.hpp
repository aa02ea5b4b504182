#pragma once
/// Cheap bounds `lynxsim best` prunes with before simulating: no simulated run of the scenario
/// can use less memory or take less time than these (the brute-force test checks both on
/// every configuration of its space).
#include "model/workload.hpp"
#include "scenarios/scenario.hpp"

#include <cstdint>
#include <vector>

namespace lynx::search {

/// The least peak memory (bytes) any recomputation strategy can reach on the fullest GPU:
/// static bytes of its stage + the activations full recomputation keeps (each layer's input
/// and the embedding / head tensors every strategy keeps) for the chunks the schedule holds
/// in flight. Above the GPU's memory, no strategy fits this layout.
std::int64_t memory_lower_bound_bytes(const Scenario& sc);

/// `ops`' forward + backward (no recompute) for one micro-batch on one GPU, as solo kernel
/// time (s): what their compute-stream kernels take at least (hw_models::op_times; with the TP
/// communication overlap's GEMM chunks, their FLOPs at the GPU's peak).
double ops_solo_s(const Scenario& sc, const std::vector<model::Op>& ops);

/// The least iteration time (s): the last pipeline stage's layers and LM head (ops_solo_s), plus the pipeline fill before its first forward and the
/// drain after its last backward (one chunk step of each earlier stage at peak: (pp − 1) steps
/// of equal stages; parallel.first / last_stage_layers give each its own); with a balanced partition
/// only the average stage's.
double compute_lower_bound_s(const Scenario& sc);

}  // namespace lynx::search
