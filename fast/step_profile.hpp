#pragma once
/// What fast mode keeps of one pipeline step simulated alone on the event engine: its timing
/// relative to its start, the kernel activity that later communication can slow, its share of
/// the stage breakdown, FLOPs and memory.
#include "schedule/program_builder.hpp"
#include "sim/time.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace lynx::fast {

/// An interval of a GPU's timeline with a constant set of running tasks: every kernel runs at
/// rate 1 / (kernels · (1 + contention · comms)) (sim/executor.hpp).
struct Segment {
  TimePs length_ps = 0;
  std::int32_t kernels = 0;
  std::int32_t comms = 0;
};

/// The host model's view of a step (hardware.gpu.host_kernel / host_collective > 0): its tasks
/// wait for their issue by the GPU's host thread, which issues in program order and waits for
/// the GPU only at the program's host waits (docs/host.md; a micro-batch load's is composed at
/// the step's start, compose.cpp). Measured on the step made host-bound (its host starting after the
/// host-free run would have ended), times relative to the host clock when the step's first
/// task is about to be issued. The engine's timeline is max-plus in the task readiness and
/// issue times, so each time of the step is max(GPU-bound time, host clock + host-bound time)
/// (host_bound_ps).
struct HostProfile {
  bool on = false;
  TimePs cost_ps = 0;         ///< host time to issue the step's tasks (the clock advances so)
  TimePs compute_end_ps = 0, tail_end_ps = 0, end_ps = 0;
  TimePs send_issue_ps = 0;   ///< issue of its pipeline send
  TimePs dp_start_ps = 0, dp_end_ps = 0;
};

/// A step's time given both bounds: `gpu_ps` from the GPU-bound profile, `host_relative_ps`
/// from HostProfile, with the stage's host clock at `host_clock_ps`.
inline TimePs host_bound_ps(const HostProfile& h, TimePs gpu_ps, TimePs host_clock_ps, TimePs host_relative_ps) {
  return h.on ? std::max(gpu_ps, host_clock_ps + host_relative_ps) : gpu_ps;
}

/// Pipeline transfers from one stage to another (one flow per (dp, tp) rank, ranks paired as
/// exact mode's sends pair them): fast mode's foreign traffic. Where links are shared between
/// GPUs (PCIe), other stages' transfers cross a stage's links (those into it, and those through
/// its PCIe switches to a NIC or the host) and slow its collectives.
struct Channel {
  int from_stage = 0, to_stage = 0;
  std::vector<std::pair<hw_models::Rank, hw_models::Rank>> flows;  ///< (source, destination)
  std::uint64_t bytes = 0;  ///< per flow
};

/// Points of a step at which a channel's delay is measured: 0, 1/k, 2/k... (k - 1)/k of its
/// compute time (k = kChannelPhases - 1), and the last point from which a send ends with it.
inline constexpr std::size_t kChannelPhases = 5;

/// One step, measured from the start of its marker (times relative to it, in ps).
struct StepProfile {
  TimePs compute_end_ps = 0;  ///< end of its last compute-stream task
  TimePs tail_end_ps = 0;     ///< end of its compute tail (what its send waits for)
  bool sends = false;
  TimePs send_ps = 0;         ///< duration of its pipeline send
  /// Simulated after its predecessor: the duration of the predecessor's send beside this step
  /// (its collectives share the send's links); -1 when it sent nothing or ran alone.
  TimePs previous_send_ps = -1;
  bool has_dp = false;
  TimePs dp_start_ps = 0, dp_end_ps = 0;  ///< its gradient all-reduces (first start, last end)
  TimePs end_ps = 0;          ///< with the tail: end of the optimizer step
  TimePs optimizer_ps = 0;    ///< with the tail: the optimizer step's duration
  /// A pp-wait recompute issued before the marker: how long the compute stream waited for it
  /// (a step that starts later than its predecessor's tail gets that head start back).
  TimePs recompute_wait_ps = 0;
  bool pp_wait_recompute = false;
  std::vector<Segment> segments;  ///< the GPU's activity from the start to compute_end_ps

  // Breakdown shares (ps) of the first simulated GPU, as the exact mode counts them.
  TimePs compute_ps = 0, recompute_ps = 0, recompute_overlapped_ps = 0, contention_ps = 0;
  TimePs tp_exposed_ps = 0, dp_exposed_ps = 0, other_comm_ps = 0;
  double flops = 0;  ///< executed by the first simulated GPU

  /// For the lynx planners' windows (schedule/overlap_windows.hpp measures the same on an
  /// exact run): idle on TP communication in each layer's pass (index = layer of the virtual
  /// stage), and in a backward before its top layer's (the LM head's).
  std::vector<TimePs> layer_tp_idle_ps;
  TimePs head_tp_idle_ps = 0;

  std::int64_t static_bytes = 0;  ///< the stage's weights, gradients and optimizer state
  int replication = 1;            ///< GPUs the first simulated GPU stands for
  bool symmetric = false;         ///< built in the reduced (one rank per stage) form
  std::int64_t memory_peak_bytes = 0;  ///< highest usage above the level at its start (>= 0)
  std::int64_t memory_net_bytes = 0;   ///< usage change over the step
  HostProfile host;  ///< with the host model on
  /// Per channel (index into the channels measure_step got) and phase: how much later the
  /// step's last compute-stream task ends when that channel sends once, from the phase's time
  /// of the step on (channel_delay_ps[channel · kChannelPhases + phase]; 0 for a channel
  /// sharing no link with it, and for the stage's own sends). Phase k starts at
  /// channel_phase_ps[k] after the marker (k = 0: at it).
  std::vector<TimePs> channel_delay_ps;
  std::vector<TimePs> channel_phase_ps;
  /// The same runs: how much longer the channel's send took than on idle links (the step's
  /// collectives slow it in turn).
  std::vector<TimePs> channel_send_delay_ps;
  /// Per channel: its send's duration on idle links (0 for a channel the step was not measured
  /// beside).
  std::vector<TimePs> channel_idle_send_ps;
  /// With dp > 1 replicas in the program (links shared between GPUs): per replica d, its own
  /// compute end (as compute_end_ps, replica 0's), and its channel delays
  /// (replica_channel_delay_ps[(channel · kChannelPhases + phase) · dp + d]; empty also where
  /// every replica's equal replica 0's). Empty otherwise.
  std::vector<TimePs> replica_compute_end_ps;
  std::vector<TimePs> replica_channel_delay_ps;
  /// Per replica: how much longer its own send took in the step than with every replica
  /// sending at once on idle links (the step's collectives cross some replicas' paths only).
  std::vector<TimePs> replica_send_extra_ps;
};

/// Builds `part` alone, runs it on the engine (memory effects off: a backward alone frees what
/// it never allocated) and measures its step number `measured` (index into part.steps); and,
/// for each of `channels` that other stages send on and that shares a link with the step's
/// traffic or ends at its stage, the step run again beside that channel's transfers.
StepProfile measure_step(const Scenario& sc, const strategies::RecomputePlan& plan,
                         const hw_models::Topology& topo, const model::Workload& workload,
                         const schedule::StageSteps& part, std::size_t measured,
                         const std::vector<Channel>& channels = {});

/// Extra time a step takes when `externals` (communication tasks of the same GPU, [start, end)
/// relative to the step's start) run beside it: its kernels run slower while they do.
TimePs contention_delay_ps(const std::vector<Segment>& segments,
                           const std::vector<std::pair<TimePs, TimePs>>& externals,
                           double contention_factor);

}  // namespace lynx::fast
