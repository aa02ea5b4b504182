/// Chrome trace event JSON (loads in Perfetto and chrome://tracing). Deterministic: events are
/// written in a fixed order (track names, tasks by id, link flows by task, memory by GPU,
/// annotations), lanes are assigned by a fixed rule, and every number is an integer, an exact
/// fixed-point decimal or a double's shortest round-trip spelling, so equal inputs give equal bytes.
#include "sim/executor.hpp"
#include "sim/json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <numeric>
#include <ostream>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

namespace lynx::sim {
namespace {

const char* category_name(Category category) {
  switch (category) {
    case Category::kCompute: return "compute";
    case Category::kRecompute: return "recompute";
    case Category::kRecomputeOverlapped: return "recompute_overlapped";
    case Category::kTpComm: return "tp_comm";
    case Category::kPpComm: return "pp_comm";
    case Category::kDpComm: return "dp_comm";
    case Category::kOptimizer: return "optimizer";
    case Category::kOther: return "other";
    case Category::kCpComm: return "cp_comm";
  }
  return "other";
}

/// Writes `text` as a JSON string literal (quotes included); sim/json.hpp does the escaping.
void append_json_string(fmt::memory_buffer& out, std::string_view text) {
  const std::string quoted = json_string(text);
  out.append(std::string_view(quoted));
}

/// Picoseconds as microseconds with exactly 6 decimals (exact: 1 us = 1e6 ps).
void append_us(fmt::memory_buffer& out, TimePs ps) {
  if (ps < 0) {
    out.push_back('-');
    ps = -ps;
  }
  fmt::format_to(std::back_inserter(out), "{}.{:06}", ps / kPsPerUs, ps % kPsPerUs);
}

/// An interval on one of several tracks (a link, a GPU's annotations) that may need lanes.
struct Interval {
  std::size_t track = 0;
  TimePs start_ps = 0;
  TimePs end_ps = 0;
};

/// Lanes of `intervals` such that intervals on one lane of a track never overlap (they may
/// touch): greedy interval partitioning in order of (start, end, index), each interval taking
/// the lowest lane free at its start, so a track gets as many lanes as its peak concurrency.
/// Fills `lanes_per_track` (size `tracks`).
std::vector<std::uint32_t> assign_lanes(const std::vector<Interval>& intervals, std::size_t tracks,
                                        std::vector<std::uint32_t>& lanes_per_track) {
  std::vector<std::size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Interval& x = intervals[a];
    const Interval& y = intervals[b];
    if (x.track != y.track) return x.track < y.track;
    if (x.start_ps != y.start_ps) return x.start_ps < y.start_ps;
    if (x.end_ps != y.end_ps) return x.end_ps < y.end_ps;
    return a < b;
  });
  lanes_per_track.assign(tracks, 0);
  std::vector<std::uint32_t> lane(intervals.size(), 0);
  using Busy = std::pair<TimePs, std::uint32_t>;  // (end, lane), earliest end on top
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> free_lanes;
  std::size_t track = tracks;
  for (const std::size_t i : order) {
    const Interval& interval = intervals[i];
    if (interval.track != track) {  // a new track starts with no lanes
      track = interval.track;
      busy = {};
      free_lanes = {};
    }
    while (!busy.empty() && busy.top().first <= interval.start_ps) {
      free_lanes.push(busy.top().second);
      busy.pop();
    }
    std::uint32_t& count = lanes_per_track[track];
    if (free_lanes.empty()) {
      lane[i] = count++;
    } else {
      lane[i] = free_lanes.top();
      free_lanes.pop();
    }
    busy.emplace(interval.end_ps, lane[i]);
  }
  return lane;
}

/// First track id of each track's lanes when the lanes of all tracks are numbered in a row from
/// `first`.
std::vector<std::size_t> lane_bases(const std::vector<std::uint32_t>& lanes_per_track, std::size_t first) {
  std::vector<std::size_t> base(lanes_per_track.size());
  for (std::size_t t = 0; t < lanes_per_track.size(); ++t) {
    base[t] = first;
    first += lanes_per_track[t];
  }
  return base;
}

/// Name of lane `lane` of a track with `lanes` lanes: the track's name when it needs only one.
std::string lane_name(std::string_view track, std::uint32_t lane, std::uint32_t lanes) {
  return lanes == 1 ? std::string(track) : fmt::format("{} lane {}", track, lane);
}

/// One flow's slice on one link of its path.
struct LinkSlice {
  std::size_t task = 0;
  std::uint32_t flow = 0;
  LinkId link = 0;
};

class TraceWriter {
 public:
  TraceWriter(std::ostream& out, const Machine& machine, const Program& program, const ExecResult& result,
              const std::vector<TraceSpan>& annotations, const TraceOptions& options)
      : out_(out), machine_(machine), program_(program), result_(result), annotations_(annotations),
        options_(options) {}

  void write() {
    check_inputs();
    collect_link_slices();
    collect_annotations();
    buffer_.append(std::string_view("{\"traceEvents\":[\n"));
    write_track_names();
    write_run_metadata_event();
    write_tasks();
    write_link_flows();
    write_memory();
    write_annotations();
    buffer_.append(std::string_view("\n],\"displayTimeUnit\":\"ns\""));
    if (!options_.metadata.empty()) {
      buffer_.append(std::string_view(",\"metadata\":"));
      append_metadata_object();
    }
    buffer_.append(std::string_view("}\n"));
    flush();
  }

 private:
  void check_inputs() const {
    if (result_.task_start_ps.size() != program_.tasks.size() || result_.task_end_ps.size() != program_.tasks.size() ||
        result_.flow_end_ps.size() != program_.flows.size()) {
      fail(ErrorCode::kInternal, "trace: the result does not belong to this program ({} tasks, {} flows in the result; {} and {} in the program)",
           result_.task_start_ps.size(), result_.flow_end_ps.size(), program_.tasks.size(), program_.flows.size());
    }
    if (!options_.gpus.empty() && options_.gpus.size() != machine_.gpus.size())
      fail(ErrorCode::kInternal, "trace: the GPU selection has {} entries for {} GPUs", options_.gpus.size(), machine_.gpus.size());
    if (options_.from_ps > options_.to_ps) fail(ErrorCode::kInternal, "trace: the time window ends before it starts");
  }

  /// Whether GPU `gpu`'s tracks are written.
  bool gpu_kept(GpuId gpu) const {
    if (gpu < 0 || static_cast<std::size_t>(gpu) >= machine_.gpus.size()) fail(ErrorCode::kInternal, "trace: unknown GPU {}", gpu);
    return options_.gpus.empty() || options_.gpus[static_cast<std::size_t>(gpu)];
  }
  bool in_window(TimePs start_ps, TimePs end_ps) const {
    return end_ps >= options_.from_ps && start_ps <= options_.to_ps;
  }

  void begin_event() {
    if (!first_event_) buffer_.append(std::string_view(",\n"));
    first_event_ = false;
    if (buffer_.size() > (1u << 20)) flush();
  }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }
  auto inserter() { return std::back_inserter(buffer_); }

  std::string task_name(std::size_t t) const { return task_label(program_, static_cast<TaskId>(t)); }

  /// The link slices to write, in order of task, flow and path position, with their lanes.
  void collect_link_slices() {
    std::vector<Interval> intervals;
    for (std::size_t t = 0; t < program_.tasks.size(); ++t) {
      const Task& task = program_.tasks[t];
      const TimePs start = result_.task_start_ps[t];
      for (std::uint32_t k = 0; k < task.num_flows; ++k) {
        const std::uint32_t f = task.first_flow + k;
        const Flow& flow = program_.flows[f];
        const TimePs end = result_.flow_end_ps[f];
        if (flow.bytes == 0 || start < 0 || end < 0 || !gpu_kept(task.gpu) || !in_window(start, end)) continue;
        for (std::uint32_t l = 0; l < flow.num_links; ++l) {
          const LinkId link = program_.path_links[flow.first_link + l];
          if (link < 0 || static_cast<std::size_t>(link) >= machine_.links.size())
            fail(ErrorCode::kInternal, "trace: flow uses unknown link {}", link);
          link_slices_.push_back({t, f, link});
          intervals.push_back({static_cast<std::size_t>(link), start, end});
        }
      }
    }
    link_slice_lane_ = assign_lanes(intervals, machine_.links.size(), link_lanes_);
    link_lane_base_ = lane_bases(link_lanes_, 0);
  }

  /// Lanes of the annotations to write; their tracks follow each GPU's streams.
  void collect_annotations() {
    std::vector<Interval> intervals;
    for (std::size_t a = 0; a < annotations_.size(); ++a) {
      const TraceSpan& span = annotations_[a];
      if (span.gpu < 0 || static_cast<std::size_t>(span.gpu) >= machine_.gpus.size())
        fail(ErrorCode::kInternal, "trace: annotation '{}' on unknown GPU {}", span.name, span.gpu);
      if (!gpu_kept(span.gpu) || !in_window(span.start_ps, span.end_ps)) continue;
      kept_annotations_.push_back(a);
      intervals.push_back({static_cast<std::size_t>(span.gpu), span.start_ps, span.end_ps});
    }
    annotation_lane_ = assign_lanes(intervals, machine_.gpus.size(), annotation_lanes_);
  }

  void write_metadata_event(const char* what, std::size_t pid, const std::size_t* tid, std::string_view name) {
    begin_event();
    fmt::format_to(inserter(), "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{}", what, pid);
    if (tid != nullptr) fmt::format_to(inserter(), ",\"tid\":{}", *tid);
    buffer_.append(std::string_view(",\"args\":{\"name\":"));
    append_json_string(buffer_, name);
    buffer_.append(std::string_view("}}"));
  }
  /// Keeps lane tracks in their numeric order (viewers otherwise may sort by name).
  void write_sort_index(std::size_t pid, std::size_t tid) {
    begin_event();
    fmt::format_to(inserter(), "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
                   pid, tid, tid);
  }

  void write_track_names() {
    for (std::size_t g = 0; g < machine_.gpus.size(); ++g) {
      if (!gpu_kept(static_cast<GpuId>(g))) continue;
      const GpuDesc& gpu = machine_.gpus[g];
      write_metadata_event("process_name", g, nullptr, gpu.name.empty() ? fmt::format("gpu {}", g) : gpu.name);
      for (std::size_t s = 0; s < gpu.stream_names.size(); ++s) {
        write_metadata_event("thread_name", g, &s, gpu.stream_names[s]);
      }
      for (std::uint32_t lane = 0; lane < annotation_lanes_[g]; ++lane) {
        const std::size_t tid = gpu.stream_names.size() + lane;
        write_metadata_event("thread_name", g, &tid, lane_name("annotations", lane, annotation_lanes_[g]));
        if (annotation_lanes_[g] > 1) write_sort_index(g, tid);
      }
    }
    const std::size_t links_pid = machine_.gpus.size();
    bool any_link = false;
    for (std::size_t l = 0; l < machine_.links.size(); ++l) {
      if (link_lanes_[l] == 0) continue;
      if (!any_link) write_metadata_event("process_name", links_pid, nullptr, "links");
      any_link = true;
      for (std::uint32_t lane = 0; lane < link_lanes_[l]; ++lane) {
        const std::size_t tid = link_lane_base_[l] + lane;
        write_metadata_event("thread_name", links_pid, &tid, lane_name(machine_.links[l].name, lane, link_lanes_[l]));
        write_sort_index(links_pid, tid);
      }
    }
  }

  void append_metadata_object() {
    buffer_.push_back('{');
    for (std::size_t i = 0; i < options_.metadata.size(); ++i) {
      if (i > 0) buffer_.push_back(',');
      append_json_string(buffer_, options_.metadata[i].first);
      buffer_.push_back(':');
      append_json_string(buffer_, options_.metadata[i].second);
    }
    buffer_.push_back('}');
  }

  /// The metadata as an instant event of its own "lynxsim" process, for viewers that ignore
  /// the top-level object.
  void write_run_metadata_event() {
    if (options_.metadata.empty()) return;
    const std::size_t pid = machine_.gpus.size() + 1;
    const std::size_t tid = 0;
    write_metadata_event("process_name", pid, nullptr, "lynxsim");
    write_metadata_event("thread_name", pid, &tid, "run");
    begin_event();
    fmt::format_to(inserter(), "{{\"name\":\"lynxsim run\",\"cat\":\"metadata\",\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":0,\"ts\":", pid);
    append_us(buffer_, options_.from_ps);
    buffer_.append(std::string_view(",\"args\":"));
    append_metadata_object();
    buffer_.push_back('}');
  }

  void write_tasks() {
    for (std::size_t t = 0; t < program_.tasks.size(); ++t) {
      const Task& task = program_.tasks[t];
      const TimePs start = result_.task_start_ps[t];
      const TimePs end = result_.task_end_ps[t];
      if (start < 0 || end < 0) continue;  // never ran
      if (!gpu_kept(task.gpu) || !in_window(start, end)) continue;
      begin_event();
      buffer_.append(std::string_view("{\"name\":"));
      append_json_string(buffer_, task_name(t));
      fmt::format_to(inserter(), ",\"cat\":\"{}\"", category_name(task.category));
      if (task.kind == TaskKind::kMarker) {
        buffer_.append(std::string_view(",\"ph\":\"i\",\"s\":\"t\""));
      } else {
        buffer_.append(std::string_view(",\"ph\":\"X\""));
      }
      fmt::format_to(inserter(), ",\"pid\":{},\"tid\":{},\"ts\":", task.gpu, task.stream);
      append_us(buffer_, start);
      if (task.kind != TaskKind::kMarker) {
        buffer_.append(std::string_view(",\"dur\":"));
        append_us(buffer_, end - start);
      }
      fmt::format_to(inserter(), ",\"args\":{{\"task\":{}", t);
      if (task.group >= 0) fmt::format_to(inserter(), ",\"group\":{}", task.group);
      buffer_.append(std::string_view("}}"));
    }
  }

  void write_link_flows() {
    const std::size_t links_pid = machine_.gpus.size();
    for (std::size_t i = 0; i < link_slices_.size(); ++i) {
      const LinkSlice& slice = link_slices_[i];
      const Task& task = program_.tasks[slice.task];
      const Flow& flow = program_.flows[slice.flow];
      const TimePs start = result_.task_start_ps[slice.task];
      const TimePs end = result_.flow_end_ps[slice.flow];
      const std::size_t tid = link_lane_base_[static_cast<std::size_t>(slice.link)] + link_slice_lane_[i];
      begin_event();
      buffer_.append(std::string_view("{\"name\":"));
      append_json_string(buffer_, task_name(slice.task));
      fmt::format_to(inserter(), ",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":",
                     category_name(task.category), links_pid, tid);
      append_us(buffer_, start);
      buffer_.append(std::string_view(",\"dur\":"));
      append_us(buffer_, end - start);
      const std::uint64_t payload = flow.payload_bytes == 0 ? flow.bytes : flow.payload_bytes;
      fmt::format_to(inserter(), ",\"args\":{{\"task\":{},\"flow\":{},\"bytes\":{}", slice.task, slice.flow, payload);
      // The links moved ceil(bytes / efficiency); the efficiency is shown only where it applies.
      if (flow.efficiency != 1.0) fmt::format_to(inserter(), ",\"efficiency\":{}", flow.efficiency);
      buffer_.append(std::string_view("}}"));
    }
  }

  void write_memory_sample(std::size_t gpu, TimePs time_ps, std::int64_t bytes) {
    begin_event();
    fmt::format_to(inserter(), "{{\"name\":\"memory_bytes\",\"cat\":\"memory\",\"ph\":\"C\",\"pid\":{},\"ts\":", gpu);
    append_us(buffer_, time_ps);
    fmt::format_to(inserter(), ",\"args\":{{\"bytes\":{}}}}}", bytes);
  }

  void write_memory() {
    for (std::size_t g = 0; g < result_.memory_timeline.size() && g < machine_.gpus.size(); ++g) {
      if (!gpu_kept(static_cast<GpuId>(g))) continue;
      const auto& samples = result_.memory_timeline[g];
      // Samples are in time order; the last one before the window gives its starting value.
      const auto first = std::lower_bound(samples.begin(), samples.end(), options_.from_ps,
                                          [](const auto& sample, TimePs t) { return sample.first < t; });
      if (first != samples.begin()) write_memory_sample(g, options_.from_ps, std::prev(first)->second);
      for (auto it = first; it != samples.end() && it->first <= options_.to_ps; ++it)
        write_memory_sample(g, it->first, it->second);
    }
  }

  void write_annotations() {
    for (std::size_t k = 0; k < kept_annotations_.size(); ++k) {
      const TraceSpan& span = annotations_[kept_annotations_[k]];
      begin_event();
      buffer_.append(std::string_view("{\"name\":"));
      append_json_string(buffer_, span.name);
      fmt::format_to(inserter(), ",\"cat\":\"annotation\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", span.gpu,
                     machine_.gpus[static_cast<std::size_t>(span.gpu)].stream_names.size() + annotation_lane_[k]);
      append_us(buffer_, span.start_ps);
      buffer_.append(std::string_view(",\"dur\":"));
      append_us(buffer_, span.end_ps - span.start_ps);
      buffer_.append(std::string_view("}"));
    }
  }

  std::ostream& out_;
  const Machine& machine_;
  const Program& program_;
  const ExecResult& result_;
  const std::vector<TraceSpan>& annotations_;
  const TraceOptions& options_;
  fmt::memory_buffer buffer_;
  std::vector<LinkSlice> link_slices_;
  std::vector<std::uint32_t> link_slice_lane_;  ///< per link slice
  std::vector<std::uint32_t> link_lanes_;       ///< per link (0: not in the trace)
  std::vector<std::size_t> link_lane_base_;     ///< per link: tid of its lane 0
  std::vector<std::size_t> kept_annotations_;   ///< indices into annotations_
  std::vector<std::uint32_t> annotation_lane_;  ///< per kept annotation
  std::vector<std::uint32_t> annotation_lanes_; ///< per GPU
  bool first_event_ = true;
};

}  // namespace

void write_chrome_trace(std::ostream& out, const Machine& machine, const Program& program, const ExecResult& result,
                        const std::vector<TraceSpan>& annotations, const TraceOptions& options) {
  TraceWriter(out, machine, program, result, annotations, options).write();
}

}  // namespace lynx::sim
