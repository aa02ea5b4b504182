#include "sim/executor.hpp"

#include "common/error.hpp"
#include "tests/sim/program_builder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <sstream>
#include <string>

using namespace lynx::literals;
using lynx::TimePs;
using lynx::sim::ExecOptions;
using lynx::sim::ExecResult;
using lynx::sim::GpuId;
using lynx::sim::LinkId;
using lynx::sim::MemEffect;
using lynx::sim::TaskId;
using lynx::sim::TraceOptions;
using lynx::sim::TraceSpan;
using lynx::sim::execute;
using lynx::sim::write_chrome_trace;
using lynx::sim::test::FlowSpec;
using lynx::sim::test::ProgramBuilder;

namespace {

/// Small deterministic generator (64-bit LCG, Knuth's MMIX constants).
struct Lcg {
  std::uint64_t state;
  std::uint64_t next(std::uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  }
};

/// A pseudo-random but valid program: deps only to earlier tasks, collective pairs on two
/// different GPUs, every alloc freed by the same task at its end.
ProgramBuilder random_program(std::uint64_t seed, int num_tasks) {
  ProgramBuilder b;
  Lcg rng{seed};
  for (int g = 0; g < 4; ++g) b.add_gpu(fmt::format("gpu{}", g), {"compute", "tp", "pp"}, 6000, 0.3);
  std::vector<LinkId> ring;
  for (int g = 0; g < 4; ++g) {
    ring.push_back(b.add_link(fmt::format("ring{}", g), 1'000'000'000 * (1 + rng.next(3)), 100 + static_cast<TimePs>(rng.next(900))));
  }
  const auto act = b.add_tag("act");
  const auto buf = b.add_tag("buf");
  b.program.static_bytes_per_gpu = {1000, 2000, 500, 0};
  std::int32_t next_group = 0;
  auto random_deps = [&](int below) {
    std::vector<TaskId> deps;
    const int count = below == 0 ? 0 : static_cast<int>(rng.next(3));
    for (int k = 0; k < count; ++k) deps.push_back(static_cast<TaskId>(rng.next(static_cast<std::uint64_t>(below))));
    return deps;
  };
  auto random_flows = [&](GpuId gpu) {
    std::vector<FlowSpec> flows;
    const int count = 1 + static_cast<int>(rng.next(2));
    for (int k = 0; k < count; ++k) {
      std::vector<LinkId> path{ring[static_cast<std::size_t>(gpu)]};
      if (rng.next(2) == 0) path.push_back(ring[static_cast<std::size_t>((gpu + 1) % 4)]);
      flows.push_back({rng.next(20'000), path});
    }
    return flows;
  };
  while (static_cast<int>(b.program.tasks.size()) < num_tasks) {
    const int below = static_cast<int>(b.program.tasks.size());
    const GpuId gpu = static_cast<GpuId>(rng.next(4));
    const std::uint64_t pick = rng.next(10);
    if (pick < 6) {
      const std::int64_t bytes = 1 + static_cast<std::int64_t>(rng.next(1500));
      b.kernel(gpu, 0, 1 + static_cast<TimePs>(rng.next(5'000'000)), fmt::format("k{}", below), random_deps(below),
               {MemEffect{bytes, act, false}, MemEffect{-bytes, act, true}});
    } else if (pick < 8) {
      b.comm(gpu, 1 + static_cast<std::int32_t>(rng.next(2)), static_cast<TimePs>(rng.next(3000)),
             fmt::format("c{}", below), random_flows(gpu), random_deps(below));
    } else if (pick < 9) {
      const GpuId other = static_cast<GpuId>((gpu + 1 + static_cast<GpuId>(rng.next(3))) % 4);
      const std::int32_t group = next_group++;
      const std::vector<TaskId> deps = random_deps(below);
      b.add_task(lynx::sim::TaskKind::kComm, gpu, 1, 500, fmt::format("ar{}", group), deps, random_flows(gpu),
                 {MemEffect{64, buf, false}, MemEffect{-64, buf, true}}, group, lynx::sim::Category::kTpComm);
      b.add_task(lynx::sim::TaskKind::kComm, other, 1, 700, fmt::format("ar{}", group), random_deps(below),
                 random_flows(other), {MemEffect{64, buf, false}, MemEffect{-64, buf, true}}, group,
                 lynx::sim::Category::kTpComm);
    } else {
      b.marker(gpu, 2, fmt::format("m{}", below), random_deps(below));
    }
  }
  return b;
}

std::string trace_of(const ProgramBuilder& b, const ExecResult& r, const std::vector<TraceSpan>& annotations = {},
                     const TraceOptions& options = {}) {
  std::ostringstream out;
  write_chrome_trace(out, b.machine, b.program, r, annotations, options);
  return out.str();
}

/// A trace timestamp ("12.345678", microseconds with 6 decimals) in picoseconds, exactly.
TimePs parse_ps(const std::string& text) {
  const std::size_t dot = text.find('.');
  REQUIRE(dot != std::string::npos);
  REQUIRE(text.size() - dot - 1 == 6);
  return std::stoll(text.substr(0, dot)) * 1'000'000 + std::stoll(text.substr(dot + 1));
}

/// A complete ("X") slice of a trace with its track.
struct Slice {
  std::pair<int, int> track;  ///< (pid, tid)
  TimePs start_ps = 0;
  TimePs end_ps = 0;
};

std::vector<Slice> slices_of(const YAML::Node& root) {
  std::vector<Slice> slices;
  for (const YAML::Node& event : root["traceEvents"]) {
    if (event["ph"].as<std::string>() != "X") continue;
    const TimePs start = parse_ps(event["ts"].as<std::string>());
    slices.push_back({{event["pid"].as<int>(), event["tid"].as<int>()}, start, start + parse_ps(event["dur"].as<std::string>())});
  }
  return slices;
}

/// Pairs of intervals on one track that overlap without one containing the other (Perfetto
/// cannot show them): a starts before b, b starts before a ends and ends after it.
int partial_overlaps(std::vector<Slice> slices) {
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return std::tie(a.track, a.start_ps, b.end_ps) < std::tie(b.track, b.start_ps, a.end_ps);
  });
  int count = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    for (std::size_t j = i + 1; j < slices.size() && slices[j].track == slices[i].track &&
                                slices[j].start_ps < slices[i].end_ps;
         ++j) {
      if (slices[j].start_ps > slices[i].start_ps && slices[j].end_ps > slices[i].end_ps) ++count;
    }
  }
  return count;
}

/// The flows' intervals [task start, flow end] per link, as the old writer put them on one track.
std::vector<Slice> raw_link_intervals(const ProgramBuilder& b, const ExecResult& r) {
  std::vector<Slice> slices;
  for (std::size_t t = 0; t < b.program.tasks.size(); ++t) {
    const auto& task = b.program.tasks[t];
    for (std::uint32_t k = 0; k < task.num_flows; ++k) {
      const auto& flow = b.program.flows[task.first_flow + k];
      if (flow.bytes == 0) continue;
      for (std::uint32_t l = 0; l < flow.num_links; ++l) {
        slices.push_back({{-1, b.program.path_links[flow.first_link + l]}, r.task_start_ps[t],
                          r.flow_end_ps[task.first_flow + k]});
      }
    }
  }
  return slices;
}

}  // namespace

TEST_CASE("determinism: the same program executed twice gives byte-identical traces") {
  const ProgramBuilder b = random_program(42, 3000);
  ExecOptions options;
  options.record_memory_timeline = true;
  const ExecResult first = execute(b.machine, b.program, options);
  const ExecResult second = execute(b.machine, b.program, options);
  CHECK(first.task_start_ps == second.task_start_ps);
  CHECK(first.task_end_ps == second.task_end_ps);
  CHECK(first.flow_end_ps == second.flow_end_ps);
  CHECK(first.events == second.events);
  const std::string trace_a = trace_of(b, first);
  const std::string trace_b = trace_of(b, second);
  CHECK(trace_a.size() > 100'000);
  CHECK(trace_a == trace_b);
  // A different program must give a different trace (the check above can fail).
  const ProgramBuilder other = random_program(43, 3000);
  CHECK(trace_of(other, execute(other.machine, other.program, options)) != trace_a);
}

TEST_CASE("random program: the schedule respects every ordering rule") {
  const ProgramBuilder b = random_program(7, 3000);
  const ExecResult r = execute(b.machine, b.program);
  const auto& tasks = b.program.tasks;
  std::map<std::pair<GpuId, std::int32_t>, TaskId> last_on_stream;
  std::map<std::int32_t, std::vector<TaskId>> groups;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    const TimePs start = r.task_start_ps[t];
    const TimePs end = r.task_end_ps[t];
    REQUIRE(start >= 0);
    CHECK(end >= start);
    for (std::uint32_t k = 0; k < task.num_deps; ++k) {
      CHECK(start >= r.task_end_ps[static_cast<std::size_t>(b.program.deps[task.first_dep + k])]);
    }
    const auto key = std::make_pair(task.gpu, task.stream);
    if (last_on_stream.count(key) != 0) CHECK(start >= r.task_end_ps[static_cast<std::size_t>(last_on_stream[key])]);
    last_on_stream[key] = static_cast<TaskId>(t);
    // Contention only slows kernels down; comm tasks take at least their work_ps.
    if (task.kind != lynx::sim::TaskKind::kMarker) CHECK(end - start >= task.work_ps);
    for (std::uint32_t k = 0; k < task.num_flows; ++k) {
      const TimePs flow_end = r.flow_end_ps[task.first_flow + k];
      CHECK(flow_end >= start);
      CHECK(flow_end <= end);
      // No flow can beat its solo transfer time on its slowest link.
      const auto& flow = b.program.flows[task.first_flow + k];
      if (flow.bytes > 0 && flow.num_links > 0) {
        std::uint64_t slowest = UINT64_MAX;
        for (std::uint32_t l = 0; l < flow.num_links; ++l) {
          slowest = std::min(slowest, b.machine.links[static_cast<std::size_t>(b.program.path_links[flow.first_link + l])].bw_bytes_per_s);
        }
        CHECK(flow_end - start >= lynx::transfer_time_ps(flow.bytes, slowest));
      }
    }
    if (task.group >= 0) groups[task.group].push_back(static_cast<TaskId>(t));
  }
  for (const auto& [group, members] : groups) {
    REQUIRE(members.size() == 2);
    CHECK(r.task_start_ps[static_cast<std::size_t>(members[0])] == r.task_start_ps[static_cast<std::size_t>(members[1])]);
    CHECK(r.task_end_ps[static_cast<std::size_t>(members[0])] == r.task_end_ps[static_cast<std::size_t>(members[1])]);
  }
}

TEST_CASE("trace JSON is valid, complete and exact") {
  ProgramBuilder b;
  b.add_gpu("gpu \"zero\"", {"comm"}, 0);
  b.add_gpu("g1", {"compute", "comm"});
  const auto link = b.add_link("ib\\0", 1'000'000'000, 7_ns);
  b.add_link("unused", 1'000'000'000, 0);
  const auto act = b.add_tag("act");
  const std::string odd_name = "we\"ird\\ name\n\t\x01 \xc3\xa9";
  b.comm(0, 0, 0, "A", {{1000, {link}}});
  const TaskId k = b.kernel(1, 0, 500_ns, odd_name, {}, {MemEffect{300, act, false}, MemEffect{-300, act, true}});
  b.comm(1, 1, 0, "B", {{1000, {link}}}, {k});
  b.marker(1, 1, "done");
  ExecOptions options;
  options.record_memory_timeline = true;
  const ExecResult r = execute(b.machine, b.program, options);
  const std::string json = trace_of(b, r);
  CHECK(json.rfind("{\"traceEvents\":[", 0) == 0);

  const YAML::Node root = YAML::Load(json);
  REQUIRE(root["traceEvents"].IsSequence());
  CHECK(root["displayTimeUnit"].as<std::string>() == "ns");
  std::map<std::string, int> count_by_phase;
  std::map<std::string, YAML::Node> by_name;
  std::vector<std::string> thread_names;
  for (const YAML::Node& event : root["traceEvents"]) {
    const std::string phase = event["ph"].as<std::string>();
    ++count_by_phase[phase];
    if (phase == "M" && event["name"].as<std::string>() == "thread_name") {
      thread_names.push_back(event["args"]["name"].as<std::string>());
    }
    if (phase == "X" && event["pid"].as<int>() < 2) by_name[event["name"].as<std::string>()] = event;
  }
  // Metadata: 2 GPU processes + 3 stream threads + "links" process + 2 lanes (A and B overlap
  // partially on the one used link; not "unused"), each with its sort index.
  CHECK(count_by_phase["M"] == 10);
  CHECK(std::find(thread_names.begin(), thread_names.end(), "ib\\0 lane 0") != thread_names.end());
  CHECK(std::find(thread_names.begin(), thread_names.end(), "ib\\0 lane 1") != thread_names.end());
  CHECK(std::find(thread_names.begin(), thread_names.end(), "unused") == thread_names.end());
  // X: 3 tasks (A, kernel, B) + 2 flows on their one link each; one instant for the marker.
  CHECK(count_by_phase["X"] == 5);
  CHECK(count_by_phase["i"] == 1);
  // Memory counter: g0 one sample (0, 0); g1 (0, 0), (0, 300), (500 ns, 0).
  CHECK(count_by_phase["C"] == 4);

  // Escaping round-trips exactly.
  REQUIRE(by_name.count(odd_name) == 1);
  CHECK(by_name[odd_name]["dur"].as<std::string>() == "0.500000");
  // B starts at 500 ns and ends with its flow at 2007 ns (see the fair-sharing test): 1.507 us.
  REQUIRE(by_name.count("B") == 1);
  CHECK(by_name["B"]["ts"].as<std::string>() == "0.500000");
  CHECK(by_name["B"]["dur"].as<std::string>() == "1.507000");
  CHECK(by_name["B"]["cat"].as<std::string>() == "tp_comm");
  CHECK(by_name["B"]["pid"].as<int>() == 1);
  CHECK(by_name["B"]["tid"].as<int>() == 1);
  CHECK(json.find("\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"gpu \\\"zero\\\"\"}") !=
        std::string::npos);
}

TEST_CASE("trace: concurrent flows get lanes, so no track has partially overlapping slices") {
  const ProgramBuilder b = random_program(11, 400);
  const ExecResult r = execute(b.machine, b.program);
  const std::vector<Slice> raw = raw_link_intervals(b, r);
  // The program has flows that partially overlap on one link (the test can fail).
  REQUIRE(partial_overlaps(raw) > 10);
  // Overlapping annotations too: [0, 10], [5, 15] need two lanes, [20, 30] fits lane 0.
  const std::vector<TraceSpan> annotations{{0, "w0", 0, 10'000'000}, {0, "w1", 5'000'000, 15'000'000},
                                           {0, "w2", 20'000'000, 30'000'000}};
  const YAML::Node root = YAML::Load(trace_of(b, r, annotations));
  const std::vector<Slice> slices = slices_of(root);
  CHECK(partial_overlaps(slices) == 0);
  // Every flow is still there, on its link's lanes (named "ringK lane N" or "ringK").
  const int links_pid = static_cast<int>(b.machine.gpus.size());
  const auto link_slices = std::count_if(slices.begin(), slices.end(), [&](const Slice& s) { return s.track.first == links_pid; });
  CHECK(static_cast<std::size_t>(link_slices) == raw.size());
  std::map<std::string, int> lanes;
  std::map<std::string, int> annotation_tid;
  for (const YAML::Node& event : root["traceEvents"]) {
    if (event["ph"].as<std::string>() == "M" && event["name"].as<std::string>() == "thread_name") {
      const std::string name = event["args"]["name"].as<std::string>();
      if (event["pid"].as<int>() == links_pid) ++lanes[name.substr(0, name.find(' '))];
      if (name.rfind("annotations", 0) == 0 && event["pid"].as<int>() == 0) annotation_tid[name] = event["tid"].as<int>();
    }
  }
  CHECK(lanes.size() == 4);
  CHECK(std::any_of(lanes.begin(), lanes.end(), [](const auto& kv) { return kv.second > 1; }));
  REQUIRE(annotation_tid.size() == 2);
  CHECK(annotation_tid["annotations lane 0"] == 3);  // after the three streams
  CHECK(annotation_tid["annotations lane 1"] == 4);
  for (const YAML::Node& event : root["traceEvents"]) {
    if (event["cat"] && event["cat"].as<std::string>() == "annotation") {
      CHECK(event["tid"].as<int>() == (event["name"].as<std::string>() == "w1" ? 4 : 3));
    }
  }
}

TEST_CASE("trace: link slices carry the payload bytes and the collective efficiency, which do not change timing") {
  ProgramBuilder b;
  b.add_gpu("g0", {"comm"});
  const auto link = b.add_link("nvlink", 1'000'000'000, 0);
  b.comm(0, 0, 0, "all_reduce", {{1000, {link}}});
  b.comm(0, 0, 0, "send", {{500, {link}}});
  const ExecResult plain = execute(b.machine, b.program);
  b.program.flows[0].payload_bytes = 700;  // 1000 = ceil(700 / 0.7) on the wire
  b.program.flows[0].efficiency = 0.7;
  const ExecResult labelled = execute(b.machine, b.program);
  CHECK(labelled.flow_end_ps == plain.flow_end_ps);
  CHECK(labelled.fingerprint == plain.fingerprint);
  const std::string json = trace_of(b, labelled);
  CHECK(json.find("\"args\":{\"task\":0,\"flow\":0,\"bytes\":700,\"efficiency\":0.7}") != std::string::npos);
  CHECK(json.find("\"args\":{\"task\":1,\"flow\":1,\"bytes\":500}") != std::string::npos);
}

TEST_CASE("trace: GPU and time-window limits filter what is written, not what ran") {
  const ProgramBuilder b = random_program(5, 600);
  ExecOptions exec_options;
  exec_options.record_memory_timeline = true;
  const ExecResult r = execute(b.machine, b.program, exec_options);
  const YAML::Node full = YAML::Load(trace_of(b, r));
  TraceOptions options;
  options.gpus = {true, false, true, false};
  options.from_ps = r.makespan_ps / 3;
  options.to_ps = 2 * r.makespan_ps / 3;
  const YAML::Node part = YAML::Load(trace_of(b, r, {}, options));
  const int links_pid = static_cast<int>(b.machine.gpus.size());

  // Expected task events: on GPU 0 or 2, overlapping the window (instants inside it).
  std::set<int> expected_tasks, expected_flows;
  for (std::size_t t = 0; t < b.program.tasks.size(); ++t) {
    const auto& task = b.program.tasks[t];
    if (task.gpu % 2 != 0) continue;
    if (r.task_end_ps[t] >= options.from_ps && r.task_start_ps[t] <= options.to_ps) expected_tasks.insert(static_cast<int>(t));
    for (std::uint32_t k = 0; k < task.num_flows; ++k) {
      const auto f = task.first_flow + k;
      if (b.program.flows[f].bytes > 0 && r.flow_end_ps[f] >= options.from_ps && r.task_start_ps[t] <= options.to_ps)
        expected_flows.insert(static_cast<int>(f));
    }
  }
  std::set<int> tasks, flows, processes;
  std::map<int, std::vector<std::pair<TimePs, std::int64_t>>> memory;
  for (const YAML::Node& event : part["traceEvents"]) {
    const std::string phase = event["ph"].as<std::string>();
    const int pid = event["pid"].as<int>();
    if (phase == "M" && event["name"].as<std::string>() == "process_name") processes.insert(pid);
    if (phase == "C") memory[pid].emplace_back(parse_ps(event["ts"].as<std::string>()), event["args"]["bytes"].as<std::int64_t>());
    if (phase != "X" && phase != "i") continue;
    if (pid == links_pid) {
      flows.insert(event["args"]["flow"].as<int>());
      CHECK(b.program.tasks[static_cast<std::size_t>(event["args"]["task"].as<int>())].gpu % 2 == 0);
    } else {
      CHECK(pid % 2 == 0);
      tasks.insert(event["args"]["task"].as<int>());
    }
  }
  REQUIRE(expected_tasks.size() > 20);
  CHECK(tasks == expected_tasks);
  CHECK(flows == expected_flows);
  CHECK(processes == std::set<int>{0, 2, links_pid});
  CHECK(partial_overlaps(slices_of(part)) == 0);
  // The memory counter starts at the window with the value it had there, then follows the run.
  for (const int g : {0, 2}) {
    const auto& samples = r.memory_timeline[static_cast<std::size_t>(g)];
    std::int64_t at_start = 0;
    std::vector<std::pair<TimePs, std::int64_t>> expected;
    for (const auto& [time_ps, bytes] : samples) {
      if (time_ps < options.from_ps) at_start = bytes;
      else if (time_ps <= options.to_ps) expected.emplace_back(time_ps, bytes);
    }
    expected.insert(expected.begin(), {options.from_ps, at_start});
    CHECK(memory[g] == expected);
  }
  CHECK(memory.count(1) == 0);
  // The full trace has more of everything; bad limits are refused.
  CHECK(full["traceEvents"].size() > part["traceEvents"].size());
  TraceOptions bad;
  bad.gpus = {true};
  CHECK_THROWS_WITH_AS(trace_of(b, r, {}, bad), doctest::Contains("GPU selection"), lynx::Error);
  bad = {};
  bad.from_ps = 10;
  bad.to_ps = 5;
  CHECK_THROWS_WITH_AS(trace_of(b, r, {}, bad), doctest::Contains("window"), lynx::Error);
}

TEST_CASE("trace: metadata (version, scenario, strategy) in a top-level object and on an instant event") {
  const ProgramBuilder b = random_program(3, 50);
  const ExecResult r = execute(b.machine, b.program);
  TraceOptions options;
  options.metadata = {{"lynxsim_version", "9.8.7"}, {"strategy", "lynx-heu"}, {"scenario_yaml", "name: \"x\"\nmodel:\n  layers: 2\n"}};
  const std::string json = trace_of(b, r, {}, options);
  const YAML::Node root = YAML::Load(json);
  REQUIRE(root["metadata"].IsMap());
  CHECK(root["metadata"]["lynxsim_version"].as<std::string>() == "9.8.7");
  CHECK(root["metadata"]["scenario_yaml"].as<std::string>() == "name: \"x\"\nmodel:\n  layers: 2\n");
  CHECK(json.find("\"metadata\":{\"lynxsim_version\":\"9.8.7\",\"strategy\":\"lynx-heu\",\"scenario_yaml\":") != std::string::npos);
  int instants = 0;
  for (const YAML::Node& event : root["traceEvents"]) {
    if (event["name"].as<std::string>() != "lynxsim run") continue;
    ++instants;
    CHECK(event["ph"].as<std::string>() == "i");
    CHECK(event["args"]["strategy"].as<std::string>() == "lynx-heu");
  }
  CHECK(instants == 1);
  CHECK(trace_of(b, r, {}, options) == json);  // deterministic with metadata too
  CHECK_FALSE(YAML::Load(trace_of(b, r))["metadata"]);
}
