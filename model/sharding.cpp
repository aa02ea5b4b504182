#include "model/sharding.hpp"

#include "model/workload.hpp"
#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lynx::model {

int shard_group_size(const ParallelSpec& p, int gpus_per_node) {
  if (sharding_level(p) == Sharding::kNone) return 1;
  if (p.shard_group == ShardGroup::kDp) return grad_replicas(p);
  return std::max(1, std::min(grad_replicas(p), gpus_per_node / p.tp));
}

std::vector<int> shard_group_of(const ParallelSpec& p, int gpus_per_node, int dp_rank) {
  const int size = shard_group_size(p, gpus_per_node);
  std::vector<int> out;
  for (int d = dp_rank / size * size; d < (dp_rank / size + 1) * size; ++d) out.push_back(d);
  return out;
}

std::vector<int> replica_group_of(const ParallelSpec& p, int gpus_per_node, int dp_rank) {
  const int size = shard_group_size(p, gpus_per_node);
  std::vector<int> out;
  for (int d = dp_rank % size; d < grad_replicas(p); d += size) out.push_back(d);
  return out;
}

double static_bytes_per_param(const ParallelSpec& p, int shard) {
  const double grad = static_cast<double>(grad_bytes_per_param(p));
  const double d = static_cast<double>(shard);
  switch (sharding_level(p)) {
    case Sharding::kNone: return 2.0 + grad + 12.0;
    case Sharding::kOptimizer: return 2.0 + grad + 12.0 / d;
    case Sharding::kGradients: return 2.0 + (grad + 12.0) / d;
    case Sharding::kFull: return (2.0 + grad + 12.0) / d;
  }
  return 0.0;
}

void check_sharding(const Scenario& s, const KeyOrigins& origins) {
  const ParallelSpec& p = s.parallel;
  const Sharding level = sharding_level(p);
  const char* name = kShardingNames[static_cast<std::size_t>(level)];
  auto refuse = [&](ErrorCode code, std::vector<std::string> keys, const std::string& why) {
    const std::string key = origins.blame(keys);
    fail(code, "{}: key '{}': {}", origins.origin_of(key), key, why);
  };
  if (p.overlap_param_gather && (level == Sharding::kNone || level == Sharding::kFull))
    // Megatron-LM's validate_args: "--overlap-param-gather only supported with distributed
    // optimizer"; full sharding gathers each layer's parameters itself.
    refuse(ErrorCode::kIncompatibleSettings, {"parallel.overlap_param_gather", "parallel.sharding", "parallel.distributed_optimizer"},
           fmt::format("parallel.overlap_param_gather needs parallel.distributed_optimizer: true (or "
                       "parallel.sharding optimizer or gradients: only they all-gather parameters after "
                       "the optimizer step), got sharding {}",
                       name));
  if (level >= Sharding::kGradients && p.dp_overlap == DpOverlap::kEnd)
    refuse(ErrorCode::kIncompatibleSettings, {"parallel.dp_overlap", "parallel.sharding"},
           fmt::format("parallel.sharding {} reduce-scatters gradients as each micro-batch's backward "
                       "produces them; parallel.dp_overlap end (one reduction after the last "
                       "micro-batch) would keep the unsharded gradients it shards",
                       name));
  if (level == Sharding::kFull && p.schedule == ScheduleKind::kZbH1)
    refuse(ErrorCode::kIncompatibleSettings, {"parallel.schedule", "parallel.sharding"},
           "parallel.sharding full is not modelled with schedule zb-h1 (its deferred weight-gradient "
           "passes would need the layer's parameters gathered a third time)");
  if (level == Sharding::kFull && s.recompute.strategy == RecomputeKind::kFull && s.recompute.method == FullMethod::kUniform &&
      s.recompute.num_layers > 1)
    refuse(ErrorCode::kIncompatibleSettings, {"recompute.num_layers", "parallel.sharding"},
           fmt::format("parallel.sharding full gathers one layer's parameters at a time (two resident); "
                       "recompute.num_layers {} recomputes {} layers as one chunk before their backward, "
                       "which would need them all gathered: use num_layers 1",
                       s.recompute.num_layers, s.recompute.num_layers));
  if (p.shard_group == ShardGroup::kNode) {
    if (level == Sharding::kNone)
      refuse(ErrorCode::kIncompatibleSettings, {"parallel.shard_group", "parallel.sharding"},
             "parallel.shard_group node needs parallel.sharding optimizer, gradients or full (nothing is sharded)");
    const int per_node = s.hardware.gpus_per_node;
    const int node_dp = per_node / p.tp;
    // Consecutive dp ranks (dp · cp with context parallelism) are tp GPUs apart (rank =
    // (stage·dp·cp + dp rank)·tp + tp rank): a node holds gpus_per_node / tp of them, a whole
    // number of dp groups or a divisor of one.
    const int replicas = grad_replicas(p);
    const bool tiles = per_node % p.tp == 0 && node_dp > 0 &&
                       (replicas >= node_dp ? replicas % node_dp == 0 : node_dp % replicas == 0);
    if (!tiles)
      refuse(ErrorCode::kIndivisibleLayout, {"parallel.shard_group", "parallel.dp", "parallel.cp", "parallel.tp", "hardware.gpus_per_node"},
             fmt::format("parallel.shard_group node needs each node to hold whole shard groups: "
                         "gpus_per_node {} / tp {} dp ranks per node must divide dp · cp {} or be a "
                         "multiple of it",
                         per_node, p.tp, replicas));
  }
}

}  // namespace lynx::model
