#pragma once
/// The host backend: runs an op stream on CPU threads, one per (rank, stream), with real host
/// buffers for every activation the plan allocates (scaled by size_scale) and a memory pass
/// over a scaled work buffer per op. Its times measure the host, not a GPU; what it proves is
/// the execution order (every dependency honoured, rendezvous and transfers matched) and the
/// allocator's peak. In simulator order it replays the simulator's event order instead, on one
/// thread, and its allocator peak equals the simulator's tracked peak exactly.
#include "live/backend.hpp"
#include "live/watchdog.hpp"

namespace lynx::live {

struct HostOptions {
  /// Host bytes allocated (and touched) per planned byte; the allocator still counts the
  /// planned bytes. 1/4096 keeps a GPT-1.3B iteration under a few hundred MiB of host memory.
  double size_scale = 1.0 / 4096;
  /// Replay the simulator's start/end order (OpStream::sim.exec.event_order) on one thread.
  bool simulator_order = false;
  /// A collective or receive waiting longer than limits.op_s for its peers, or any op not
  /// done limits.iteration_s after the iteration started, fails the run (E903, naming the
  /// rank, the op, its communicator and the ranks that never arrived).
  WatchdogLimits limits;
  TestStall stall;  ///< test hook: a rank that never arrives at one of its communication ops
};

class HostBackend final : public Backend {
 public:
  explicit HostBackend(HostOptions options = {}) : options_(options) {}
  std::string name() const override { return "host"; }
  std::string device() const override;
  void prepare(const OpStream& ops) override;
  Measured run_iteration(const OpStream& ops) override;

 private:
  Measured run_threads(const OpStream& ops);
  Measured run_simulator_order(const OpStream& ops);
  HostOptions options_;
};

}  // namespace lynx::live
