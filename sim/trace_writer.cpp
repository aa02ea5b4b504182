/// Chrome trace event JSON (loads in Perfetto and chrome://tracing). Deterministic: events are
/// written in a fixed order (metadata, tasks by id, link flows by task, memory by GPU) and every
/// number is an integer or an exact fixed-point decimal, so equal inputs give equal bytes.
#include "sim/executor.hpp"
#include "sim/json.hpp"

#include <fmt/format.h>

#include <iterator>
#include <ostream>
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

class TraceWriter {
 public:
  TraceWriter(std::ostream& out, const Machine& machine, const Program& program, const ExecResult& result,
              const std::vector<TraceSpan>& annotations)
      : out_(out), machine_(machine), program_(program), result_(result), annotations_(annotations) {}

  void write() {
    check_sizes();
    buffer_.append(std::string_view("{\"traceEvents\":[\n"));
    write_metadata();
    write_tasks();
    write_link_flows();
    write_memory();
    write_annotations();
    buffer_.append(std::string_view("\n],\"displayTimeUnit\":\"ns\"}\n"));
    flush();
  }

 private:
  void check_sizes() const {
    if (result_.task_start_ps.size() != program_.tasks.size() || result_.task_end_ps.size() != program_.tasks.size() ||
        result_.flow_end_ps.size() != program_.flows.size()) {
      fail("trace: the result does not belong to this program ({} tasks, {} flows in the result; {} and {} in the program)",
           result_.task_start_ps.size(), result_.flow_end_ps.size(), program_.tasks.size(), program_.flows.size());
    }
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

  void write_metadata_event(const char* what, std::size_t pid, const std::size_t* tid, std::string_view name) {
    begin_event();
    fmt::format_to(inserter(), "{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{}", what, pid);
    if (tid != nullptr) fmt::format_to(inserter(), ",\"tid\":{}", *tid);
    buffer_.append(std::string_view(",\"args\":{\"name\":"));
    append_json_string(buffer_, name);
    buffer_.append(std::string_view("}}"));
  }

  void write_metadata() {
    for (std::size_t g = 0; g < machine_.gpus.size(); ++g) {
      const GpuDesc& gpu = machine_.gpus[g];
      write_metadata_event("process_name", g, nullptr, gpu.name.empty() ? fmt::format("gpu {}", g) : gpu.name);
      for (std::size_t s = 0; s < gpu.stream_names.size(); ++s) {
        write_metadata_event("thread_name", g, &s, gpu.stream_names[s]);
      }
      const std::size_t annotation_tid = gpu.stream_names.size();
      if (!annotations_.empty()) write_metadata_event("thread_name", g, &annotation_tid, "annotations");
    }
    used_links_.assign(machine_.links.size(), false);
    for (const Task& task : program_.tasks) {
      for (std::uint32_t k = 0; k < task.num_flows; ++k) {
        const Flow& flow = program_.flows[task.first_flow + k];
        if (flow.bytes == 0) continue;
        for (std::uint32_t l = 0; l < flow.num_links; ++l) {
          const LinkId link = program_.path_links[flow.first_link + l];
          if (link < 0 || static_cast<std::size_t>(link) >= used_links_.size()) fail("trace: flow uses unknown link {}", link);
          used_links_[static_cast<std::size_t>(link)] = true;
        }
      }
    }
    const std::size_t links_pid = machine_.gpus.size();
    bool any_link = false;
    for (std::size_t l = 0; l < used_links_.size(); ++l) {
      if (!used_links_[l]) continue;
      if (!any_link) write_metadata_event("process_name", links_pid, nullptr, "links");
      any_link = true;
      write_metadata_event("thread_name", links_pid, &l, machine_.links[l].name);
    }
  }

  void write_tasks() {
    for (std::size_t t = 0; t < program_.tasks.size(); ++t) {
      const Task& task = program_.tasks[t];
      const TimePs start = result_.task_start_ps[t];
      const TimePs end = result_.task_end_ps[t];
      if (start < 0 || end < 0) continue;  // never ran
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
    for (std::size_t t = 0; t < program_.tasks.size(); ++t) {
      const Task& task = program_.tasks[t];
      const TimePs start = result_.task_start_ps[t];
      for (std::uint32_t k = 0; k < task.num_flows; ++k) {
        const std::uint32_t f = task.first_flow + k;
        const Flow& flow = program_.flows[f];
        const TimePs end = result_.flow_end_ps[f];
        if (flow.bytes == 0 || start < 0 || end < 0) continue;
        for (std::uint32_t l = 0; l < flow.num_links; ++l) {
          const LinkId link = program_.path_links[flow.first_link + l];
          begin_event();
          buffer_.append(std::string_view("{\"name\":"));
          append_json_string(buffer_, task_name(t));
          fmt::format_to(inserter(), ",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":",
                         category_name(task.category), links_pid, link);
          append_us(buffer_, start);
          buffer_.append(std::string_view(",\"dur\":"));
          append_us(buffer_, end - start);
          fmt::format_to(inserter(), ",\"args\":{{\"task\":{},\"flow\":{},\"bytes\":{}}}}}", t, f, flow.bytes);
        }
      }
    }
  }

  void write_memory() {
    for (std::size_t g = 0; g < result_.memory_timeline.size() && g < machine_.gpus.size(); ++g) {
      for (const auto& [time_ps, bytes] : result_.memory_timeline[g]) {
        begin_event();
        fmt::format_to(inserter(), "{{\"name\":\"memory_bytes\",\"cat\":\"memory\",\"ph\":\"C\",\"pid\":{},\"ts\":", g);
        append_us(buffer_, time_ps);
        fmt::format_to(inserter(), ",\"args\":{{\"bytes\":{}}}}}", bytes);
      }
    }
  }

  void write_annotations() {
    for (const TraceSpan& span : annotations_) {
      if (span.gpu < 0 || static_cast<std::size_t>(span.gpu) >= machine_.gpus.size())
        fail("trace: annotation '{}' on unknown GPU {}", span.name, span.gpu);
      begin_event();
      buffer_.append(std::string_view("{\"name\":"));
      append_json_string(buffer_, span.name);
      fmt::format_to(inserter(), ",\"cat\":\"annotation\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":", span.gpu,
                     machine_.gpus[static_cast<std::size_t>(span.gpu)].stream_names.size());
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
  fmt::memory_buffer buffer_;
  std::vector<bool> used_links_;
  bool first_event_ = true;
};

}  // namespace

void write_chrome_trace(std::ostream& out, const Machine& machine, const Program& program, const ExecResult& result,
                        const std::vector<TraceSpan>& annotations) {
  TraceWriter(out, machine, program, result, annotations).write();
}

}  // namespace lynx::sim
