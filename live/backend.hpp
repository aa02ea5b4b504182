#pragma once
/// The executor behind live mode: one interface, a host backend (CI, no GPU) and a CUDA backend
/// (lynxsim-live, built with CUDA and NCCL). A backend runs whole iterations of an op stream:
/// every op after its dependencies and after the previous op of its (rank, stream), its
/// allocations at its start and frees at its end, collectives of one communicator together.
#include "live/op_stream.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace lynx::live {

/// What one executed iteration measured.
struct Measured {
  std::vector<double> op_start_s;  ///< per op (OpStream::ops), since the iteration started
  std::vector<double> op_end_s;
  /// Per op: position of its start and of its end in one global order of starts and ends the
  /// backend observed (host backend; empty otherwise) — dependency checks without clocks.
  std::vector<std::int64_t> op_start_seq, op_end_seq;
  double iteration_s = 0;                   ///< first start to last end
  std::vector<std::int64_t> peak_bytes;     ///< per rank, from the allocator, static included
  /// Per rank: (seconds, bytes in use) after every allocation and free.
  std::vector<std::vector<std::pair<double, std::int64_t>>> memory_timeline;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// "host" or "cuda".
  virtual std::string name() const = 0;
  /// What it runs on, for reports and CSV metadata ("NVIDIA H200", "host (8 threads)").
  virtual std::string device() const = 0;
  /// Once before the iterations: checks the stream fits (GPUs, memory; refused with numbers),
  /// creates streams, communicators and work buffers, checks kernels against references.
  virtual void prepare(const OpStream& ops) = 0;
  /// Runs one iteration of `ops` (as given to prepare).
  virtual Measured run_iteration(const OpStream& ops) = 0;
};

}  // namespace lynx::live
