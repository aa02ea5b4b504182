// Bounded work: the task estimate made before anything is built, and the refusal above
// sim.max_tasks with the estimate in the message.
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"
#include "runner/work_estimate.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace lynx;
using namespace lynx::runner;
using lynx::test::error_of;

TEST_CASE("the task estimate bounds the tasks built from above, within a factor 2") {
  for (const char* strategy : {"none", "selective", "full"}) {
    for (const char* symmetry : {"true", "false"}) {
      const model::ResolvedScenario sc = model::default_scenario(
          {std::string("recompute.strategy=") + strategy,
           std::string("sim.exploit_symmetry=") + symmetry});
      const SimResult r = simulate(sc).result;
      const WorkEstimate w = estimate_work(sc.scenario(), r.symmetric);
      CAPTURE(strategy);
      CAPTURE(symmetry);
      CHECK(w.simulated_gpus == (r.symmetric ? sc->parallel.pp : r.gpus));
      CHECK(w.micro_batches == r.micro_batches);
      // Measured: 0.66 of the estimate without recompute, 0.76 selective, 0.96 full.
      CHECK(static_cast<std::int64_t>(r.tasks) <= w.tasks);
      CHECK(static_cast<std::int64_t>(r.tasks) * 2 >= w.tasks);
      CHECK(w.bytes >= w.tasks * kBytesPerTask);
    }
  }
}

TEST_CASE("a simulation estimated above sim.max_tasks is refused with its estimate") {
  const model::ResolvedScenario sc = model::default_scenario({"sim.max_tasks=1000"});
  const std::string message = error_of([&] { simulate(sc); });
  CHECK(message.find("<built-in>: key 'sim.max_tasks': the simulation would build about") == 0);
  CHECK(message.find("more than sim.max_tasks = 1000") != std::string::npos);
  CHECK(message.find("raise sim.max_tasks") != std::string::npos);
  // Raised, it runs.
  CHECK(simulate(model::default_scenario({"sim.max_tasks=100000"})).result.tasks > 1000);
}

TEST_CASE("usable memory is the machine's, or less under an rlimit") {
  CHECK(usable_memory_bytes() > (std::uint64_t{1} << 20));
}
