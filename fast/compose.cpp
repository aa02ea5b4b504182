#include "fast/compose.hpp"

#include "common/error.hpp"
#include "common/statistics.hpp"
#include "hw_models/collectives.hpp"
#include "model/sharding.hpp"
#include "schedule/program_builder.hpp"
#include "schedule/pipeline_schedule.hpp"
#include "sim/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

namespace lynx::fast {
namespace {

using Interval = std::pair<TimePs, TimePs>;

/// An input transfer: when it arrived, and since when the sender's pp stream was busy with
/// the queue of sends ending with it (what exact mode counts as pp exposure of a wait).
struct Arrival {
  TimePs at_ps = -1;
  TimePs queue_start_ps = 0;
  TimePs posted_ps = -1;  ///< blocking exchanges: when the receiver posted the exchange receiving it
};

/// Blocking exchanges: a send queued for the stage's next exchange (its transfer slot).
struct QueuedSend {
  bool forward = true;
  std::size_t slot = 0;
  TimePs send_ps = 0;  ///< on idle links, from the step's profile
  int channel = -1;
  std::size_t step = 0;  ///< index of the sending step in the stage's order (for the timeline)
  bool timed = false;
};

/// What one stage carries from step to step while the schedule is composed.
struct StageState {
  std::size_t next = 0;
  TimePs compute_free_ps = 0;  ///< end of the previous step's last compute-stream task
  TimePs tail_end_ps = 0;      ///< end of the previous step's compute tail
  bool previous_had_dp = false;  ///< the previous step issued gradient all-reduces
  bool previous_sent = false;    ///< the previous step sent (its send is last_send)
  TimePs previous_send_alone_ps = 0;  ///< that send's duration in its own profile
  TimePs pp_free_ps = 0, pp_queue_start_ps = 0;
  Interval last_send{0, 0};
  std::vector<Interval> sends, dp;  ///< communication of this stage's GPU, in issue order
  std::size_t live_send = 0, live_dp = 0;  ///< before these, everything ended before the step
  TimePs dp_free_ps = 0;
  TimePs end_ps = 0;
  TimePs grads_reduced_ps = 0;  ///< after the last step: when its optimizer step could start
  TimePs optimizer_ps = 0;      ///< the optimizer step's duration
  std::int64_t level_bytes = 0;
  FastStage out;
  TimePs other_comm_ps = 0;
  TimePs host_ps = 0;  ///< host model: the stage's host clock (issue of its last task so far)
  // Blocking exchanges (Builder::emit_exchange): the exchange the stage is in, posted at
  // posted_ps, with the sends of its steps since the last one and the inputs it receives.
  bool exchanging = false;
  TimePs posted_ps = 0;
  std::vector<QueuedSend> queued_sends;
  std::vector<std::pair<bool, std::size_t>> receives;  ///< (forward transfer, slot)
  bool optimizer_after_exchange = false;  ///< the last step's exchange gates the optimizer step
};

TimePs overlap(Interval a, Interval b) {
  return std::max<TimePs>(0, std::min(a.second, b.second) - std::max(a.first, b.first));
}

bool has_forward_windows(const strategies::StagePlan& sp) {
  return std::any_of(sp.layers.begin(), sp.layers.end(), [](const strategies::LayerDecision& d) {
    return d.overlapped() && d.window == strategies::Window::kFwdTpComm;
  });
}

/// What one send of channel `c` (the step's profile `pr`, starting at `start`) costs, from
/// `per_phase` (the profile's channel_delay_ps or channel_send_delay_ps): they were measured
/// for one send starting at each phase of the step. A send starting within the step costs that
/// interpolated between the phases around its start (down to nothing at the step's compute
/// end); one that started before the step costs the first phase's times the share of it that
/// overlaps the step. Per replica (`replica` of `replicas`, the profile's
/// replica_channel_delay_ps): the same from that replica's delays. `step_delay`: `per_phase`
/// is the step's delay (not the send's), and past the last phase it saturates (below).
double phase_delay(const StepProfile& pr, const std::vector<TimePs>& per_phase, size_t c, TimePs start, Interval send,
                   bool step_delay, size_t replicas = 1, size_t replica = 0) {
  const Interval step{start, start + pr.compute_end_ps};
  const TimePs shared = overlap(step, send);
  if (shared == 0 || per_phase.empty()) return 0;
  const auto delays = [&](std::size_t k) { return per_phase[(c * kChannelPhases + k) * replicas + replica]; };
  const TimePs offset = send.first - start;
  if (offset < 0) return static_cast<double>(delays(0)) * static_cast<double>(shared) / static_cast<double>(send.second - send.first);
  std::size_t k = 0;
  while (k + 1 < kChannelPhases && pr.channel_phase_ps[k + 1] <= offset) ++k;
  const TimePs from = pr.channel_phase_ps[k];
  const TimePs to = k + 1 < kChannelPhases ? pr.channel_phase_ps[k + 1] : pr.compute_end_ps;
  // Past the last phase (from which the send was measured ending with the step's compute on
  // idle links) the step's work left, w, shrinks to nothing at its compute end. While the send
  // runs (L long in that measurement: on idle links plus what the step added to it) the step
  // progresses at some rate r: if it cannot finish its w_last within the send (w_last + delay >
  // L: it ended after the send), the last phase's delay is L · (1 - r), so r = 1 - delay / L; a
  // send starting later, with w left, delays the step by w · (1 - r) / r until that reaches the
  // same delay (the step then ends after the send again). On PCIe a TP all-reduce sharing its
  // switch uplinks with a send runs at about a quarter of its rate (exact mode's traces,
  // gpt-13b tp8 pp2: a send reaching a step 1 ms before its end delays it 2.5 ms, the step ends
  // with the send), which the interpolation down to nothing at the end (below) charged 0.3 ms.
  // A step that ended within the measured send keeps its rate to its end: the delay falls in
  // proportion to w, which is the interpolation. (BENCHMARKS.md, "Fast mode: agreement with exact mode".)
  if (step_delay && k + 1 == kChannelPhases && c < pr.channel_idle_send_ps.size()) {
    const double w_last = static_cast<double>(to - from), w = static_cast<double>(to - offset);
    const double last = static_cast<double>(delays(k));
    const double length = static_cast<double>(pr.channel_idle_send_ps[c] + pr.channel_send_delay_ps[c * kChannelPhases + k]);
    if (last > 0 && w_last > 0 && length > 0 && w_last + last > length) {
      const double rate = 1 - last / length;
      return rate <= 0 ? last : std::min(last, w * (1 - rate) / rate);
    }
  }
  const double next = k + 1 < kChannelPhases ? static_cast<double>(delays(k + 1)) : 0.0;
  const double w = to > from ? static_cast<double>(offset - from) / static_cast<double>(to - from) : 0.0;
  return (1 - w) * static_cast<double>(delays(k)) + w * next;
}

/// The delay other stages' sends (`sends`, per channel, in start order) add to a step of
/// profile `pr` starting at `start`; with `replicas` > 1, to replica `replica`'s step.
TimePs delay_of_channels(const StepProfile& pr, TimePs start, const std::vector<std::vector<Interval>>& sends,
                         size_t replicas = 1, size_t replica = 0) {
  const std::vector<TimePs>& per_phase = replicas > 1 ? pr.replica_channel_delay_ps : pr.channel_delay_ps;
  double delay = 0;
  for (size_t c = 0; c < sends.size() && !per_phase.empty(); ++c)
    for (const Interval& send : sends[c]) {
      if (send.first >= start + pr.compute_end_ps) break;
      delay += phase_delay(pr, per_phase, c, start, send, true, replicas, replica);
    }
  return static_cast<TimePs>(std::llround(delay));
}

/// Time of the tied-embedding gradient all-reduces of every embedding group (one per (dp, tp)
/// rank), run together as exact mode runs them: each group's two members reach it at about
/// the same time, once their stage has reduced its gradients. With links private to each GPU
/// the groups share no link, so it is the collective model's time on idle links; otherwise
/// (PCIe: the groups' flows cross the same switch uplinks, host and NICs) the groups' phases
/// run on the engine over the topology's links, each phase a rendezvous of its two members.
TimePs tied_embedding_allreduce_ps(const Scenario& sc, const model::Workload& workload, const hw_models::Topology& topo,
                                   bool links_private) {
  const ParallelSpec& p = sc.parallel;
  const std::uint64_t bytes = schedule::tied_embedding_grad_bytes(p, workload);
  const auto phases_of = [&](int dp_rank, int tp_rank) {
    return hw_models::plan_collective(topo, sc.hardware, hw_models::Collective::kAllReduce, hw_models::Algorithm::kRing,
                                      schedule::embedding_group_ranks(p, dp_rank, tp_rank), bytes);
  };
  if (links_private) return hw_models::idle_collective_time_ps(topo, phases_of(0, 0));
  sim::Machine machine;
  machine.links = topo.links();
  sim::Program prog;
  prog.names = {"embedding_grad_allreduce"};
  std::int32_t group = 0;
  for (int d = 0; d < grad_replicas(p); ++d)
    for (int t = 0; t < p.tp; ++t) {
      const auto ranks = schedule::embedding_group_ranks(p, d, t);
      const auto phases = phases_of(d, t);
      for (size_t member = 0; member < ranks.size(); ++member) {
        const auto gpu = static_cast<sim::GpuId>(machine.gpus.size());
        machine.gpus.push_back({fmt::format("rank{}", ranks[member]), {"dp"}, 0, 0.0});
        // The phases of one member follow each other on its stream.
        hw_models::append_member_tasks(prog, topo, phases, ranks[member], gpu, group, sim::Category::kDpComm);
      }
      group += static_cast<std::int32_t>(phases.size());
    }
  return sim::execute(machine, prog).makespan_ps;
}

/// The tied-embedding gradient all-reduce between the first and last stage, as exact mode
/// runs it (schedule/program_builder.cpp): it starts once both stages have reduced their
/// gradients, and the optimizer step of both follows it.
void couple_tied_embedding(const Scenario& sc, const model::Workload& workload, const hw_models::Topology& topo,
                           bool links_private, StageState& first, StageState& last) {
  const TimePs allreduce_ps = tied_embedding_allreduce_ps(sc, workload, topo, links_private);
  const TimePs reduced_ps = std::max(first.grads_reduced_ps, last.grads_reduced_ps) + allreduce_ps;
  for (StageState* g : {&first, &last}) {
    g->end_ps = std::max(g->end_ps, reduced_ps + g->optimizer_ps);
    g->out.dp_exposed_ps += allreduce_ps;  // the compute stream waits for it
  }
}

/// One step of the composed timeline (the second pass), as replica_drift_ps replays it.
struct ComposedStep {
  TimePs start_ps = 0, compute_end_ps = 0, tail_end_ps = 0;
  int channel = -1;            ///< its send's channel (-1: it sends nothing)
  int input_stage = -1, input_step = -1;  ///< the step whose send it waits for (-1: none)
  /// Per replica: how much longer its step takes than replica 0's (the one composed), from
  /// the profile's per-replica compute ends and channel delays.
  std::vector<TimePs> replica_extra_ps;
  /// Per replica: what the step's own traffic added to its send (StepProfile).
  std::vector<TimePs> replica_send_extra_ps;
};

/// The data-parallel replicas of a stage are independent pipelines that share links. The
/// composition follows one replica and its profiles measure each send with every replica's
/// flows starting together, as if the replicas stayed in lockstep; in exact mode they drift
/// apart where their paths differ (on PCIe nodes some cross the host, others reach their NIC
/// directly), and once apart their sends through a shared link (a NIC, a switch uplink)
/// overlap less and take less time. This replays the composed steps on the engine over the
/// topology, one GPU per (stage, replica): each step a kernel of its composed length (its send
/// starting at its tail), each send its replica's flows on the real links; once with the
/// replicas free and once in lockstep (one GPU per stage, each send carrying every replica's
/// flows: they start together and the send ends with the last, as the profiles time it). Free, each
/// replica's steps also take their own time (ComposedStep::replica_extra_ps: cross traffic
/// slows replicas whose paths it shares, and the slowest replica sets the end); in lockstep
/// all take replica 0's, as the composition. Returns, per stage, how much earlier (< 0) or
/// later its replicas' last step ends when free.
std::vector<TimePs> replica_drift_ps(const ParallelSpec& p, const hw_models::Topology& topo,
                                     const std::vector<Channel>& channels,
                                     const std::vector<std::vector<ComposedStep>>& steps) {
  enum : sim::StreamId { kStep = 0, kSend = 1, kTail = 2 };
  // Task ids: per stage, a block per simulated replica; per step its compute until the tail,
  // the rest of it (or the wait from its compute end to its tail), and its send.
  std::vector<std::vector<sim::TaskId>> offset(steps.size());
  std::vector<sim::TaskId> block(steps.size(), 0);
  for (size_t s = 0; s < steps.size(); ++s)
    for (const ComposedStep& st : steps[s]) {
      offset[s].push_back(block[s]);
      block[s] += st.channel >= 0 ? 3 : 2;
    }
  const auto run = [&](bool lockstep) {
    const int replicas = lockstep ? 1 : grad_replicas(p);
    std::vector<sim::TaskId> stage_base(steps.size() + 1, 0);
    for (size_t s = 0; s < steps.size(); ++s) stage_base[s + 1] = stage_base[s] + block[s] * replicas;
    const auto id = [&](int s, int d, int i) {
      return stage_base[static_cast<size_t>(s)] + d * block[static_cast<size_t>(s)] +
             offset[static_cast<size_t>(s)][static_cast<size_t>(i)];
    };
    sim::Machine machine;
    machine.links = topo.links();
    sim::Program prog;
    prog.names = {"step", "send"};
    prog.tasks.reserve(static_cast<size_t>(stage_base.back()));
    for (size_t s = 0; s < steps.size(); ++s)
      for (int d = 0; d < replicas; ++d) {
        const auto gpu = static_cast<sim::GpuId>(machine.gpus.size());
        machine.gpus.push_back({fmt::format("stage{}.dp{}", s, d), {"step", "send", "tail"}, 0, 0.0});
        for (size_t i = 0; i < steps[s].size(); ++i) {
          const ComposedStep& st = steps[s][i];
          const TimePs extra_ps = lockstep || st.replica_extra_ps.empty() ? 0 : st.replica_extra_ps[static_cast<size_t>(d)];
          const TimePs compute_ps = std::max<TimePs>(0, st.compute_end_ps - st.start_ps + extra_ps);
          const TimePs tail_ps = std::max<TimePs>(0, st.tail_end_ps - st.start_ps + extra_ps);
          const auto task = [&](sim::TaskKind kind, sim::StreamId stream, TimePs work_ps) -> sim::Task& {
            sim::Task& t = prog.tasks.emplace_back();
            t.kind = work_ps > 0 || kind == sim::TaskKind::kComm ? kind : sim::TaskKind::kMarker;
            t.category = kind == sim::TaskKind::kComm ? sim::Category::kPpComm : sim::Category::kCompute;
            t.gpu = gpu;
            t.stream = stream;
            t.work_ps = std::max<TimePs>(0, work_ps);
            t.first_dep = static_cast<std::uint32_t>(prog.deps.size());
            t.first_flow = static_cast<std::uint32_t>(prog.flows.size());
            return t;
          };
          sim::Task& head = task(sim::TaskKind::kKernel, kStep, std::min(compute_ps, tail_ps));
          if (st.input_stage >= 0 && steps[static_cast<size_t>(st.input_stage)][static_cast<size_t>(st.input_step)].channel >= 0) {
            prog.deps.push_back(id(st.input_stage, d, st.input_step) + 2);
            head.num_deps = 1;
          }
          const auto head_id = static_cast<sim::TaskId>(prog.tasks.size() - 1);
          if (tail_ps > compute_ps) {  // its send waits past its compute end
            sim::Task& wait = task(sim::TaskKind::kComm, kTail, tail_ps - compute_ps);
            prog.deps.push_back(head_id);
            wait.num_deps = 1;
          } else {
            task(sim::TaskKind::kKernel, kStep, compute_ps - tail_ps);
          }
          if (st.channel < 0) continue;
          const auto tail_id = static_cast<sim::TaskId>(tail_ps > compute_ps ? prog.tasks.size() - 1 : head_id);
          const auto& send_extra = st.replica_send_extra_ps;
          sim::Task& send = task(sim::TaskKind::kComm, kSend,
                                 send_extra.empty() ? 0 : send_extra[lockstep ? 0 : static_cast<size_t>(d)]);
          prog.deps.push_back(tail_id);
          send.num_deps = 1;
          send.name = 1;
          const Channel& c = channels[static_cast<size_t>(st.channel)];
          const auto flows_end = static_cast<size_t>(lockstep ? grad_replicas(p) * p.tp : (d + 1) * p.tp);
          for (auto f = static_cast<size_t>(d * p.tp); f < flows_end; ++f) {
            sim::append_flow(prog, topo.path(c.flows[f].first, c.flows[f].second), c.bytes);
            ++send.num_flows;
          }
        }
      }
    const sim::ExecResult ex = sim::execute(machine, prog);
    std::vector<TimePs> end(steps.size(), 0);  // latest replica's end of the stage's last step
    for (size_t s = 0; s < steps.size(); ++s) {
      if (steps[s].empty()) continue;
      const int last = static_cast<int>(steps[s].size()) - 1;
      for (int d = 0; d < replicas; ++d)
        for (sim::TaskId t : {id(static_cast<int>(s), d, last), id(static_cast<int>(s), d, last) + 1})
          end[s] = std::max(end[s], ex.task_end_ps[static_cast<size_t>(t)]);
    }
    return end;
  };
  const std::vector<TimePs> free = run(false), lockstep = run(true);
  std::vector<TimePs> drift(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) drift[s] = free[s] - lockstep[s];
  return drift;
}

}  // namespace

FastResult simulate_fast(const Scenario& sc, const strategies::RecomputePlan& plan,
                         const model::Workload& workload, StepCache& cache, bool measure_windows,
                         bool record_timeline) {
  const ParallelSpec& p = sc.parallel;
  // The scenario loader refuses it with the key to blame; this guards other callers.
  if (!supports_schedule(p))
    fail(ErrorCode::kIncompatibleSettings, "parallel.schedule zb-h1 needs sim.mode exact (fast mode composes whole "
         "backward steps: no deferred weight-gradient passes)");
  const int m = p.global_batch / (p.micro_batch * p.dp);
  const int last_vs = p.pp * p.virtual_stages - 1;
  const auto order = schedule::pipeline_order(p.schedule, p.pp, m, p.virtual_stages);
  const std::shared_ptr<StepCache::Context> held = cache.context(sc);  // alive while composed
  StepCache::Context& context = *held;
  if (!context.links_private) cache.add_channels(context, sc, workload);
  const PlanKey plan_key(plan);
  const double contention = sc.hardware.contention_factor;
  // Blocking exchanges (Megatron's _communicate): after the steps that call it a stage sends
  // its outputs once its receivers have posted their exchange, waits for its inputs and
  // synchronizes the GPU, so the next step starts on an idle GPU: its profile alone is exact.
  const bool blocking = blocking_exchange(p);
  // Links shared between GPUs (PCIe): a step's collectives share links with the previous
  // step's send, so each step is simulated after its predecessor.
  const bool after_previous = !context.links_private && !blocking;

  std::vector<bool> forward_windows(static_cast<size_t>(last_vs + 1));
  for (int vs = 0; vs <= last_vs; ++vs) forward_windows[static_cast<size_t>(vs)] = has_forward_windows(plan.stages[static_cast<size_t>(vs)]);
  // Per stage and step: the context that selects its profile, and the profile (a stage has
  // few distinct steps: each is looked up in the cache once).
  std::vector<std::vector<StepKey>> keys(static_cast<size_t>(p.pp));
  std::vector<std::vector<const StepProfile*>> profiles(static_cast<size_t>(p.pp));
  // After-previous steps: the same step simulated without its predecessor, for a step that
  // starts after its predecessor's communication has ended (it waited for its input).
  std::vector<std::vector<const StepProfile*>> profiles_alone(static_cast<size_t>(p.pp));
  std::size_t total = 0;
  for (int s = 0; s < p.pp; ++s) {
    const auto& steps = order[static_cast<size_t>(s)];
    std::vector<int> last_bwd(static_cast<size_t>(p.virtual_stages), -1);
    for (size_t i = 0; i < steps.size(); ++i)
      if (!steps[i].forward) last_bwd[static_cast<size_t>(steps[i].chunk)] = static_cast<int>(i);
    auto& k = keys[static_cast<size_t>(s)];
    k.reserve(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      const schedule::PipeStep& st = steps[i];
      StepKey& key = k.emplace_back();  // built in place (a copy through the stack stalls)
      key.stage = s;
      key.virtual_stage = st.chunk * p.pp + s;
      key.forward = st.forward;
      // Sharded gradients (model::reduces_every_micro_batch) are reduced after every backward.
      key.grads_final = !st.forward && (static_cast<int>(i) == last_bwd[static_cast<size_t>(st.chunk)] ||
                                        model::reduces_every_micro_batch(p));
      key.with_tail = i + 1 == steps.size();
      if (st.forward) {
        key.forward_windows = i + 1 < steps.size() && !steps[i + 1].forward && steps[i + 1].chunk == st.chunk &&
                              forward_windows[static_cast<size_t>(key.virtual_stage)];
      } else {
        key.forward_windows = i > 0 && k[i - 1].forward && k[i - 1].forward_windows;
      }
      // overlap_param_gather: the first forward of each chunk (micro-batch 0 in every schedule).
      const Sharding level = model::sharding_level(p);
      key.param_gathers = st.forward && st.micro_batch == 0 && p.overlap_param_gather && grad_replicas(p) > 1 &&
                          (level == Sharding::kOptimizer || level == Sharding::kGradients);
      if (level == Sharding::kFull && i + 1 < steps.size()) {
        key.next_forward = steps[i + 1].forward;
        key.next_virtual_stage = steps[i + 1].chunk * p.pp + s;
      }
      if (after_previous && i > 0) {
        key.after_previous = true;
        key.prev_forward = k[i - 1].forward;
        key.prev_virtual_stage = k[i - 1].virtual_stage;
        key.prev_grads_final = k[i - 1].grads_final;
        key.prev_forward_windows = k[i - 1].forward_windows;
      }
    }
    auto& pr = profiles[static_cast<size_t>(s)];
    auto& pr_alone = profiles_alone[static_cast<size_t>(s)];
    if (after_previous) pr_alone.push_back(nullptr);  // the first step runs alone anyway
    pr.reserve(steps.size());
    std::vector<std::pair<StepKey, const StepProfile*>> distinct;
    const auto profile_of = [&](const StepKey& key) {
      auto it = std::find_if(distinct.begin(), distinct.end(), [&](const auto& d) { return d.first == key; });
      if (it == distinct.end()) {
        distinct.push_back({key, &cache.get(context, key, plan_key, sc, plan, workload)});
        it = distinct.end() - 1;
      }
      return it->second;
    };
    for (const StepKey& key : k) {
      pr.push_back(profile_of(key));
      if (!key.after_previous) continue;
      StepKey alone = key;
      alone.after_previous = false;
      alone.prev_forward = alone.prev_grads_final = alone.prev_forward_windows = false;
      alone.prev_virtual_stage = 0;
      pr_alone.push_back(profile_of(alone));
    }
    total += steps.size();
  }

  FastResult r;
  std::vector<Arrival> fwd_in, bwd_in;
  auto slot = [m](int vs, int mb) { return static_cast<size_t>(vs * m + mb); };
  std::vector<StageState> state;
  std::vector<Interval> externals;
  // Window samples per virtual stage: per layer (backward windows), and forward idle.
  std::vector<std::vector<std::vector<TimePs>>> window_samples;
  std::vector<std::vector<TimePs>> forward_samples;
  // Links shared between GPUs: other stages' sends slow a step (its profile's channel
  // delays). The schedule is composed twice: the first pass times every channel's sends (in
  // start order: one stage sends them on its pp stream), the second charges each step the
  // delays of the sends of the first pass that overlap it.
  std::vector<std::vector<Interval>> channel_sends;
  bool charge_channels = false;
  // Per stage and step: how much longer its send took beside the stage's next step (from the
  // next step's profile, for the share of the send the next step overlapped), in the first
  // pass; the second pass's sends take that long.
  std::vector<std::vector<TimePs>> send_stretch_ps, first_pass_stretch_ps;
  // Per stage and step: its start and profile in the first pass, and the delay other stages'
  // sends add to it (from the first pass's timeline, charged in the second).
  std::vector<std::vector<TimePs>> first_pass_start_ps, channel_delay_ps;
  std::vector<std::vector<std::vector<TimePs>>> replica_channel_delay_ps;  ///< ...per replica too
  std::vector<std::vector<const StepProfile*>> first_pass_profile;
  std::vector<std::vector<TimePs>> channel_send_stretch_ps;  ///< per channel and send, for the second pass
  // Links shared between GPUs and more than one replica: the second pass's steps (per stage),
  // replayed per replica (replica_drift_ps); per transfer slot, the (stage, step) that sent it.
  // (Not with blocking exchanges: the replay's steps wait for their inputs, not for the
  // exchanges' rendezvous; the replicas are composed in lockstep.)
  const bool replay_replicas = !context.channels.empty() && grad_replicas(p) > 1 && !blocking;
  std::vector<std::vector<ComposedStep>> composed;
  std::vector<std::pair<int, int>> fwd_from, bwd_from;

  std::size_t steps_done = 0;
  // Blocking exchanges: stage s posts the exchange before its step `next` at `posted`
  // (Builder::emit_exchange): it sends what its steps since the last one queued, and receives
  // the inputs of its steps up to the next exchange.
  auto open_exchange = [&](int s, std::size_t next, TimePs posted) {
    StageState& g = state[static_cast<size_t>(s)];
    const auto& steps = order[static_cast<size_t>(s)];
    for (std::size_t k = next; k < schedule::exchange_inputs_end(steps, next); ++k) {
      const int vs = steps[k].chunk * p.pp + s;
      if (steps[k].forward && vs > 0) g.receives.push_back({true, slot(vs - 1, steps[k].micro_batch)});
      if (steps[k].backward() && vs < last_vs) g.receives.push_back({false, slot(vs + 1, steps[k].micro_batch)});
    }
    if (g.receives.empty() && g.queued_sends.empty() && !schedule::calls_empty_exchange(p.schedule, next)) return;
    g.exchanging = true;
    g.posted_ps = posted;
    for (const auto& [forward, at] : g.receives) (forward ? fwd_in : bwd_in)[at].posted_ps = posted;
  };
  // Times the sends of stage s's exchange whose receivers have posted theirs (NCCL's
  // rendezvous); once all are sent and its inputs have arrived, the exchange ends with the
  // synchronize (every stream of the GPU idle) and the stage may run its next step. Returns
  // whether anything was timed.
  std::vector<Interval> transfers;  // progress_exchange's scratch: what the compute stream waits for
  auto progress_exchange = [&](int s) {
    StageState& g = state[static_cast<size_t>(s)];
    bool progressed = false, all_sent = true;
    for (QueuedSend& q : g.queued_sends) {
      if (q.timed) continue;
      Arrival& out = (q.forward ? fwd_in : bwd_in)[q.slot];
      if (out.posted_ps < 0) {
        all_sent = false;
        continue;
      }
      // Both directions leave through the GPU's own link: an exchange's sends share its
      // bandwidth (exact mode runs them at once on two streams), so here they queue.
      const TimePs start = std::max({g.posted_ps, out.posted_ps, g.pp_free_ps});
      TimePs end = start + q.send_ps;
      if (charge_channels && q.channel >= 0)
        end += channel_send_stretch_ps[static_cast<size_t>(q.channel)][channel_sends[static_cast<size_t>(q.channel)].size()];
      if (q.channel >= 0) channel_sends[static_cast<size_t>(q.channel)].push_back({start, end});
      out.at_ps = end;
      out.queue_start_ps = start;
      g.pp_free_ps = end;
      g.sends.push_back({start, end});
      if (record_timeline) std::tie(r.timeline[static_cast<size_t>(s)][q.step].send_start_ps,
                                    r.timeline[static_cast<size_t>(s)][q.step].send_end_ps) = g.sends.back();
      q.timed = progressed = true;
    }
    if (!all_sent) return progressed;
    transfers.clear();  // to count the wait as pp exposed
    TimePs done = std::max({g.posted_ps, g.compute_free_ps, g.tail_end_ps, g.dp_free_ps, g.pp_free_ps});
    for (const auto& [forward, at] : g.receives) {
      const Arrival& in = (forward ? fwd_in : bwd_in)[at];
      if (in.at_ps < 0) return progressed;
      done = std::max(done, in.at_ps);
      transfers.push_back({in.queue_start_ps, in.at_ps});
    }
    for (std::size_t i = g.sends.size() - std::min(g.sends.size(), g.queued_sends.size()); i < g.sends.size(); ++i)
      transfers.push_back(g.sends[i]);
    std::sort(transfers.begin(), transfers.end());
    TimePs covered_to = g.compute_free_ps;
    for (const Interval& t : transfers) {
      g.out.pp_exposed_ps += overlap({covered_to, done}, t);
      covered_to = std::max(covered_to, t.second);
    }
    g.end_ps = std::max(g.end_ps, done);
    g.compute_free_ps = g.tail_end_ps = done;
    if (g.optimizer_after_exchange) {  // the optimizer step waits for the last exchange too
      g.grads_reduced_ps = std::max(g.grads_reduced_ps, done);
      g.end_ps = std::max(g.end_ps, std::max(done, g.dp_free_ps) + g.optimizer_ps);
    }
    g.host_ps = std::max(g.host_ps, done);  // the host waited in the synchronize (unused without a host model)
    g.exchanging = false;
    g.queued_sends.clear();
    g.receives.clear();
    return true;
  };

  // Runs stage s's next step if its input has arrived (with blocking exchanges: first finishes
  // the exchange before it); returns whether anything was composed.
  auto advance = [&](int s) {
    StageState& g = state[static_cast<size_t>(s)];
    const auto& steps = order[static_cast<size_t>(s)];
    bool progressed = false;
    if (g.exchanging) {
      progressed = progress_exchange(s);
      if (g.exchanging) return progressed;
    }
    if (g.next >= steps.size()) return progressed;
    const schedule::PipeStep& st = steps[g.next];
    const StepKey& key = keys[static_cast<size_t>(s)][g.next];
    const int vs = key.virtual_stage;
    const Arrival* in = nullptr;
    if (st.forward && vs > 0) in = &fwd_in[slot(vs - 1, st.micro_batch)];
    if (!st.forward && vs < last_vs) in = &bwd_in[slot(vs + 1, st.micro_batch)];
    if (in && in->at_ps < 0) return progressed;
    const TimePs start = std::max(g.compute_free_ps, in ? in->at_ps : 0);
    ComposedStep* replayed = nullptr;
    if (replay_replicas && charge_channels) {
      replayed = &composed[static_cast<size_t>(s)][g.next];
      replayed->start_ps = start;
      if (in) std::tie(replayed->input_stage, replayed->input_step) =
                  st.forward ? fwd_from[slot(vs - 1, st.micro_batch)] : bwd_from[slot(vs + 1, st.micro_batch)];
    }
    // Simulated after its predecessor, the step ran beside the predecessor's send and
    // all-reduces from its start; when those had ended before it started, it ran alone.
    const bool beside_previous = key.after_previous &&
                                 !(g.last_send.second <= start && (!g.previous_had_dp || g.dp_free_ps <= start));
    const StepProfile& pr =
        beside_previous || !key.after_previous ? *profiles[static_cast<size_t>(s)][g.next] : *profiles_alone[static_cast<size_t>(s)][g.next];
    r.symmetric = pr.symmetric;
    // The window each layer's recompute could use: the backward of the layer above; for the
    // top layer the wait before this step plus the head's TP idle.
    const auto layers = measure_windows ? pr.layer_tp_idle_ps.size() : 0;
    if (st.forward) {
      auto& f = forward_samples[static_cast<size_t>(vs)];
      f.insert(f.end(), pr.layer_tp_idle_ps.begin(), pr.layer_tp_idle_ps.begin() + static_cast<std::ptrdiff_t>(layers));
    } else if (layers > 0) {
      auto& w = window_samples[static_cast<size_t>(vs)];
      w.resize(layers);
      for (size_t l = 0; l + 1 < layers; ++l) w[l].push_back(pr.layer_tp_idle_ps[l + 1]);
      w[layers - 1].push_back(start - g.compute_free_ps + pr.head_tp_idle_ps);
    }
    if (in) g.out.pp_exposed_ps += overlap({g.compute_free_ps, start}, {in->queue_start_ps, in->at_ps});

    // Communication of this GPU still running when the step starts slows its kernels; the
    // previous step's is already in the profile when the two were simulated together.
    const bool paired = beside_previous || (!st.forward && key.forward_windows);
    externals.clear();
    if (!paired && g.tail_end_ps > g.compute_free_ps) externals.push_back({g.compute_free_ps - start, g.tail_end_ps - start});
    // Sends and all-reduces queue on their streams, so they end in issue order.
    while (g.live_send < g.sends.size() && g.sends[g.live_send].second <= start) ++g.live_send;
    while (g.live_dp < g.dp.size() && g.dp[g.live_dp].second <= start) ++g.live_dp;
    for (std::size_t i = g.live_send; i < g.sends.size(); ++i)
      if (!(paired && g.sends[i] == g.last_send)) externals.push_back({g.sends[i].first - start, g.sends[i].second - start});
    for (std::size_t i = g.live_dp; i < g.dp.size(); ++i)
      if (!(beside_previous && i + 1 == g.dp.size() && g.previous_had_dp))
        externals.push_back({g.dp[i].first - start, g.dp[i].second - start});
    TimePs delta = contention_delay_ps(pr.segments, externals, contention);
    g.out.contention_ps += delta;
    g.out.compute_ps += delta;
    if (charge_channels) {
      const TimePs foreign_ps = channel_delay_ps[static_cast<size_t>(s)][g.next];
      delta += foreign_ps;
      g.out.tp_exposed_ps += foreign_ps;  // the step's collectives wait for the shared links
    } else if (!context.channels.empty()) {
      first_pass_start_ps[static_cast<size_t>(s)][g.next] = start;
      first_pass_profile[static_cast<size_t>(s)][g.next] = &pr;
    }
    // Beside this step the predecessor's send took longer, for the share of it the step
    // overlapped (the second pass's send takes that long).
    if (beside_previous && pr.previous_send_ps >= 0 && g.previous_sent) {
      const TimePs stretch = pr.previous_send_ps - g.previous_send_alone_ps;
      const TimePs length = g.last_send.second - g.last_send.first;
      if (stretch > 0 && length > 0)
        send_stretch_ps[static_cast<size_t>(s)][g.next - 1] = static_cast<TimePs>(std::llround(
            static_cast<double>(stretch) * static_cast<double>(g.last_send.second - std::max(g.last_send.first, start)) /
            static_cast<double>(length)));
    }
    // Simulated right after its predecessor, the step ran beside all of the predecessor's
    // send and all-reduces; one that waited for its input finds part of them done. Its
    // slowdown over the step alone shrinks with the share of that communication (from when
    // the step could have started to when the last of it ends) that passed before it started.
    if (beside_previous && start > g.compute_free_ps) {
      const StepProfile& alone = *profiles_alone[static_cast<size_t>(s)][g.next];
      const TimePs comm_end = std::max(g.last_send.second, g.previous_had_dp ? g.dp_free_ps : TimePs{0});
      const TimePs span = comm_end - g.compute_free_ps;
      if (span > 0 && pr.compute_end_ps > alone.compute_end_ps) {
        const double passed = std::min(1.0, static_cast<double>(start - g.compute_free_ps) / static_cast<double>(span));
        delta -= static_cast<TimePs>(std::llround(static_cast<double>(pr.compute_end_ps - alone.compute_end_ps) * passed));
      }
    }
    // The profile ran the step beside its predecessor's send as long as that send took there;
    // in the second pass other stages' steps crossing its links have stretched it, so the
    // step's collectives share its links for longer: its slowdown over the step alone grows
    // with the send's length left past the profile's (a step started at its predecessor's end,
    // as simulated; with the predecessor's all-reduces the slowdown is not the send's alone).
    if (charge_channels && beside_previous && g.previous_sent && !g.previous_had_dp && pr.previous_send_ps > 0 &&
        start == g.compute_free_ps) {
      const StepProfile& alone = *profiles_alone[static_cast<size_t>(s)][g.next];
      const TimePs left_ps = g.last_send.second - start;
      if (left_ps > pr.previous_send_ps && pr.compute_end_ps > alone.compute_end_ps)
        delta += static_cast<TimePs>(std::llround(static_cast<double>(pr.compute_end_ps - alone.compute_end_ps) *
                                                  static_cast<double>(left_ps - pr.previous_send_ps) /
                                                  static_cast<double>(pr.previous_send_ps)));
    }
    // A pp-wait recompute was simulated as issued at the step's start; it was issued at the
    // previous step's tail, so a step that starts later finds it further along.
    // After its predecessor it was simulated as issued there, with no wait for the input.
    if (pr.pp_wait_recompute)
      delta -= std::min(start - (beside_previous ? g.compute_free_ps : g.tail_end_ps), pr.recompute_wait_ps);

    // The parameter all-gathers were simulated as issued at this step's start; they started
    // with the iteration, so a step that starts later waits less (by at most what it waited).
    TimePs gather_credit = 0;
    if (key.param_gathers) {
      gather_credit = std::min(start, pr.dp_exposed_ps);
      delta -= gather_credit;
    }
    // The micro-batch load's broadcasts (builder_steps.cpp emit_micro_batch_load) queue on
    // the tp stream behind the previous step's tail (at the last stage the head's loss
    // all-reduce, which the next step's compute overlapped before the load came first); a step
    // measured alone did not see it.
    const bool tail_blocks_load = p.tp > 1 && st.forward && (vs == 0 || vs == last_vs) && !beside_previous;
    if (tail_blocks_load && g.tail_end_ps > start) delta += g.tail_end_ps - start;
    // With the host model every time is also bounded by the tasks' issue (host_bound_ps).
    const HostProfile& host = pr.host;
    // Loading a micro-batch, the host waits for the GPU's compute stream and the step's input
    // (builder_steps.cpp emit_micro_batch_load: the first and last virtual stage's
    // forwards); its later wait, for the sizes broadcast, is in the host profile.
    if (host.on && st.forward && (vs == 0 || vs == last_vs)) g.host_ps = std::max(g.host_ps, start);
    const TimePs compute_end = host_bound_ps(host, start + pr.compute_end_ps + delta, g.host_ps, host.compute_end_ps);
    const TimePs tail_end = host_bound_ps(host, start + pr.tail_end_ps + delta, g.host_ps, host.tail_end_ps);
    TimePs end = std::max(compute_end, tail_end);
    if (pr.sends && blocking) {  // sent by the exchange after the step
      const int to_stage = (st.forward ? vs + 1 : vs - 1) % p.pp;
      const int channel = context.channels.empty() ? -1 : context.channel_of[static_cast<size_t>(s * p.pp + to_stage)];
      g.queued_sends.push_back({st.forward, slot(vs, st.micro_batch), pr.send_ps, channel, g.next});
    } else if (pr.sends) {
      const TimePs send_start = host_bound_ps(host, std::max(tail_end, g.pp_free_ps), g.host_ps, host.send_issue_ps);
      const int to_stage = (st.forward ? vs + 1 : vs - 1) % p.pp;
      const int channel = context.channels.empty() ? -1 : context.channel_of[static_cast<size_t>(s * p.pp + to_stage)];
      TimePs send_end = send_start + pr.send_ps;
      if (charge_channels) {
        send_end += first_pass_stretch_ps[static_cast<size_t>(s)][g.next];
        if (channel >= 0) send_end += channel_send_stretch_ps[static_cast<size_t>(channel)][channel_sends[static_cast<size_t>(channel)].size()];
      }
      if (replayed) replayed->channel = channel;
      if (replay_replicas) (st.forward ? fwd_from : bwd_from)[slot(vs, st.micro_batch)] = {s, static_cast<int>(g.next)};
      const bool queued = !g.sends.empty() && send_start == g.pp_free_ps;
      g.pp_queue_start_ps = queued ? g.pp_queue_start_ps : send_start;
      g.pp_free_ps = send_end;
      g.last_send = {send_start, send_end};
      g.sends.push_back(g.last_send);
      if (channel >= 0) channel_sends[static_cast<size_t>(channel)].push_back(g.last_send);
      Arrival& out = st.forward ? fwd_in[slot(vs, st.micro_batch)] : bwd_in[slot(vs, st.micro_batch)];
      out = {send_end, g.pp_queue_start_ps};
      end = std::max(end, send_end);
    }
    g.previous_sent = pr.sends;
    g.previous_send_alone_ps = pr.send_ps;
    const TimePs dp_before = g.dp_free_ps;
    g.previous_had_dp = pr.has_dp;
    if (pr.has_dp) {
      const TimePs dp_start = host_bound_ps(host, std::max(start + pr.dp_start_ps + delta, g.dp_free_ps), g.host_ps,
                                            host.dp_start_ps);
      const TimePs dp_end = host_bound_ps(
          host, std::max(start + pr.dp_end_ps + delta, dp_start + (pr.dp_end_ps - pr.dp_start_ps)), g.host_ps,
          host.dp_end_ps);
      g.dp.push_back({dp_start, dp_end});
      g.dp_free_ps = dp_end;
      end = std::max(end, dp_end);
    }
    if (key.with_tail) {
      end = std::max(end, host_bound_ps(host, start + pr.end_ps + delta, g.host_ps, host.end_ps));
      // The optimizer step follows every gradient reduction: earlier buckets still running,
      // or this step's own, delayed behind them; and the step's own compute (later than its
      // profile says where the host issued it late).
      const TimePs grads_ready_ps = std::max({compute_end, tail_end, dp_before, g.dp_free_ps});
      end = std::max(end, grads_ready_ps + pr.optimizer_ps);
      g.grads_reduced_ps = std::max(start + pr.end_ps + delta - pr.optimizer_ps, grads_ready_ps);
      g.optimizer_ps = pr.optimizer_ps;
    }
    g.end_ps = std::max(g.end_ps, end);

    FastStage& b = g.out;
    b.compute_ps += pr.compute_ps;
    b.recompute_ps += pr.recompute_ps;
    b.recompute_overlapped_ps += pr.recompute_overlapped_ps;
    b.contention_ps += pr.contention_ps;
    b.tp_exposed_ps += pr.tp_exposed_ps;
    b.dp_exposed_ps += pr.dp_exposed_ps - gather_credit;
    g.other_comm_ps += pr.other_comm_ps;
    b.static_memory_bytes = pr.static_bytes;
    b.peak_memory_bytes = std::max(b.peak_memory_bytes, g.level_bytes + pr.memory_peak_bytes);
    g.level_bytes += pr.memory_net_bytes;
    r.executed_flops += pr.flops * pr.replication;

    if (replayed) {
      replayed->compute_end_ps = compute_end;
      replayed->tail_end_ps = tail_end;
      const auto& channel_extra = replica_channel_delay_ps[static_cast<size_t>(s)][g.next];
      if (pr.replica_compute_end_ps.size() == static_cast<size_t>(grad_replicas(p)) && channel_extra.size() == static_cast<size_t>(grad_replicas(p)))
        for (size_t d = 0; d < channel_extra.size(); ++d)
          replayed->replica_extra_ps.push_back(pr.replica_compute_end_ps[d] - pr.compute_end_ps + channel_extra[d] - channel_extra[0]);
      if (pr.replica_send_extra_ps.size() == static_cast<size_t>(grad_replicas(p))) replayed->replica_send_extra_ps = pr.replica_send_extra_ps;
    }
    if (record_timeline) {
      if (r.timeline.empty()) r.timeline.resize(static_cast<size_t>(p.pp));
      FastStep& t = r.timeline[static_cast<size_t>(s)].emplace_back();
      t.micro_batch = st.micro_batch;
      t.chunk = st.chunk;
      t.forward = st.forward;
      t.start_ps = start;
      t.compute_end_ps = compute_end;
      if (pr.sends) std::tie(t.send_start_ps, t.send_end_ps) = g.last_send;
      t.foreign_ps = charge_channels ? channel_delay_ps[static_cast<size_t>(s)][g.next] : 0;
      t.delta_ps = delta;
      t.beside_previous = beside_previous;
    }
    g.compute_free_ps = compute_end;
    g.tail_end_ps = tail_end;
    // Blocking: the host posts the exchange once the step is issued and its tail has run.
    const TimePs posted = host_bound_ps(host, tail_end, g.host_ps, host.send_issue_ps);
    g.host_ps += host.cost_ps;
    ++g.next;
    ++steps_done;
    if (blocking && schedule::exchanges_after(steps, g.next - 1)) {
      g.optimizer_after_exchange = key.with_tail;
      open_exchange(s, g.next, posted);
    }
    return true;
  };

  const int passes = context.channels.empty() ? 1 : 2;
  for (int pass = 0; pass < passes; ++pass) {
    charge_channels = pass == 1;
    if (pass == 1) {
      channel_delay_ps.resize(static_cast<size_t>(p.pp));
      for (int s = 0; s < p.pp; ++s) {
        auto& d = channel_delay_ps[static_cast<size_t>(s)];
        d.resize(order[static_cast<size_t>(s)].size());
        for (size_t i = 0; i < d.size(); ++i)
          d[i] = delay_of_channels(*first_pass_profile[static_cast<size_t>(s)][i], first_pass_start_ps[static_cast<size_t>(s)][i],
                                   channel_sends);
      }
      if (replay_replicas) {
        replica_channel_delay_ps.assign(static_cast<size_t>(p.pp), {});
        for (int s = 0; s < p.pp; ++s)
          for (size_t i = 0; i < order[static_cast<size_t>(s)].size(); ++i) {
            const StepProfile& fp = *first_pass_profile[static_cast<size_t>(s)][i];
            auto& per_replica = replica_channel_delay_ps[static_cast<size_t>(s)].emplace_back();
            if (fp.replica_compute_end_ps.size() != static_cast<size_t>(grad_replicas(p))) continue;
            if (fp.replica_channel_delay_ps.empty()) {  // every replica delayed as replica 0
              per_replica.assign(static_cast<size_t>(grad_replicas(p)), channel_delay_ps[static_cast<size_t>(s)][i]);
              continue;
            }
            for (int d = 0; d < grad_replicas(p); ++d)
              per_replica.push_back(delay_of_channels(fp, first_pass_start_ps[static_cast<size_t>(s)][i], channel_sends,
                                                      static_cast<size_t>(grad_replicas(p)), static_cast<size_t>(d)));
          }
      }
      // Each send, in turn, is slowed by the steps of the other stages whose links it crosses.
      channel_send_stretch_ps.resize(channel_sends.size());
      for (size_t c = 0; c < channel_sends.size(); ++c) {
        auto& stretch = channel_send_stretch_ps[c];
        stretch.assign(channel_sends[c].size(), 0);
        for (size_t j = 0; j < stretch.size(); ++j) {
          double sum = 0;
          for (int x = 0; x < p.pp; ++x)
            for (size_t i = 0; i < first_pass_profile[static_cast<size_t>(x)].size(); ++i)
              sum += phase_delay(*first_pass_profile[static_cast<size_t>(x)][i],
                                 first_pass_profile[static_cast<size_t>(x)][i]->channel_send_delay_ps, c,
                                 first_pass_start_ps[static_cast<size_t>(x)][i], channel_sends[c][j], false);
          stretch[j] = static_cast<TimePs>(std::llround(sum));
        }
      }
    } else if (!context.channels.empty()) {
      first_pass_start_ps.resize(static_cast<size_t>(p.pp));
      first_pass_profile.resize(static_cast<size_t>(p.pp));
      for (int s = 0; s < p.pp; ++s) {
        first_pass_start_ps[static_cast<size_t>(s)].assign(order[static_cast<size_t>(s)].size(), 0);
        first_pass_profile[static_cast<size_t>(s)].assign(order[static_cast<size_t>(s)].size(), nullptr);
      }
    }
    channel_sends.assign(context.channels.size(), {});
    first_pass_stretch_ps = std::move(send_stretch_ps);
    if (after_previous) {  // only steps simulated after their predecessor measure it
      send_stretch_ps.resize(static_cast<size_t>(p.pp));
      for (int s = 0; s < p.pp; ++s) send_stretch_ps[static_cast<size_t>(s)].assign(order[static_cast<size_t>(s)].size(), 0);
    }
    r = FastResult{};
    r.steps = total;
    fwd_in.assign(static_cast<size_t>((last_vs + 1) * m), Arrival{});
    if (replay_replicas) {
      fwd_from.assign(fwd_in.size(), {-1, -1});
      bwd_from.assign(fwd_in.size(), {-1, -1});
      composed.assign(static_cast<size_t>(p.pp), {});
      for (int s = 0; s < p.pp; ++s) composed[static_cast<size_t>(s)].resize(order[static_cast<size_t>(s)].size());
    }
    bwd_in.assign(fwd_in.size(), Arrival{});
    state.assign(static_cast<size_t>(p.pp), StageState{});
    window_samples.assign(static_cast<size_t>(last_vs + 1), {});
    forward_samples.assign(static_cast<size_t>(last_vs + 1), {});
    steps_done = 0;
    if (blocking)
      for (int s = 0; s < p.pp; ++s) open_exchange(s, 0, 0);  // the first step's input
    const auto exchanging = [&] {
      return std::any_of(state.begin(), state.end(), [](const StageState& g) { return g.exchanging; });
    };
    while (steps_done < total || exchanging()) {
      bool progressed = false;
      for (int s = 0; s < p.pp; ++s)
        while (advance(s)) progressed = true;
      for (int s = p.pp - 1; s >= 0; --s)
        while (advance(s)) progressed = true;
      LYNX_CHECK(progressed, "fast mode: the pipeline schedule cannot progress");
    }
  }
  if (replay_replicas) {
    const std::vector<TimePs> drift = replica_drift_ps(p, *context.topology, context.channels, composed);
    for (int s = 0; s < p.pp; ++s) {
      StageState& g = state[static_cast<size_t>(s)];
      g.end_ps += drift[static_cast<size_t>(s)];
      g.grads_reduced_ps += drift[static_cast<size_t>(s)];
    }
  }
  if (workload.tied_embedding_params > 0) couple_tied_embedding(sc, workload, *context.topology, context.links_private, state.front(), state.back());
  for (const StageState& g : state) r.makespan_ps = std::max(r.makespan_ps, g.end_ps);
  const auto median_or_zero = [](std::vector<TimePs> v) { return v.empty() ? TimePs{0} : median(std::move(v)); };
  for (int vs = 0; vs <= last_vs && measure_windows; ++vs) {
    auto& c = r.window_capacity.emplace_back();
    for (auto& samples : window_samples[static_cast<size_t>(vs)]) c.push_back(median_or_zero(std::move(samples)));
    r.forward_window_capacity.push_back(median_or_zero(std::move(forward_samples[static_cast<size_t>(vs)])));
  }
  for (StageState& g : state) {
    FastStage b = g.out;
    b.peak_memory_bytes += b.static_memory_bytes;
    b.oom = sc.hardware.memory_bytes > 0 && b.peak_memory_bytes > 0 &&
            static_cast<std::uint64_t>(b.peak_memory_bytes) > sc.hardware.memory_bytes;
    b.recompute_ps += g.other_comm_ps;  // the collectives of a full recompute, as exact mode counts them
    const TimePs accounted = b.compute_ps + b.recompute_ps + b.tp_exposed_ps + b.pp_exposed_ps + b.dp_exposed_ps;
    b.bubble_ps = std::max<TimePs>(0, r.makespan_ps - accounted);
    r.stages.push_back(b);
  }
  return r;
}

}  // namespace lynx::fast
