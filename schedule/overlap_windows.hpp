#pragma once
/// Overlap windows, computed from a simulated schedule: the stretches in which a GPU's compute
/// stream sits idle while communication it waits for is in flight. They size what an
/// overlapped recompute can hide (lynx planners) and are drawn on the trace.
#include "sim/executor.hpp"
#include "sim/full_program.hpp"
#include "schedule/program_builder.hpp"
#include "sim/window_cost.hpp"

#include <functional>
#include <vector>

namespace lynx::schedule {

/// Idle time on one GPU's compute stream before `next_task` started.
struct IdleGap {
  TimePs start_ps = 0;
  TimePs end_ps = 0;
  sim::TaskId next_task = -1;
  /// The dependency of next_task that finished last (what the stream waited for), -1 if none.
  sim::TaskId gate = -1;
  /// The part of the gap during which communication the stream waited for was in flight (rule
  /// at compute_stream_gaps); the rest is bubble.
  TimePs comm_in_flight_ps = 0;
  /// comm_in_flight_ps by the category of what was in flight; tp_comm_ps: TP collectives and
  /// context parallelism's ring-attention transfers (sim::Category::kCpComm), the communication
  /// inside a layer's pass; other_comm_ps: the collectives of an on-demand recompute
  /// (sim::Category::kRecompute).
  TimePs tp_comm_ps = 0, pp_comm_ps = 0, dp_comm_ps = 0, other_comm_ps = 0;
};

/// Every idle gap of every GPU's compute stream (index = GPU), in time order; the tail after a
/// GPU's last task up to the makespan is a final gap with next_task = -1.
/// Communication of a gap: the communication tasks next_task depends on and, walking back, the
/// communication tasks queued before each on its stream (the earlier phases of a hierarchical
/// collective, earlier gradient buckets) and those a task of the idle GPU depends on (a
/// collective issued after another), as long as they were still in flight after the gap
/// began. Every instant of the gap during which one of them was in flight counts once, for the
/// category of the earliest-started one. Other GPUs' dependencies are not followed: waiting
/// for another pipeline stage is bubble, except the transfer itself.
std::vector<std::vector<IdleGap>> compute_stream_gaps(const sim::Program& program,
                                                      const sim::ExecResult& exec, size_t gpus);
/// The same over a compressed program's full program (task ids of the full program).
std::vector<std::vector<IdleGap>> compute_stream_gaps(const sim::FullProgram& program,
                                                      const sim::ExecResult& exec, size_t gpus);

/// The gaps compute_stream_gaps lists, visited instead: each GPU's in time order (GPUs in
/// task-id order, the tails after all of them).
void for_each_stream_gap(const sim::FullProgram& program, const sim::ExecResult& exec, size_t gpus,
                         const std::function<void(size_t gpu, const IdleGap& gap)>& visit);

/// Window capacity (ps) each layer's overlapped recompute can use, per virtual stage:
/// capacity[vs][i] for the i-th layer of virtual stage vs — the median over micro-batches of
/// the idle time on TP communication (IdleGap::tp_comm_ps) in the backward of the layer above
/// (for the top layer: the idle wait before its backward step, plus that idle in the LM head
/// on the last stage).
std::vector<std::vector<TimePs>> measure_window_capacity(const BuiltProgram& built,
                                                         const sim::ExecResult& exec);

/// Forward-window capacity per virtual stage: the median over layers and micro-batches of the
/// idle time on TP communication in one layer's forward pass.
std::vector<TimePs> measure_forward_window_capacity(const BuiltProgram& built,
                                                   const sim::ExecResult& exec);

/// The timelines of the windows the planners use, per virtual stage (sim::window_cost_ps
/// prices an overlapped recompute in them).
struct WindowProfiles {
  sim::WindowProfile inner;    ///< an inner layer's (the layer above's backward)
  sim::WindowProfile top;      ///< the top layer's (pipeline wait; LM head on the last stage)
  sim::WindowProfile forward;  ///< a layer's forward window
};

/// Per virtual stage, the window timelines of the baseline samples measure_window_capacity and
/// measure_forward_window_capacity take their medians from: per layer the upper-median
/// micro-batch, of the inner layers the upper-median layer (the top layer's when alone), and of
/// every layer's forward the upper-median sample. A timeline starts where the program builder
/// issues the recompute (the end of the compute-stream task before the first one that waits on
/// a communication task; for the top layer below the last stage, the end of the previous
/// step's compute) and ends where the consumer starts.
std::vector<WindowProfiles> measure_window_profiles(const BuiltProgram& built,
                                                    const sim::ExecResult& exec);

/// The windows as trace annotations ("tp window", "pp window", named by the gap's gate) for
/// every simulated GPU: the last comm_in_flight_ps of each gap.
std::vector<sim::TraceSpan> window_annotations(const BuiltProgram& built, const sim::ExecResult& exec);

}  // namespace lynx::schedule
