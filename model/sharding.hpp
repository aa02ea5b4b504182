#pragma once
/// Sharded data parallelism (parallel.sharding, parallel.shard_group): the level in effect, the
/// shard groups and replica groups of the dp ranks, and the static bytes per parameter each
/// level keeps. Read by the memory formula, the program builder and fast mode alike.
#include "scenarios/key_origins.hpp"
#include "scenarios/scenario.hpp"

#include <vector>

namespace lynx::model {

/// The sharding level in effect: parallel.sharding, raised to optimizer by
/// parallel.distributed_optimizer (its alias).
inline Sharding sharding_level(const ParallelSpec& p) {
  return p.distributed_optimizer && p.sharding < Sharding::kOptimizer ? Sharding::kOptimizer : p.sharding;
}

/// dp ranks (dp · cp with context parallelism: grad_replicas) of one shard group: 1 with sharding
/// none; all of them with shard_group dp; with shard_group node those of one node (gpus_per_node / tp). check_sharding has checked
/// that the groups tile dp.
int shard_group_size(const ParallelSpec& p, int gpus_per_node);

/// Shard groups (replicated copies of the shards) along dp · cp: grad_replicas / shard_group_size.
inline int shard_replicas(const ParallelSpec& p, int gpus_per_node) {
  return grad_replicas(p) / shard_group_size(p, gpus_per_node);
}

/// dp indices of the shard group of dp index `dp_rank` (consecutive indices), and of its
/// replica group (the same position in every shard group).
std::vector<int> shard_group_of(const ParallelSpec& p, int gpus_per_node, int dp_rank);
std::vector<int> replica_group_of(const ParallelSpec& p, int gpus_per_node, int dp_rank);

/// Static bytes per parameter (16-bit weight, gradient of grad_bytes_per_param, 12 bytes of
/// fp32 Adam state: main weight, momentum, variance) with the shard group of `shard` ranks:
/// none 2 + g + 12; optimizer 2 + g + 12/shard (Megatron-LM's distributed-optimizer
/// documentation, "bf16 param, fp32 grads": 6 + 12/d); gradients 2 + (g + 12)/shard; full
/// (2 + g + 12)/shard (ZeRO, Rajbhandari et al. 2020, Sec. 5 / Fig. 1: P_os, P_os+g,
/// P_os+g+p). Transient buffers (gathered parameters, unsharded gradients) are the engine's.
double static_bytes_per_param(const ParallelSpec& p, int shard);

/// Whether gradients are reduce-scattered after every micro-batch's backward (ZeRO-2 / ZeRO-3:
/// their unsharded gradients are not kept across micro-batches), not only after the last.
inline bool reduces_every_micro_batch(const ParallelSpec& p) { return sharding_level(p) >= Sharding::kGradients; }

/// Rejects sharding settings the simulator cannot model, naming the key at fault (file:line):
/// shard_group node without sharding, or whose node groups do not tile dp; full sharding with
/// zb-h1 or dp_overlap end; gradients sharding with dp_overlap end; overlap_param_gather with
/// full sharding or without sharding.
void check_sharding(const Scenario& s, const KeyOrigins& origins);

}  // namespace lynx::model
