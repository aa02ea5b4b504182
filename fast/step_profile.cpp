#include "fast/step_profile.hpp"

#include "common/error.hpp"
#include "schedule/overlap_windows.hpp"
#include "sim/executor.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace lynx::fast {
namespace {

/// The kernels and communication tasks of GPU 0 running in [from, to), as segments.
std::vector<Segment> activity(const sim::Program& prog, const sim::ExecResult& ex, TimePs from,
                              TimePs to) {
  std::vector<std::tuple<TimePs, int, int>> edges;  // (time, kernel change, comm change)
  for (size_t i = 0; i < prog.tasks.size(); ++i) {
    const sim::Task& t = prog.tasks[i];
    if (t.gpu != 0 || t.kind == sim::TaskKind::kMarker) continue;
    const TimePs s = std::max(ex.task_start_ps[i], from), e = std::min(ex.task_end_ps[i], to);
    if (e <= s) continue;
    const bool kernel = t.kind == sim::TaskKind::kKernel;
    edges.emplace_back(s, kernel ? 1 : 0, kernel ? 0 : 1);
    edges.emplace_back(e, kernel ? -1 : 0, kernel ? 0 : -1);
  }
  std::sort(edges.begin(), edges.end());
  std::vector<Segment> out;
  TimePs at = from;
  int kernels = 0, comms = 0;
  for (const auto& [time, dk, dc] : edges) {
    if (time > at) {
      if (!out.empty() && out.back().kernels == kernels && out.back().comms == comms)
        out.back().length_ps += time - at;
      else
        out.push_back({time - at, kernels, comms});
      at = time;
    }
    kernels += dk;
    comms += dc;
  }
  if (to > at) out.push_back({to - at, kernels, comms});
  return out;
}

/// The measured step of a part's program: its span (GPU 0's) and the end of its task range
/// (with the tail: every later task of GPU 0).
struct MeasuredRange {
  const schedule::StepSpan* span = nullptr;
  sim::TaskId end = 0;
  sim::TaskId optimizer_first = 0;  ///< first optimizer kernel after the step (end: none)
};

MeasuredRange measured_range(const schedule::BuiltProgram& built, const schedule::StageSteps& part,
                             std::size_t measured) {
  const sim::Program& prog = built.program;
  std::vector<const schedule::StepSpan*> spans;  // GPU 0's
  for (const schedule::StepSpan& s : built.steps)
    if (s.gpu == 0) spans.push_back(&s);
  LYNX_CHECK(measured < spans.size(), "step {} of a part of {} steps", measured, spans.size());
  MeasuredRange r;
  r.span = spans[measured];
  const bool last = measured + 1 == spans.size();
  r.end = static_cast<sim::TaskId>(r.span->end_task);
  if (last && part.with_tail)
    while (static_cast<size_t>(r.end) < prog.tasks.size() && prog.tasks[static_cast<size_t>(r.end)].gpu == 0) ++r.end;
  // The optimizer step (its kernels and the collectives between them) runs from its first
  // kernel to the end of the range; data-parallel traffic before it is the gradient reduction.
  r.optimizer_first = r.end;
  for (sim::TaskId i = r.span->end_task; i < r.end; ++i)
    if (prog.tasks[static_cast<size_t>(i)].category == sim::Category::kOptimizer) {
      r.optimizer_first = i;
      break;
    }
  return r;
}

/// The step's HostProfile: its part built with the host starting at `host_start_ps` (after
/// the host-free run's end, so every task waits for its issue) and run.
HostProfile measure_host_bound(const Scenario& sc, const strategies::RecomputePlan& plan,
                               const hw_models::Topology& topo, const model::Workload& workload,
                               schedule::StageSteps part, std::size_t measured, TimePs host_start_ps) {
  part.host_start_ps = host_start_ps;
  schedule::BuiltProgram built = schedule::build_stage_steps(sc, plan, topo, workload, part);
  sim::Program& prog = built.program;
  for (sim::Task& t : prog.tasks) t.num_mem = 0;  // timing only
  for (sim::GpuDesc& g : built.machine.gpus) g.memory_capacity_bytes = 0;
  const sim::ExecResult ex = sim::execute(built.machine, prog);
  const MeasuredRange r = measured_range(built, part, measured);
  const schedule::StepSpan& sp = *r.span;
  const auto first = static_cast<size_t>(sp.first_task);
  // The host clock as the executor moves it at GPU 0's host waits (sim::Program::host_waits;
  // GPU 0's come first, in program order): the shift of the built issue times after the waits
  // before the step, and after those up to its end. A micro-batch load's wait for the step's
  // own marker counts as before the step: compose.cpp applies it at the step's start.
  TimePs shift_ps = 0, shift_before_ps = 0;
  for (const sim::Program::HostWait& w : prog.host_waits) {
    if (prog.tasks[static_cast<size_t>(w.resume)].gpu != 0 || w.resume >= r.end) break;
    shift_ps = std::max(shift_ps, ex.task_end_ps[static_cast<size_t>(w.until)] - w.host_before_ps);
    if (w.until <= sp.marker) shift_before_ps = shift_ps;
  }
  // The host clock just before the step's first issue (GPU 0's tasks come first).
  const TimePs host = (first > 0 ? prog.issue_ps[first - 1] : host_start_ps) + shift_before_ps;
  const auto end = [&](sim::TaskId id) { return ex.task_end_ps[static_cast<size_t>(id)] - host; };
  HostProfile h;
  h.on = true;
  h.cost_ps = prog.issue_ps[static_cast<size_t>(r.end - 1)] + shift_ps - host;
  h.tail_end_ps = end(sp.compute_tail);
  if (sp.send >= 0) h.send_issue_ps = prog.issue_ps[static_cast<size_t>(sp.send)] - host;
  bool dp = false;
  for (sim::TaskId i = sp.first_task; i < r.end; ++i) {
    const sim::Task& t = prog.tasks[static_cast<size_t>(i)];
    h.end_ps = std::max(h.end_ps, end(i));
    if (t.stream == schedule::kCompute && i < sp.end_task) h.compute_end_ps = std::max(h.compute_end_ps, end(i));
    if (i < r.optimizer_first && t.stream == schedule::kDp) {
      if (!dp) h.dp_start_ps = ex.task_start_ps[static_cast<size_t>(i)] - host;
      dp = true;
      h.dp_end_ps = std::max(h.dp_end_ps, end(i));
    }
  }
  return h;
}

/// Whether `c`'s flows cross a link that the collectives (not the pipeline sends) of `prog`
/// use.
bool shares_collective_link(const sim::Program& prog, const hw_models::Topology& topo, const Channel& c) {
  std::vector<bool> used(topo.links().size(), false);
  for (const sim::Task& t : prog.tasks) {
    if (t.kind != sim::TaskKind::kComm || t.stream == schedule::kPp) continue;
    for (std::uint32_t f = t.first_flow; f < t.first_flow + t.num_flows; ++f) {
      const sim::Flow& flow = prog.flows[f];
      for (std::uint32_t l = flow.first_link; l < flow.first_link + flow.num_links; ++l)
        used[static_cast<size_t>(prog.path_links[l])] = true;
    }
  }
  for (const auto& [src, dst] : c.flows)
    for (sim::LinkId l : topo.path(src, dst))
      if (used[static_cast<size_t>(l)]) return true;
  return false;
}

/// The end of a step's last compute-stream task, relative to the start of its marker.
TimePs compute_end_of(const sim::Program& prog, const sim::ExecResult& ex, const schedule::StepSpan& sp) {
  TimePs end = 0;
  for (sim::TaskId i = sp.first_task; i < sp.end_task; ++i)
    if (prog.tasks[static_cast<size_t>(i)].stream == schedule::kCompute)
      end = std::max(end, ex.task_end_ps[static_cast<size_t>(i)]);
  return end - ex.task_start_ps[static_cast<size_t>(sp.marker)];
}

/// A run of the measured step beside a channel's transfers: per replica (its first GPU's
/// span of the step, `replicas`), the step's compute end (compute_end_of); and how long the
/// transfers took.
struct Beside {
  std::vector<TimePs> compute_end_ps;
  TimePs sent_ps = 0;
};

/// When `c`'s transfers (one send each, on a GPU of their own) start `after_ps` after task
/// `at` of the measured step starts: Beside. `at` < 0: the transfers alone, from time 0. The
/// channel's GPU is added to `m` for the run and removed after it (a copy of the machine holds
/// every link of the cluster).
Beside run_beside(sim::Machine& m, sim::Program prog, const hw_models::Topology& topo,
                  const std::vector<const schedule::StepSpan*>& replicas, const Channel& c, sim::TaskId at,
                  TimePs after_ps = 0) {
  m.gpus.push_back({"channel", {"pp"}, 0, 0.0});
  if (at >= 0 && after_ps > 0) {  // a wait of that length on the channel's own GPU, then the send
    sim::Task wait;
    wait.kind = sim::TaskKind::kKernel;
    wait.category = sim::Category::kOther;
    wait.gpu = static_cast<sim::GpuId>(m.gpus.size() - 1);
    wait.work_ps = after_ps;
    wait.first_dep = static_cast<std::uint32_t>(prog.deps.size());
    wait.num_deps = 1;
    prog.deps.push_back(at);
    prog.tasks.push_back(wait);
    if (!prog.issue_ps.empty()) prog.issue_ps.push_back(0);
    at = static_cast<sim::TaskId>(prog.tasks.size() - 1);
  }
  sim::Task t;
  t.kind = sim::TaskKind::kComm;
  t.category = sim::Category::kPpComm;
  t.gpu = static_cast<sim::GpuId>(m.gpus.size() - 1);
  t.first_dep = static_cast<std::uint32_t>(prog.deps.size());
  t.num_deps = at >= 0 ? 1 : 0;
  if (at >= 0) prog.deps.push_back(at);
  t.first_flow = static_cast<std::uint32_t>(prog.flows.size());
  for (const auto& [src, dst] : c.flows) {
    sim::append_flow(prog, topo.path(src, dst), c.bytes);
    ++t.num_flows;
  }
  prog.tasks.push_back(t);
  if (!prog.issue_ps.empty()) prog.issue_ps.push_back(0);
  if (!prog.static_bytes_per_gpu.empty()) prog.static_bytes_per_gpu.push_back(0);
  const sim::ExecResult ex = sim::execute(m, prog);
  m.gpus.pop_back();
  Beside b;
  b.sent_ps = ex.task_end_ps.back() - ex.task_start_ps.back();
  if (at >= 0)
    for (const schedule::StepSpan* sp : replicas) b.compute_end_ps.push_back(compute_end_of(prog, ex, *sp));
  return b;
}

/// How long each replica's flows of `c` take when every replica sends at once on idle links
/// (replica d's flows are c.flows[d · tp, (d + 1) · tp), one task each on a GPU of its own).
std::vector<TimePs> replica_sends_alone_ps(const sim::Machine& machine, const hw_models::Topology& topo, const Channel& c,
                                          int replicas) {
  sim::Machine m;
  m.links = machine.links;
  sim::Program prog;
  const size_t per_replica = c.flows.size() / static_cast<size_t>(replicas);
  for (int d = 0; d < replicas; ++d) {
    m.gpus.push_back({"replica", {"pp"}, 0, 0.0});
    sim::Task& t = prog.tasks.emplace_back();
    t.kind = sim::TaskKind::kComm;
    t.category = sim::Category::kPpComm;
    t.gpu = static_cast<sim::GpuId>(d);
    t.first_flow = static_cast<std::uint32_t>(prog.flows.size());
    for (size_t f = static_cast<size_t>(d) * per_replica; f < static_cast<size_t>(d + 1) * per_replica; ++f) {
      sim::append_flow(prog, topo.path(c.flows[f].first, c.flows[f].second), c.bytes);
      ++t.num_flows;
    }
  }
  const sim::ExecResult ex = sim::execute(m, prog);
  std::vector<TimePs> out;
  for (size_t i = 0; i < prog.tasks.size(); ++i) out.push_back(ex.task_end_ps[i] - ex.task_start_ps[i]);
  return out;
}

}  // namespace

StepProfile measure_step(const Scenario& sc, const strategies::RecomputePlan& plan,
                         const hw_models::Topology& topo, const model::Workload& workload,
                         const schedule::StageSteps& asked, std::size_t measured,
                         const std::vector<Channel>& channels) {
  // Without channels no run adds flows of its own: the machine keeps only the links used.
  schedule::StageSteps part = asked;
  part.compact_links = channels.empty();
  schedule::BuiltProgram built = schedule::build_stage_steps(sc, plan, topo, workload, part);
  sim::Program& prog = built.program;
  // Memory off for the timing run (memory never changes timing); restored for the profile.
  std::vector<std::uint32_t> num_mem(prog.tasks.size());
  for (size_t i = 0; i < prog.tasks.size(); ++i) num_mem[i] = std::exchange(prog.tasks[i].num_mem, 0);
  // The built machine itself (without compaction a copy holds every link of the cluster): its
  // capacities are not read again.
  sim::Machine& machine = built.machine;
  for (sim::GpuDesc& g : machine.gpus) g.memory_capacity_bytes = 0;
  const sim::ExecResult ex = sim::execute(machine, prog);
  const MeasuredRange range = measured_range(built, part, measured);
  const schedule::StepSpan& sp = *range.span;
  // The measured step of each data-parallel replica (its first GPU, d · tp), when the program
  // has them all: links shared between GPUs make their timings differ.
  std::vector<const schedule::StepSpan*> replicas = {&sp};
  if (!built.symmetric && grad_replicas(sc.parallel) > 1) {
    for (int d = 1; d < grad_replicas(sc.parallel); ++d) {
      const auto gpu = static_cast<sim::GpuId>(d * sc.parallel.tp);
      std::size_t index = 0;
      for (const schedule::StepSpan& s : built.steps)
        if (s.gpu == gpu && index++ == measured) replicas.push_back(&s);
    }
    LYNX_CHECK(replicas.size() == static_cast<size_t>(grad_replicas(sc.parallel)), "fast mode: a replica's step {} missing", measured);
  }
  // Other stages' sends reach a step at a phase of it that the schedule sets: each relevant
  // channel is measured sending from kChannelPhases points of the step's compute time alone
  // (the compute-stream tasks that start first at 0, 1/k, 2/k... of it, k = kChannelPhases - 1),
  // and from the last point from which a send on idle links ends with the step's compute: a
  // send reaching the step's last collectives delays it by up to their whole length, which an
  // interpolation from 3/4 of the step down to nothing at its end misses.
  const TimePs t_marker = ex.task_start_ps[static_cast<size_t>(sp.marker)];
  TimePs alone_ps = 0;
  for (sim::TaskId i = sp.first_task; i < sp.end_task; ++i)
    if (prog.tasks[static_cast<size_t>(i)].stream == schedule::kCompute)
      alone_ps = std::max(alone_ps, ex.task_end_ps[static_cast<size_t>(i)] - t_marker);
  std::vector<size_t> relevant;
  std::vector<TimePs> idle_ps(channels.size(), 0);
  TimePs shortest_send_ps = -1;
  for (size_t c = 0; c < channels.size(); ++c)
    if (channels[c].from_stage != part.stage &&
        (channels[c].to_stage == part.stage || shares_collective_link(prog, topo, channels[c]))) {
      relevant.push_back(c);
      idle_ps[c] = run_beside(machine, sim::Program{}, topo, {}, channels[c], -1).sent_ps;
      shortest_send_ps = shortest_send_ps < 0 ? idle_ps[c] : std::min(shortest_send_ps, idle_ps[c]);
    }
  std::vector<TimePs> anchor_ps(kChannelPhases, 0);
  constexpr std::size_t kSpread = kChannelPhases - 1;  // phases spread over the step
  for (std::size_t k = 1; k < kChannelPhases; ++k)
    anchor_ps[k] = k < kSpread ? alone_ps * static_cast<TimePs>(k) / static_cast<TimePs>(kSpread)
                               : std::max(anchor_ps[k - 1], alone_ps - std::max<TimePs>(0, shortest_send_ps));
  // Per channel and phase: the compute ends and the transfers' extra time beside the step.
  std::vector<Beside> beside(channels.size() * kChannelPhases);
  for (size_t c : relevant)
    for (std::size_t k = 0; k < kChannelPhases; ++k) {
      beside[c * kChannelPhases + k] = run_beside(machine, prog, topo, replicas, channels[c], sp.marker, anchor_ps[k]);
      beside[c * kChannelPhases + k].sent_ps -= idle_ps[c];
    }
  for (size_t i = 0; i < prog.tasks.size(); ++i) prog.tasks[i].num_mem = num_mem[i];

  const sim::TaskId range_end = range.end;
  const auto start = [&](sim::TaskId id) { return ex.task_start_ps[static_cast<size_t>(id)]; };
  const auto end = [&](sim::TaskId id) { return ex.task_end_ps[static_cast<size_t>(id)]; };

  StepProfile p;
  p.static_bytes = prog.static_bytes_per_gpu.at(0);
  p.replication = built.replication;
  p.symmetric = built.symmetric;
  const TimePs t0 = start(sp.marker);
  p.pp_wait_recompute = sp.first_task < sp.marker;
  p.tail_end_ps = end(sp.compute_tail) - t0;
  if (sp.send >= 0) {
    p.sends = true;
    p.send_ps = end(sp.send) - start(sp.send);
  }
  if (measured > 0) {  // the step simulated after its predecessor: how long that one's send took
    const schedule::StepSpan* previous = nullptr;
    for (const schedule::StepSpan& s : built.steps)
      if (s.gpu == 0 && &s < range.span) previous = &s;
    if (previous && previous->send >= 0) p.previous_send_ps = end(previous->send) - start(previous->send);
  }
  TimePs dp_start = -1;
  const sim::TaskId optimizer_first = range.optimizer_first;
  for (sim::TaskId i = sp.first_task; i < range_end; ++i) {
    const sim::Task& t = prog.tasks[static_cast<size_t>(i)];
    p.end_ps = std::max(p.end_ps, end(i) - t0);
    if (t.stream == schedule::kCompute && i < sp.end_task) p.compute_end_ps = std::max(p.compute_end_ps, end(i) - t0);
    if (i >= optimizer_first) {
      p.optimizer_ps = std::max(p.optimizer_ps, end(i) - start(optimizer_first));
    } else if (t.stream == schedule::kDp) {
      p.has_dp = true;
      if (dp_start < 0) dp_start = start(i) - t0;
      p.dp_end_ps = std::max(p.dp_end_ps, end(i) - t0);
    }
    p.flops += built.task_flops[static_cast<size_t>(i)];
    if (t.kind != sim::TaskKind::kKernel) continue;
    const TimePs busy = end(i) - start(i);
    if (t.stream == schedule::kRecomputeStream) p.recompute_overlapped_ps += busy;
    if (t.stream != schedule::kCompute) continue;
    (t.category == sim::Category::kRecompute ? p.recompute_ps : p.compute_ps) += busy;
    if (busy > t.work_ps) p.contention_ps += busy - t.work_ps;
  }
  p.dp_start_ps = std::max<TimePs>(0, dp_start);
  const auto gaps = schedule::compute_stream_gaps(prog, ex, built.machine.gpus.size());
  // Windows: TP idle per layer pass of this step, and before its top layer's backward.
  const auto tp_idle_in = [&](sim::TaskId from, sim::TaskId to) {
    TimePs sum = 0;
    for (const schedule::IdleGap& gap : gaps[0])
      if (gap.next_task >= from && gap.next_task < to) sum += gap.tp_comm_ps;
    return sum;
  };
  const int first_layer = plan.stages[static_cast<size_t>(sp.step.chunk * sc.parallel.pp + part.stage)].first_layer;
  sim::TaskId top_first = sp.end_task;
  for (const schedule::LayerSpan& l : sp.step.forward ? built.layer_forward : built.layer_backward) {
    if (l.gpu != 0 || l.step_marker != sp.marker) continue;
    const auto index = static_cast<size_t>(l.layer - first_layer);
    if (p.layer_tp_idle_ps.size() <= index) p.layer_tp_idle_ps.resize(index + 1, 0);
    p.layer_tp_idle_ps[index] = tp_idle_in(l.first_task, l.end_task);
    top_first = std::min(top_first, l.first_task);
  }
  if (!sp.step.forward) p.head_tp_idle_ps = tp_idle_in(sp.marker + 1, top_first);
  for (const schedule::IdleGap& gap : gaps[0]) {
    if (gap.next_task <= sp.marker || gap.next_task >= range_end) continue;
    p.tp_exposed_ps += gap.tp_comm_ps;
    p.dp_exposed_ps += gap.dp_comm_ps;
    p.other_comm_ps += gap.other_comm_ps;
    if (p.pp_wait_recompute && gap.gate >= sp.first_task && gap.gate < sp.marker)
      p.recompute_wait_ps += gap.end_ps - gap.start_ps;
  }
  p.segments = activity(prog, ex, t0, t0 + p.compute_end_ps);
  p.channel_phase_ps = anchor_ps;
  p.channel_idle_send_ps = idle_ps;
  p.channel_delay_ps.resize(beside.size(), 0);
  p.channel_send_delay_ps.resize(beside.size(), 0);
  if (replicas.size() > 1) {
    for (const schedule::StepSpan* r : replicas) p.replica_compute_end_ps.push_back(compute_end_of(prog, ex, *r));
    // The step's own send: per replica, what the step's other traffic added to it (beyond the
    // replicas' sends together on idle links).
    const int vs = sp.step.chunk * sc.parallel.pp + part.stage;
    const int to_stage = (sp.step.forward ? vs + 1 : vs - 1 + sc.parallel.pp) % sc.parallel.pp;
    const auto own = std::find_if(channels.begin(), channels.end(),
                                  [&](const Channel& c) { return c.from_stage == part.stage && c.to_stage == to_stage; });
    if (sp.send >= 0 && own != channels.end()) {
      const std::vector<TimePs> alone = replica_sends_alone_ps(machine, topo, *own, grad_replicas(sc.parallel));
      for (size_t d = 0; d < replicas.size(); ++d)
        p.replica_send_extra_ps.push_back(
            std::max<TimePs>(0, end(replicas[d]->send) - start(replicas[d]->send) - alone[d]));
    }
    p.replica_channel_delay_ps.resize(beside.size() * replicas.size(), 0);
  }
  for (size_t i = 0; i < beside.size(); ++i)
    if (!beside[i].compute_end_ps.empty()) {
      p.channel_delay_ps[i] = std::max<TimePs>(0, beside[i].compute_end_ps[0] - p.compute_end_ps);
      p.channel_send_delay_ps[i] = std::max<TimePs>(0, beside[i].sent_ps);
      for (size_t d = 0; d < replicas.size() && replicas.size() > 1; ++d)
        p.replica_channel_delay_ps[i * replicas.size() + d] =
            std::max<TimePs>(0, beside[i].compute_end_ps[d] - p.replica_compute_end_ps[d]);
    }
  // Every replica delayed as replica 0: kept as channel_delay_ps alone (the composition then
  // charges every replica the same without going through the sends once per replica).
  bool alike = true;
  for (size_t i = 0; i < p.replica_channel_delay_ps.size() && alike; ++i)
    alike = p.replica_channel_delay_ps[i] == p.channel_delay_ps[i / replicas.size()];
  if (alike) p.replica_channel_delay_ps.clear();

  // Memory: every effect of the step's tasks in simulated order (start effects, then end).
  std::vector<std::tuple<TimePs, sim::TaskId, int, std::int64_t>> effects;
  for (sim::TaskId i = sp.first_task; i < range_end; ++i) {
    const sim::Task& t = prog.tasks[static_cast<size_t>(i)];
    for (std::uint32_t m = t.first_mem; m < t.first_mem + t.num_mem; ++m) {
      const sim::MemEffect& e = prog.mem[m];
      effects.emplace_back(e.at_end ? end(i) : start(i), i, e.at_end ? 1 : 0, e.bytes);
    }
  }
  std::sort(effects.begin(), effects.end());
  std::int64_t level = 0;
  for (const auto& e : effects) {
    level += std::get<3>(e);
    p.memory_peak_bytes = std::max(p.memory_peak_bytes, level);
  }
  p.memory_net_bytes = level;
  if (sc.hardware.host_model_on())
    p.host = measure_host_bound(sc, plan, topo, workload, part, measured, checked_add(ex.makespan_ps, 1));
  return p;
}

TimePs contention_delay_ps(const std::vector<Segment>& segments,
                           const std::vector<std::pair<TimePs, TimePs>>& externals,
                           double contention_factor) {
  if (externals.empty() || contention_factor <= 0) return 0;
  TimePs horizon = 0;
  for (const auto& [from, to] : externals) horizon = std::max(horizon, to);
  // Walk the step's isolated timeline in real time: while `n` external tasks run, its kernels
  // advance at (1 + c·comms) / (1 + c·(comms + n)) of their isolated rate.
  double real = 0, iso = 0;
  for (const Segment& s : segments) {
    if (real >= static_cast<double>(horizon)) break;
    double left = static_cast<double>(s.length_ps);
    while (left > 0) {
      int n = 0;
      double next_change = 1e300;
      for (const auto& [from, to] : externals) {
        const double f = static_cast<double>(from), t = static_cast<double>(to);
        if (f <= real && real < t) {
          ++n;
          next_change = std::min(next_change, t);
        } else if (f > real) {
          next_change = std::min(next_change, f);
        }
      }
      const double rate = (s.kernels == 0 || n == 0)
                              ? 1.0
                              : (1 + contention_factor * s.comms) / (1 + contention_factor * (s.comms + n));
      const double can = (next_change - real) * rate;
      if (can >= left) {
        real += left / rate;
        left = 0;
      } else {
        left -= can;
        real = next_change;
      }
      if (n == 0 && next_change >= 1e299) {
        real += left;
        left = 0;
      }
    }
    iso += static_cast<double>(s.length_ps);
  }
  return std::max<TimePs>(0, std::llround(real - iso));
}

}  // namespace lynx::fast
