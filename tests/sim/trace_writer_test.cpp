#include "sim/executor.hpp"

#include "tests/sim/program_builder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
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

std::string trace_of(const ProgramBuilder& b, const ExecResult& r) {
  std::ostringstream out;
  write_chrome_trace(out, b.machine, b.program, r);
  return out.str();
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
  // Metadata: 2 GPU processes + 3 stream threads + "links" process + 1 used link (not "unused").
  CHECK(count_by_phase["M"] == 7);
  CHECK(std::find(thread_names.begin(), thread_names.end(), "ib\\0") != thread_names.end());
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
