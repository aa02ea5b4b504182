#pragma once
/// Cheap bounds `lynxsim best` prunes with before simulating: no simulated run of the scenario
/// can use less memory or take less time than these (the brute-force test checks both on
/// every configuration of its space).
#include "scenarios/scenario.hpp"

#include <cstdint>

namespace lynx::search {

/// The least peak memory (bytes) any recomputation strategy can reach on the fullest GPU:
/// static bytes of its stage + the activations full recomputation keeps (each layer's input
/// and the embedding / head tensors every strategy keeps) for the chunks the schedule holds
/// in flight. Above the GPU's memory, no strategy fits this layout.
std::int64_t memory_lower_bound_bytes(const Scenario& sc);

/// The least iteration time (s): the last pipeline stage's layer FLOPs (forward + backward,
/// no recompute) at the GPU's peak, plus the pipeline fill before its first forward and the
/// drain after its last backward (one chunk step of each earlier stage at peak: (pp − 1) steps
/// of equal stages; parallel.first / last_stage_layers give each its own); with a balanced partition
/// only the average stage's FLOPs. At least model FLOPs / (GPUs · peak) up to the head.
double compute_lower_bound_s(const Scenario& sc);

}  // namespace lynx::search
