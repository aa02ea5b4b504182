#pragma once
/// The CUDA backend (lynxsim-live; built with CUDA and NCCL): one host thread per GPU rank
/// enqueues its ops in program order on one CUDA stream per program stream (plus pp_recv),
/// cross-stream dependencies as CUDA events, cuBLAS bf16 GEMMs of the planned shapes, the
/// project's kernels on random data, activations from the stream-ordered pool
/// (cudaMallocAsync / cudaFreeAsync), NCCL collectives per communicator and send/recv per
/// directed rank pair; every op timed with CUDA events. Over several nodes, one process per
/// node runs that node's ranks; the communicators are created in the bootstrap plan's order
/// (ids from their owners through the IdExchange, nonblocking ncclCommInitRankConfig per local
/// member). No device-wide synchronisation: every op's start and end events are polled, with
/// NCCL's async error check and the watchdog's limits (watchdog.hpp).
#include "common/clock.hpp"
#include "live/backend.hpp"
#include "live/id_exchange.hpp"
#include "live/watchdog.hpp"

#include <memory>

namespace lynx::live {

struct CudaOptions {
  /// Communicator creation (nonblocking NCCL init, polled), each collective, send and receive
  /// (from its start event to its end event) and the iteration have these limits: on expiry
  /// every NCCL communicator of the process is aborted (ncclCommAbort) and the run fails with
  /// the rank, the op and the communicator (E903); over several nodes the error ends the job.
  WatchdogLimits limits;
  TestStall stall;  ///< test hook: the rank skips its stalled op (its peers then wait on it)
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
  /// Polls every op of this process's ranks until all have ended, with NCCL's async errors and
  /// the watchdog's limits (a communication op from its start event on, the iteration from
  /// `started`); on a failure aborts every communicator and throws.
  void watch_iteration(const OpStream& ops, WallClock::time_point started);
  struct State;
  CudaOptions options_;
  std::unique_ptr<State> state_;
};

/// Runs each project kernel on random data at small sizes on the current device and compares
/// its output with the CPU reference (live/cpu_reference.hpp); throws lynx::Error on a mismatch.
void check_kernels_against_cpu();

}  // namespace lynx::live
