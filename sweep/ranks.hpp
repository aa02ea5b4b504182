#pragma once
/// The processes of a sweep: one, or the ranks of an MPI job when lynxsim was built with MPI
/// and started by an MPI launcher (mpirun, srun). Only the calling thread talks MPI
/// (MPI_THREAD_FUNNELED); the worker threads never do.
#include "sweep/point_outcome.hpp"

#include <cstdint>
#include <vector>

namespace lynx::sweep {

/// The number of processes a launcher started, from the environment (Open MPI's mpirun, PMI,
/// PMIx, srun's step size); 0 when no launcher started this process.
int launcher_size();

class Ranks {
 public:
  /// Joins the MPI job if there is one (MPI_Init_thread), else is a single rank. Throws
  /// lynx::Error when a launcher started several processes of a lynxsim built without MPI
  /// (each would run the whole sweep and write the same file).
  Ranks();
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;
  /// MPI_Finalize, when this object called MPI_Init.
  ~Ranks();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  /// Ranks on this machine (so each can take its share of the cores).
  int ranks_on_node() const { return ranks_on_node_; }

  /// Rank 0's `words` on every rank (collective).
  void broadcast(std::vector<std::uint64_t>& words) const;
  /// Sends point `index`'s outcome to rank 0 (messages from one rank arrive in order).
  void send_to_root(std::uint64_t index, const PointOutcome& outcome) const;
  /// On rank 0: the next outcome rank `from` sent, which must be point `index`'s.
  PointOutcome receive(int from, std::uint64_t index) const;
  /// Ends every rank of the job after an error on this one (MPI_Abort); a single rank returns.
  void abort_job(int status) const;

  /// Whether this lynxsim was built with MPI.
  static bool built_with_mpi();

 private:
  int rank_ = 0;
  int size_ = 1;
  int ranks_on_node_ = 1;
  bool initialized_here_ = false;
};

}  // namespace lynx::sweep
