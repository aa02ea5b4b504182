#pragma once
/// Test helper: builds a Machine and a Program task by task (ranges filled in automatically).
#include "sim/program.hpp"

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace lynx::sim::test {

/// One flow of a comm task: bytes over a path of links.
struct FlowSpec {
  std::uint64_t bytes = 0;
  std::vector<LinkId> path;
};

struct ProgramBuilder {
  Machine machine;
  Program program;

  GpuId add_gpu(std::string name, std::vector<std::string> streams, std::uint64_t capacity_bytes = 0,
                double contention_factor = 0.0) {
    machine.gpus.push_back({std::move(name), std::move(streams), capacity_bytes, contention_factor});
    return static_cast<GpuId>(machine.gpus.size() - 1);
  }

  LinkId add_link(std::string name, std::uint64_t bw_bytes_per_s, TimePs latency_ps = 0) {
    machine.links.push_back({std::move(name), bw_bytes_per_s, latency_ps});
    return static_cast<LinkId>(machine.links.size() - 1);
  }

  TagId add_tag(std::string name) {
    program.tags.push_back(std::move(name));
    return static_cast<TagId>(program.tags.size() - 1);
  }

  TaskId add_task(TaskKind kind, GpuId gpu, StreamId stream, TimePs work_ps, const std::string& name,
                  std::vector<TaskId> deps = {}, std::vector<FlowSpec> flows = {}, std::vector<MemEffect> mem = {},
                  std::int32_t group = -1, Category category = Category::kCompute) {
    Task task;
    task.gpu = gpu;
    task.stream = stream;
    task.kind = kind;
    task.category = category;
    task.work_ps = work_ps;
    task.group = group;
    task.name = static_cast<std::uint32_t>(program.names.size());
    program.names.push_back(name);
    task.first_dep = static_cast<std::uint32_t>(program.deps.size());
    task.num_deps = static_cast<std::uint32_t>(deps.size());
    program.deps.insert(program.deps.end(), deps.begin(), deps.end());
    task.first_flow = static_cast<std::uint32_t>(program.flows.size());
    task.num_flows = static_cast<std::uint32_t>(flows.size());
    for (const FlowSpec& spec : flows) {
      Flow flow;
      flow.bytes = spec.bytes;
      flow.first_link = static_cast<std::uint32_t>(program.path_links.size());
      flow.num_links = static_cast<std::uint32_t>(spec.path.size());
      program.path_links.insert(program.path_links.end(), spec.path.begin(), spec.path.end());
      program.flows.push_back(flow);
    }
    task.first_mem = static_cast<std::uint32_t>(program.mem.size());
    task.num_mem = static_cast<std::uint32_t>(mem.size());
    program.mem.insert(program.mem.end(), mem.begin(), mem.end());
    program.tasks.push_back(task);
    return static_cast<TaskId>(program.tasks.size() - 1);
  }

  TaskId kernel(GpuId gpu, StreamId stream, TimePs work_ps, const std::string& name, std::vector<TaskId> deps = {},
                std::vector<MemEffect> mem = {}) {
    return add_task(TaskKind::kKernel, gpu, stream, work_ps, name, std::move(deps), {}, std::move(mem));
  }

  TaskId comm(GpuId gpu, StreamId stream, TimePs work_ps, const std::string& name, std::vector<FlowSpec> flows,
              std::vector<TaskId> deps = {}, std::int32_t group = -1) {
    return add_task(TaskKind::kComm, gpu, stream, work_ps, name, std::move(deps), std::move(flows), {}, group,
                    Category::kTpComm);
  }

  TaskId marker(GpuId gpu, StreamId stream, const std::string& name, std::vector<TaskId> deps = {}) {
    return add_task(TaskKind::kMarker, gpu, stream, 0, name, std::move(deps), {}, {}, -1, Category::kOther);
  }
};

}  // namespace lynx::sim::test
