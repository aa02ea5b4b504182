#pragma once
/// Compute-while-communicating: a burst of square bf16 GEMMs alone, a burst of communication
/// alone, and both at once on two streams of the same GPU(s). With >= 2 GPUs the
/// communication is an NCCL all-reduce over all of them and GEMMs run on every GPU (scope
/// "intra"); with one GPU a copy kernel on settings.standin_blocks SMs stands in for NCCL
/// (scope "standin"). Rows: contention gemm_alone / gemm_concurrent (time per GEMM) and
/// comm_alone / comm_concurrent (time per operation), m = n = k = GEMM size, bytes = the
/// communication payload.
#include "calibrate/bench_context.hpp"

namespace lynx::calibrate {

void bench_contention(const BenchContext& ctx, int gpus);

}  // namespace lynx::calibrate
