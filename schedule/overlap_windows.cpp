#include "schedule/overlap_windows.hpp"

#include "common/statistics.hpp"

#include <algorithm>
#include <optional>
#include <map>
#include <tuple>
#include <utility>

namespace lynx::schedule {

namespace {

/// The previous task on the same (gpu, stream) of every task, -1 for the first: stream order
/// is a dependency the program does not list.
std::vector<sim::TaskId> stream_predecessors(const sim::Program& prog) {
  size_t gpus = 0, streams = 0;
  for (const sim::Task& t : prog.tasks) {
    gpus = std::max(gpus, static_cast<size_t>(t.gpu) + 1);
    streams = std::max(streams, static_cast<size_t>(t.stream) + 1);
  }
  std::vector<sim::TaskId> last(gpus * streams, -1);
  std::vector<sim::TaskId> prev(prog.tasks.size(), -1);
  for (size_t i = 0; i < prog.tasks.size(); ++i) {
    const sim::Task& t = prog.tasks[i];
    const size_t slot = static_cast<size_t>(t.gpu) * streams + static_cast<size_t>(t.stream);
    prev[i] = std::exchange(last[slot], static_cast<sim::TaskId>(i));
  }
  return prev;
}

/// Fills an idle gap's communication fields (rule at compute_stream_gaps).
class GapCommunication {
 public:
  /// Stream predecessors are the built program's, read like dependencies (sim::FullProgram).
  GapCommunication(const sim::FullProgram& prog, const sim::ExecResult& ex)
      : prog_(prog), ex_(ex), stream_prev_(stream_predecessors(prog.built())) {}

  /// `next`: the compute-stream task the gap precedes (built task `source`, `periods` on).
  /// `copies` (a copy of an omitted period, or null): lowered to how many of the following
  /// copies have this gap's attribution, moved on by one period each (repeats()).
  void attribute(sim::TaskId source, std::int64_t periods, IdleGap& gap, std::int64_t* copies = nullptr) {
    chain_.clear();
    stack_.clear();
    const sim::Task& next = prog_.built().tasks[static_cast<size_t>(source)];
    push_deps(source, periods, copies);
    while (!stack_.empty()) {
      const sim::TaskId id = stack_.back();
      stack_.pop_back();
      const sim::FullProgram::Source from = prog_.source(id);
      const sim::Task& t = prog_.built().tasks[static_cast<size_t>(from.task)];
      // The walk of a later copy pops this task's copy and decides the same (the same task
      // record, its times one period on per copy).
      if (copies != nullptr)
        *copies = from.copy ? std::min({*copies, prog_.omitted_periods() - from.periods, repeats(id, t.gpu)}) : 0;
      if (t.kind != sim::TaskKind::kComm) continue;
      const TimePs end_ps = prog_.end_ps(ex_, id, t.gpu);
      if (end_ps <= gap.start_ps) continue;
      if (std::any_of(chain_.begin(), chain_.end(), [&](const Link& l) { return l.id == id; })) continue;
      chain_.push_back({id, prog_.start_ps(ex_, id, t.gpu), end_ps, t.gpu, t.category});
      const sim::TaskId before = stream_prev_[static_cast<size_t>(from.task)];
      if (before >= 0) push(before, from.periods, copies);
      if (t.gpu == next.gpu) push_deps(from.task, from.periods, copies);
    }
    std::sort(chain_.begin(), chain_.end(),
              [](const Link& a, const Link& b) { return std::pair(a.start_ps, a.id) < std::pair(b.start_ps, b.id); });
    // Equal starts are ordered by id, which copies on GPUs of different periods could swap.
    if (copies != nullptr)
      for (size_t k = 1; k < chain_.size(); ++k)
        if (chain_[k - 1].start_ps == chain_[k].start_ps &&
            prog_.period_tasks(chain_[k - 1].gpu) != prog_.period_tasks(chain_[k].gpu))
          *copies = 0;
    TimePs covered = gap.start_ps;
    for (const Link& link : chain_) {
      const TimePs from = std::max(covered, link.start_ps);
      const TimePs to = std::min(link.end_ps, gap.end_ps);
      if (to <= from) continue;
      covered = to;
      slot(gap, link.category) += to - from;
      gap.comm_in_flight_ps += to - from;
    }
  }

  /// How many copies on full task `id` of `gpu` (its copies one period apart) all start and
  /// end one period after the one before (sim::ExecResult::periodic_tasks).
  std::int64_t repeats(sim::TaskId id, sim::GpuId gpu) const {
    if (static_cast<size_t>(gpu) >= ex_.periodic_tasks.size()) return 0;
    const sim::ExecResult::PeriodicRange& r = ex_.periodic_tasks[static_cast<size_t>(gpu)];
    const std::int64_t d = r.period_tasks;
    if (d <= 0 || d != prog_.period_tasks(gpu) || id + d < r.first || id + d >= r.end) return 0;
    return (r.end - 1 - id) / d;
  }

 private:
  /// Pushes the full id of built task `task` as seen `periods` periods on; with `copies`, the
  /// next copy must push it one period on (a dependency that moves with the periods).
  void push(sim::TaskId task, std::int64_t periods, std::int64_t* copies) {
    const sim::TaskId id = prog_.full_id(task, periods);
    stack_.push_back(id);
    if (copies != nullptr &&
        prog_.full_id(task, periods + 1) != id + prog_.period_tasks(prog_.built().tasks[static_cast<size_t>(task)].gpu))
      *copies = 0;
  }
  void push_deps(sim::TaskId source, std::int64_t periods, std::int64_t* copies) {
    const sim::Task& t = prog_.built().tasks[static_cast<size_t>(source)];
    for (std::uint32_t k = 0; k < t.num_deps; ++k) push(prog_.built().deps[t.first_dep + k], periods, copies);
  }
  static TimePs& slot(IdleGap& gap, sim::Category category) {
    switch (category) {
      // Context parallelism's ring transfers are, like TP collectives, the communication
      // inside a layer's pass: their waits are the same kind of window.
      case sim::Category::kTpComm:
      case sim::Category::kCpComm: return gap.tp_comm_ps;
      case sim::Category::kPpComm: return gap.pp_comm_ps;
      case sim::Category::kDpComm: return gap.dp_comm_ps;
      default: return gap.other_comm_ps;
    }
  }

  const sim::FullProgram& prog_;
  const sim::ExecResult& ex_;
  std::vector<sim::TaskId> stream_prev_;
  /// A communication task of the gap's chain, with what attributing it reads.
  struct Link {
    sim::TaskId id;
    TimePs start_ps, end_ps;
    sim::GpuId gpu;
    sim::Category category;
  };
  std::vector<Link> chain_;  // scratch, reused across gaps
  std::vector<sim::TaskId> stack_;
};

}  // namespace

std::vector<std::vector<IdleGap>> compute_stream_gaps(const sim::Program& prog,
                                                      const sim::ExecResult& ex, size_t gpus) {
  return compute_stream_gaps(sim::FullProgram(prog), ex, gpus);
}

std::vector<std::vector<IdleGap>> compute_stream_gaps(const sim::FullProgram& prog,
                                                      const sim::ExecResult& ex, size_t gpus) {
  std::vector<std::vector<IdleGap>> gaps(gpus);
  for_each_stream_gap(prog, ex, gpus, [&](size_t gpu, const IdleGap& gap) { gaps[gpu].push_back(gap); });
  return gaps;
}

void for_each_stream_gap(const sim::FullProgram& prog, const sim::ExecResult& ex, size_t gpus,
                         const std::function<void(size_t gpu, const IdleGap& gap)>& visit) {
  std::vector<TimePs> prev_end(gpus, 0);
  std::vector<sim::TaskId> last_compute(gpus, -1);  // the compute-stream task prev_end is the end of
  GapCommunication communication(prog, ex);
  const std::vector<sim::Task>& tasks = prog.built().tasks;
  // The copies of a compressed program's omitted periods, one run per copy (sim::FullProgram):
  // where a copy's compute-stream tasks, their predecessors and every task their gaps' walks
  // visit repeat one period on (their copies' times the period later, the same records,
  // dependencies moving with the periods), the next copies' gaps are this copy's moved on:
  // copied, not walked again. Per GPU: the gaps of the copy last walked, in order.
  struct Copied {
    std::int64_t walked = 0;  ///< the copy (Run::periods) they were taken from
    std::int64_t until = -1;  ///< the last copy they hold for
    std::vector<IdleGap> gaps;
    sim::TaskId last_compute = -1;  ///< offset in the run of its last compute-stream task
  };
  std::vector<Copied> copied(gpus);
  for (const sim::FullProgram::Run& run : prog.runs()) {
    if (run.count == 0) continue;
    const auto gpu = static_cast<size_t>(tasks[static_cast<size_t>(run.built_first)].gpu);  // of a copy
    Copied& c = copied[gpu];
    if (run.copy && run.periods <= c.until) {
      const std::int64_t moved = run.periods - c.walked;
      for (IdleGap g : c.gaps) {
        g.start_ps += moved * ex.period_ps;
        g.end_ps += moved * ex.period_ps;
        g.next_task = static_cast<sim::TaskId>(g.next_task + moved * run.count);
        if (g.gate >= 0) g.gate = static_cast<sim::TaskId>(g.gate + moved * prog.period_tasks(prog.task(g.gate).gpu));
        visit(gpu, g);
      }
      if (c.last_compute >= 0) {
        last_compute[gpu] = run.full_first + c.last_compute;
        prev_end[gpu] = std::max(prev_end[gpu], prog.end_ps(ex, last_compute[gpu], static_cast<sim::GpuId>(gpu)));
      }
      continue;
    }
    // Copies after this one its gaps hold for (none unless this run is a copy).
    std::int64_t copies = run.copy ? prog.omitted_periods() - run.periods : 0;
    if (run.copy) {
      c.gaps.clear();
      c.last_compute = -1;
    }
    for (sim::TaskId k = 0; k < run.count; ++k) {
      const sim::TaskId id = run.full_first + k;
      const sim::TaskId source = run.built_first + k;
      const sim::Task& t = tasks[static_cast<size_t>(source)];
      if (t.stream != kCompute) continue;
      const auto on = static_cast<size_t>(t.gpu);  // a complete program's one run spans every GPU
      if (copies > 0) {
        // The decision "gap or not" compares this task's start with its predecessor's end.
        const sim::TaskId before = last_compute[on];
        copies = before >= 0 && prog.source(before).copy
                     ? std::min({copies, communication.repeats(id, t.gpu), communication.repeats(before, t.gpu)})
                     : 0;
      }
      const TimePs start = prog.start_ps(ex, id, t.gpu);
      if (start > prev_end[on]) {
        IdleGap g;
        g.start_ps = prev_end[on];
        g.end_ps = start;
        g.next_task = id;
        TimePs gate_end = 0;
        for (std::uint32_t n = 0; n < t.num_deps; ++n) {
          const sim::TaskId built_dep = prog.built().deps[t.first_dep + n];
          const sim::TaskId dep = prog.full_id(built_dep, run.periods);
          const TimePs dep_end = prog.end_ps(ex, dep, tasks[static_cast<size_t>(built_dep)].gpu);
          if (g.gate < 0 || dep_end > gate_end) {
            g.gate = dep;
            gate_end = dep_end;
          }
        }
        communication.attribute(source, run.periods, g, copies > 0 ? &copies : nullptr);
        visit(on, g);
        if (run.copy) c.gaps.push_back(g);
      }
      prev_end[on] = std::max(prev_end[on], prog.end_ps(ex, id, t.gpu));
      last_compute[on] = id;
      if (run.copy) c.last_compute = k;
    }
    c.walked = run.periods;
    c.until = run.copy ? run.periods + copies : -1;
  }
  for (size_t g = 0; g < gpus; ++g) {
    if (ex.makespan_ps <= prev_end[g]) continue;
    IdleGap tail;
    tail.start_ps = prev_end[g];
    tail.end_ps = ex.makespan_ps;
    visit(g, tail);
  }
}

namespace {

/// Compute-stream kernels and communication tasks of every GPU, for window timelines.
class Activity {
 public:
  Activity(const sim::Program& prog, const sim::ExecResult& ex, size_t gpus)
      : prog_(prog), ex_(ex), stream_prev_(stream_predecessors(prog)), kernels_(gpus), comms_(gpus),
        longest_comm_(gpus, 0) {
    for (size_t i = 0; i < prog.tasks.size(); ++i) {
      const sim::Task& t = prog.tasks[i];
      const auto g = static_cast<size_t>(t.gpu);
      const std::pair<TimePs, TimePs> span{ex.task_start_ps[i], ex.task_end_ps[i]};
      if (t.kind == sim::TaskKind::kComm) {
        comms_[g].push_back(span);
        longest_comm_[g] = std::max(longest_comm_[g], span.second - span.first);
      } else if (t.kind == sim::TaskKind::kKernel && t.stream == kCompute && span.second > span.first) {
        kernels_[g].push_back(span);
      }
    }
    for (auto& v : kernels_) std::sort(v.begin(), v.end());
    for (auto& v : comms_) std::sort(v.begin(), v.end());
  }

  /// Where the builder issues an overlapped recompute in [first, end): the end of the
  /// compute-stream task before the first compute-stream task that waits on a communication
  /// task; -1 when none waits.
  TimePs window_start(sim::TaskId first, sim::TaskId end) const {
    for (sim::TaskId i = first; i < end; ++i) {
      const sim::Task& t = prog_.tasks[static_cast<size_t>(i)];
      if (t.stream != kCompute) continue;
      for (std::uint32_t d = t.first_dep; d < t.first_dep + t.num_deps; ++d) {
        if (prog_.tasks[static_cast<size_t>(prog_.deps[d])].kind != sim::TaskKind::kComm) continue;
        const sim::TaskId before = stream_prev_[static_cast<size_t>(i)];
        return before < 0 ? ex_.task_start_ps[static_cast<size_t>(i)] : end_of(before);
      }
    }
    return -1;
  }
  /// The end of the last compute-stream task in [first, end).
  TimePs compute_end(sim::TaskId first, sim::TaskId end) const {
    TimePs last = 0;
    for (sim::TaskId i = first; i < end; ++i)
      if (prog_.tasks[static_cast<size_t>(i)].stream == kCompute) last = std::max(last, end_of(i));
    return last;
  }
  TimePs end_of(sim::TaskId id) const { return ex_.task_end_ps[static_cast<size_t>(id)]; }
  TimePs start_of(sim::TaskId id) const { return ex_.task_start_ps[static_cast<size_t>(id)]; }
  sim::TaskId stream_prev(sim::TaskId id) const { return stream_prev_[static_cast<size_t>(id)]; }

  /// GPU `gpu`'s timeline over [from, to): constant stretches of (compute kernel running,
  /// communication tasks in flight).
  sim::WindowProfile profile(sim::GpuId gpu, TimePs from, TimePs to, double contention) const {
    sim::WindowProfile w;
    w.contention_factor = contention;
    if (from < 0 || to <= from) return w;
    const auto g = static_cast<size_t>(gpu);
    const auto& kernels = kernels_[g];
    const auto& comms = comms_[g];
    auto first_kernel = std::lower_bound(kernels.begin(), kernels.end(), std::pair<TimePs, TimePs>{from, 0});
    if (first_kernel != kernels.begin()) --first_kernel;  // one may have started before `from`
    auto first_comm = std::lower_bound(comms.begin(), comms.end(),
                                       std::pair<TimePs, TimePs>{from - longest_comm_[g], 0});
    std::vector<TimePs> cuts{from, to};
    std::vector<std::pair<TimePs, TimePs>> k, c;
    for (auto it = first_kernel; it != kernels.end() && it->first < to; ++it)
      if (it->second > from) k.push_back(*it);
    for (auto it = first_comm; it != comms.end() && it->first < to; ++it)
      if (it->second > from) c.push_back(*it);
    for (const auto* v : {&k, &c})
      for (const auto& [a, b] : *v) {
        if (a > from && a < to) cuts.push_back(a);
        if (b > from && b < to) cuts.push_back(b);
      }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const TimePs at = cuts[i];
      auto covers = [at](const std::pair<TimePs, TimePs>& s) { return s.first <= at && at < s.second; };
      sim::WindowSegment seg{cuts[i + 1] - at, std::any_of(k.begin(), k.end(), covers),
                             static_cast<int>(std::count_if(c.begin(), c.end(), covers))};
      if (!w.segments.empty() && w.segments.back().compute_busy == seg.compute_busy &&
          w.segments.back().comm == seg.comm)
        w.segments.back().duration_ps += seg.duration_ps;
      else
        w.segments.push_back(seg);
    }
    return w;
  }

 private:
  const sim::Program& prog_;
  const sim::ExecResult& ex_;
  std::vector<sim::TaskId> stream_prev_;
  std::vector<std::vector<std::pair<TimePs, TimePs>>> kernels_, comms_;  // per GPU, by start
  std::vector<TimePs> longest_comm_;
};

/// A window sample: its capacity (what the medians are of) and its timeline.
struct Sample {
  TimePs capacity_ps = 0;
  sim::WindowProfile profile;
};

/// The upper-median sample by capacity (the middle one of an odd count).
const Sample& upper_median(std::vector<const Sample*> v) {
  std::sort(v.begin(), v.end(), [](const Sample* a, const Sample* b) { return a->capacity_ps < b->capacity_ps; });
  return *v[v.size() / 2];
}


/// Median window capacity; 0 when a layer has no window sample.
TimePs median_or_zero(std::vector<TimePs> v) { return v.empty() ? 0 : median(std::move(v)); }

/// Idle time on TP communication before the compute-stream tasks of [first, end).
class TpIdle {
 public:
  TpIdle(const BuiltProgram& built, const sim::ExecResult& exec) {
    for (const auto& per_gpu : compute_stream_gaps(built.program, exec, built.machine.gpus.size()))
      for (const IdleGap& gap : per_gpu)
        if (gap.next_task >= 0) gap_before_[gap.next_task] = gap;
  }
  TimePs in(sim::TaskId first, sim::TaskId end) const {
    TimePs sum = 0;
    for (auto it = gap_before_.lower_bound(first); it != gap_before_.end() && it->first < end; ++it)
      sum += it->second.tp_comm_ps;
    return sum;
  }
  /// The whole idle gap before `task` (0 if none).
  TimePs gap_before(sim::TaskId task) const {
    const auto it = gap_before_.find(task);
    return it == gap_before_.end() ? 0 : it->second.end_ps - it->second.start_ps;
  }

 private:
  std::map<sim::TaskId, IdleGap> gap_before_;  // by the task each gap precedes
};

/// Every backward window sample of the baseline (rule at measure_window_capacity), with its
/// timeline when `timelines`.
struct BackwardSamples {
  int virtual_stages = 0;
  std::map<int, std::pair<int, int>> layer_range;              // vs -> (min layer, max layer)
  std::map<std::pair<int, int>, std::vector<Sample>> of_layer;  // (vs, layer) -> one per micro-batch
};

BackwardSamples backward_samples(const BuiltProgram& built, const sim::ExecResult& exec, bool timelines) {
  const TpIdle idle(built, exec);
  std::optional<Activity> activity;
  if (timelines) activity.emplace(built.program, exec, built.machine.gpus.size());
  BackwardSamples out;
  for (const LayerSpan& s : built.layer_backward) {
    out.virtual_stages = std::max(out.virtual_stages, s.virtual_stage + 1);
    auto [it, inserted] = out.layer_range.try_emplace(s.virtual_stage, s.layer, s.layer);
    it->second.first = std::min(it->second.first, s.layer);
    it->second.second = std::max(it->second.second, s.layer);
  }
  auto timeline = [&](sim::GpuId gpu, TimePs from, TimePs to) {
    if (!activity) return sim::WindowProfile{};
    return activity->profile(gpu, from, to, built.machine.gpus[static_cast<size_t>(gpu)].contention_factor);
  };
  for (const LayerSpan& s : built.layer_backward) {
    const auto [lowest, highest] = out.layer_range[s.virtual_stage];
    // The backward of layer s.layer is the window of the layer below it.
    if (s.layer > lowest)
      out.of_layer[{s.virtual_stage, s.layer - 1}].push_back(
          {idle.in(s.first_task, s.end_task),
           activity ? timeline(s.gpu, activity->window_start(s.first_task, s.end_task),
                               activity->compute_end(s.first_task, s.end_task))
                    : sim::WindowProfile{}});
    if (s.layer == highest) {
      // Top layer: the idle wait before its backward step (the step marker is the first
      // compute task of the step), plus the idle on TP communication of anything before it in
      // the step (the LM head's backward on the last stage). Its recompute starts at the end
      // of the previous step's compute, or on the last stage where the head first waits.
      Sample top{idle.gap_before(s.step_marker) + idle.in(s.step_marker + 1, s.first_task), {}};
      if (activity) {
        const bool last_vs = s.virtual_stage == out.virtual_stages - 1;
        const sim::TaskId before = activity->stream_prev(s.step_marker);
        const TimePs from = last_vs       ? activity->window_start(s.step_marker + 1, s.first_task)
                            : before >= 0 ? activity->end_of(before)
                                          : activity->start_of(s.step_marker);
        top.profile = timeline(s.gpu, from, activity->start_of(s.first_task));
      }
      out.of_layer[{s.virtual_stage, s.layer}].push_back(std::move(top));
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<TimePs>> measure_window_capacity(const BuiltProgram& built,
                                                         const sim::ExecResult& exec) {
  const BackwardSamples samples = backward_samples(built, exec, false);
  std::vector<std::vector<TimePs>> capacity(static_cast<size_t>(samples.virtual_stages));
  for (const auto& [vs, range] : samples.layer_range) {
    auto& c = capacity[static_cast<size_t>(vs)];
    for (int layer = range.first; layer <= range.second; ++layer) {
      std::vector<TimePs> v;
      if (const auto it = samples.of_layer.find({vs, layer}); it != samples.of_layer.end())
        for (const Sample& x : it->second) v.push_back(x.capacity_ps);
      c.push_back(median_or_zero(std::move(v)));
    }
  }
  return capacity;
}

std::vector<TimePs> measure_forward_window_capacity(const BuiltProgram& built,
                                                   const sim::ExecResult& exec) {
  const TpIdle idle(built, exec);
  std::map<int, std::vector<TimePs>> samples;
  int virtual_stages = 0;
  for (const LayerSpan& s : built.layer_forward) {
    virtual_stages = std::max(virtual_stages, s.virtual_stage + 1);
    samples[s.virtual_stage].push_back(idle.in(s.first_task, s.end_task));
  }
  std::vector<TimePs> capacity(static_cast<size_t>(virtual_stages), 0);
  for (auto& [vs, v] : samples) capacity[static_cast<size_t>(vs)] = median_or_zero(v);
  return capacity;
}

std::vector<WindowProfiles> measure_window_profiles(const BuiltProgram& built, const sim::ExecResult& exec) {
  const sim::Program& prog = built.program;
  BackwardSamples backward = backward_samples(built, exec, true);
  const Activity activity(prog, exec, built.machine.gpus.size());
  const TpIdle idle(built, exec);
  auto contention = [&](sim::GpuId g) { return built.machine.gpus[static_cast<size_t>(g)].contention_factor; };
  const int virtual_stages = backward.virtual_stages;
  auto& layer_range = backward.layer_range;
  auto& samples = backward.of_layer;
  std::vector<WindowProfiles> out(static_cast<size_t>(virtual_stages));
  for (const auto& [vs, range] : layer_range) {
    std::vector<const Sample*> inner;
    for (int layer = range.first; layer <= range.second; ++layer) {
      const auto& v = samples[{vs, layer}];
      if (v.empty()) continue;
      std::vector<const Sample*> per_mb;
      for (const Sample& x : v) per_mb.push_back(&x);
      const Sample& chosen = upper_median(per_mb);
      if (layer == range.second)
        out[static_cast<size_t>(vs)].top = chosen.profile;
      else
        inner.push_back(&chosen);
    }
    out[static_cast<size_t>(vs)].inner = inner.empty() ? out[static_cast<size_t>(vs)].top : upper_median(inner).profile;
  }
  std::map<int, std::vector<Sample>> forward;
  for (const LayerSpan& s : built.layer_forward)
    forward[s.virtual_stage].push_back(
        {idle.in(s.first_task, s.end_task),
         activity.profile(s.gpu, activity.window_start(s.first_task, s.end_task),
                          activity.compute_end(s.first_task, s.end_task), contention(s.gpu))});
  for (const auto& [vs, v] : forward) {
    if (static_cast<size_t>(vs) >= out.size() || v.empty()) continue;
    std::vector<const Sample*> all;
    for (const Sample& x : v) all.push_back(&x);
    out[static_cast<size_t>(vs)].forward = upper_median(all).profile;
  }
  return out;
}

std::vector<sim::TraceSpan> window_annotations(const BuiltProgram& built, const sim::ExecResult& exec) {
  std::vector<sim::TraceSpan> spans;
  const auto gaps = compute_stream_gaps(built.program, exec, built.machine.gpus.size());
  for (size_t g = 0; g < gaps.size(); ++g) {
    for (const IdleGap& gap : gaps[g]) {
      if (gap.comm_in_flight_ps <= 0) continue;
      const auto cat = built.program.tasks[static_cast<size_t>(gap.gate)].category;
      const char* name = cat == sim::Category::kTpComm   ? "tp window"
                         : cat == sim::Category::kPpComm ? "pp window"
                         : cat == sim::Category::kDpComm ? "dp window"
                                                         : "comm window";
      spans.push_back({static_cast<sim::GpuId>(g), name, gap.end_ps - gap.comm_in_flight_ps, gap.end_ps});
    }
  }
  return spans;
}

}  // namespace lynx::schedule
