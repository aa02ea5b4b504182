#pragma once
/// The CUDA backend (lynxsim-live; built with CUDA and NCCL): one host thread per GPU rank
/// enqueues its ops in program order on one CUDA stream per program stream (plus pp_recv),
/// cross-stream dependencies as CUDA events, cuBLAS bf16 GEMMs of the planned shapes, the
/// project's kernels on random data, activations from the stream-ordered pool
/// (cudaMallocAsync / cudaFreeAsync), NCCL collectives per communicator and send/recv per
/// directed rank pair; every op timed with CUDA events. Over several nodes, one process per
/// node runs that node's ranks; the communicators are created in the bootstrap plan's order
/// (ids from their owners through the IdExchange, ncclCommInitRank per local member). No device-wide synchronisation: the
/// end of an iteration is polled per stream with NCCL's async error check and a timeout.
#include "live/backend.hpp"
#include "live/id_exchange.hpp"

#include <memory>

namespace lynx::live {

struct CudaOptions {
  double timeout_s = 120;  ///< a stream not done this long after its last op was enqueued fails
  /// The processes of the run, one per node (null: this one alone, a one-node plan). This
  /// process runs the ranks live/bootstrap_plan.hpp gives its node; run_iteration returns
  /// every rank's measurements on process 0.
  IdExchange* exchange = nullptr;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaOptions options);
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  std::string device() const override;
  /// Refuses up front, with numbers, a stream needing more GPUs or memory than visible; then
  /// checks every kernel once against its CPU reference at small sizes.
  void prepare(const OpStream& ops) override;
  Measured run_iteration(const OpStream& ops) override;

 private:
  struct State;
  CudaOptions options_;
  std::unique_ptr<State> state_;
};

/// Runs each project kernel on random data at small sizes on the current device and compares
/// its output with the CPU reference (live/cpu_reference.hpp); throws lynx::Error on a mismatch.
void check_kernels_against_cpu();

}  // namespace lynx::live
