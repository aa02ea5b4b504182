#pragma once
/// Test helper: the time the engine takes for one collective's phases on an otherwise idle
/// machine (one comm task per member and phase, members of a phase in one rendezvous group,
/// each member's flows the ones it sends), as the program builder emits a collective.
#include "hw_models/collectives.hpp"
#include "hw_models/topology.hpp"
#include "sim/executor.hpp"

#include <vector>

namespace lynx::test {

inline TimePs engine_collective_ps(const hw_models::Topology& topo, const std::vector<hw_models::Phase>& phases,
                                   const std::vector<hw_models::Rank>& ranks) {
  sim::Machine machine;
  machine.links = topo.links();
  sim::Program prog;
  prog.names = {"collective"};
  prog.tags = {"x"};
  for (std::size_t member = 0; member < ranks.size(); ++member) {
    machine.gpus.push_back({"gpu", {"comm"}, 0, 0.0});
    prog.static_bytes_per_gpu.push_back(0);
    hw_models::append_member_tasks(prog, topo, phases, ranks[member], static_cast<sim::GpuId>(member), 0,
                                   sim::Category::kDpComm);
  }
  return sim::execute(machine, prog).makespan_ps;
}

}  // namespace lynx::test
