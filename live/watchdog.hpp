#pragma once
/// Live mode's watchdog: the time limits of a run (communicator creation, each collective or
/// point-to-point op, the whole iteration), the one error line every backend gives when one
/// expires (naming the rank, the op and its communicator), and the test hook that makes a
/// rank never arrive. Backends check the limits where they wait; this file only says what
/// the limits are and how an expiry reads, so the host and CUDA backends word it alike.
#include "live/op_stream.hpp"

#include <string>

namespace lynx::live {

/// Seconds before a wait is given up (`--timeout-comm-init`, `--timeout-op`,
/// `--timeout-iteration`; `--timeout` sets all three).
struct WatchdogLimits {
  /// Creating every communicator of a process (CUDA: NCCL's nonblocking init; with several
  /// processes: each id broadcast). NCCL's first init on a node can take seconds.
  double comm_init_s = 120;
  /// One collective, send or receive: from the op's start (a rank arrived) to its end.
  double op_s = 60;
  /// One iteration, from its start to every op's end (a stuck compute op, a stuck dependency),
  /// and each process's barrier before it.
  double iteration_s = 600;
};

/// Test hook (docs/live.md): rank `rank` never arrives at its `index`-th communication op
/// (0-based, collectives, sends and receives in its issue order) or, for `at_init`, at the
/// creation of its `index`-th communicator. It waits there until the run is aborted.
struct TestStall {
  bool enabled = false;
  bool at_init = false;
  int rank = -1;
  int index = -1;
};

/// The stall the environment variable LYNXSIM_LIVE_TEST_STALL asks for: "op:RANK:K" or
/// "init:RANK:K"; unset or empty: none. Anything else fails (E802) naming the variable.
TestStall test_stall_from_env();

/// The op `stall` stalls (op:RANK:K): the rank's K-th communication op in its issue order; -1
/// for none (no stall, an init stall, or a rank or K the stream does not have).
int stalled_op(const OpStream& ops, const TestStall& stall);

/// Whether op `i` communicates with another rank (collective, send, receive).
bool is_communication(const LiveOp& op);

/// The communicator op `i` waits on, as its group and member ranks: "tp[2,3]", "dp[0,4]",
/// "pp 0->4" for a pipeline transfer (live/bootstrap_plan.hpp's names); a later phase or rendezvous of a collective without a
/// communicator of its own is named by its stream and the ranks of its simulator group.
std::string communicator_label(const OpStream& ops, std::size_t i);

/// The one error line of an expired limit: "live: watchdog: rank R (NAME) <what> in op
/// 'LABEL' on communicator C; <detail>". `what` says which limit ("waited 0.5 s (--timeout-op)").
std::string watchdog_message(const OpStream& ops, std::size_t i, const std::string& what, const std::string& detail);

/// The same for communicator creation: "live: watchdog: rank R (NAME) <what> creating
/// communicator C; <detail>".
std::string watchdog_comm_init_message(const OpStream& ops, int rank, const std::string& communicator, const std::string& what,
                                       const std::string& detail);

}  // namespace lynx::live
