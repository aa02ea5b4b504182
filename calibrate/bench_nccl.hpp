#pragma once
/// NCCL benchmark sections: all-reduce, all-gather, reduce-scatter and send/recv over message
/// sizes settings.nccl_min_bytes .. nccl_max_bytes, within one node (one process driving every
/// visible GPU through ncclCommInitAll) or, with MPI, across nodes (one process per GPU,
/// nccl-tests style: ncclGetUniqueId on rank 0, MPI_Bcast, ncclCommInitRank).
#include "calibrate/bench_context.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lynx::calibrate {

/// The collectives measured, in order: all_reduce, all_gather, reduce_scatter, send_recv.
const std::vector<std::string>& nccl_collective_names();

/// Message sizes min, min·step, ... <= max.
std::vector<std::uint64_t> nccl_sizes(const BenchSettings& settings);

/// One process, GPUs 0 .. gpus−1 of this node. With one GPU the collectives are trivial
/// (NCCL copies locally) and send/recv goes to itself; rows say ranks = 1.
void bench_nccl_single_process(const BenchContext& ctx, int gpus);

#ifdef LYNXSIM_CALIBRATE_WITH_MPI
/// One MPI rank per GPU (local rank -> device). Rank 0 writes the rows (ctx.csv may be null on
/// the others); nodes are counted from MPI's shared-memory split, scope "inter" if > 1.
/// MPI must be initialised by the caller.
void bench_nccl_mpi(const BenchContext& ctx);
#endif

}  // namespace lynx::calibrate
