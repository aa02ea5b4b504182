#pragma once
/// What the processes of a live run (one per node) exchange: each NCCL communicator's unique
/// id from the process that made it, the measurements to process 0, a barrier before each
/// iteration, and the abort after an error. In one process for one node (InProcessExchange),
/// over MPI for many (make_mpi_exchange; the job is joined by sweep::Ranks, the project's one
/// MPI entry point).
#include "live/bootstrap_plan.hpp"
#include "live/watchdog.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lynx::sweep {
class Ranks;
}

namespace lynx::live {

/// How long one collective of the exchange may wait for the other processes, and what it is
/// (named in the watchdog's error: "the id broadcast of communicator tp[0,1]"). limit_s 0: no
/// limit.
struct ExchangeWait {
  double limit_s = 0;
  std::string what;
};

class IdExchange {
 public:
  virtual ~IdExchange() = default;
  /// This process (its node), 0-based.
  virtual int process() const = 0;
  /// Processes of the run.
  virtual int processes() const = 0;
  /// Process `root`'s `bytes` on every process; every process passes the same size. Collective.
  /// Each collective fails (E903, naming this process, `wait.what` and the limit) when the
  /// others have not all arrived within `wait.limit_s`: the caller's error then ends the job.
  virtual void broadcast(std::vector<std::uint8_t>& bytes, int root, const ExchangeWait& wait) = 0;
  /// On process 0: every process's `bytes`, by process; elsewhere empty. Collective.
  virtual std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& bytes, const ExchangeWait& wait) = 0;
  /// Returns when every process has called it.
  virtual void barrier(const ExchangeWait& wait) = 0;
  /// Ends every process of the run after an error on this one (MPI_Abort); alone, returns.
  virtual void abort(int status) = 0;
};

/// The exchange of a run in one process (one node).
class InProcessExchange final : public IdExchange {
 public:
  int process() const override { return 0; }
  int processes() const override { return 1; }
  void broadcast(std::vector<std::uint8_t>&, int, const ExchangeWait&) override {}
  std::vector<std::vector<std::uint8_t>> gather(const std::vector<std::uint8_t>& bytes, const ExchangeWait&) override {
    return {bytes};
  }
  void barrier(const ExchangeWait&) override {}
  void abort(int) override {}
};

/// Whether this build has the MPI exchange (CMake found MPI: LYNXSIM_MPI).
bool mpi_in_build();

/// The exchange of the MPI job `ranks` joined (MPI_COMM_WORLD: MPI_Bcast, MPI_Gatherv,
/// MPI_Barrier, MPI_Abort); an InProcessExchange when it has one rank or the build has no MPI.
std::unique_ptr<IdExchange> make_exchange(const sweep::Ranks& ranks);

/// Fails on each process whose `value` is not process 0's, naming `what` and both values:
/// the processes must derive the same op stream (the simulator's event fingerprint) from the
/// same plan with the same lynxsim-live, or they would create other communicators in another
/// order and wait on each other. Collective.
void check_same_as_process0(IdExchange& exchange, std::uint64_t value, const char* what, double limit_s);

/// An NCCL unique id as bytes (NCCL_UNIQUE_ID_BYTES).
inline constexpr std::size_t kNcclIdBytes = 128;
using NcclIdBytes = std::array<std::uint8_t, kNcclIdBytes>;

/// Every communicator's id, in the plan's creation order: the group's owner calls `new_id`
/// (ncclGetUniqueId; tests pass fakes) and broadcasts it, every process takes part in every
/// broadcast (one order, no matching of senders). Entries of groups this process has no
/// member in are the owner's id too. Each broadcast waits at most `limit_s` (the
/// communicator-creation limit). Test hook (`stall` at init, watchdog.hpp): the process
/// running the stalled rank never arrives at the broadcast of that rank's stall.index-th
/// communicator; it waits there 2 x limit_s (its peers' watchdog ends the job first).
std::vector<NcclIdBytes> exchange_ids(IdExchange& exchange, const BootstrapPlan& plan,
                                      const std::function<NcclIdBytes()>& new_id, double limit_s,
                                      const TestStall& stall = {});

}  // namespace lynx::live
