// End-to-end runs on the Blackwell profiles (hgx-b200-180gb, gb200-nvl72) with a model read from
// a Hugging Face config: exact and fast mode agree, and a 72-GPU NVLink domain keeps tensor
// parallelism across trays on NVLink.
#include "model/resolved_scenario.hpp"
#include "runner/simulate.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace lynx;

namespace {

const std::string kSource = LYNXSIM_SOURCE_DIR;

runner::SimResult run(const std::string& file, const std::vector<std::string>& overrides) {
  return runner::simulate(model::load_scenario_file(file, overrides)).result;
}

}  // namespace

TEST_CASE("Llama 3.1 8B from its config on HGX B200 and GB200 NVL72: exact and fast mode agree") {
  const std::string b200 = kSource + "/scenarios/examples/b200-llama3.1-8b-hf.yaml";
  // tp 8 across two trays, dp 9: 72 GPUs, one NVL72 rack.
  const std::vector<std::string> nvl72 = {
      "hardware.profile=gb200-nvl72", "hardware.nodes=18", "parallel.tp=8", "parallel.pp=1", "parallel.dp=9",
      "parallel.global_batch=36", "model.seq_len=4096"};
  for (const std::vector<std::string>& layout : {std::vector<std::string>{}, nvl72}) {
    CAPTURE(layout.size());
    std::vector<std::string> exact = layout;
    exact.push_back("recompute.strategy=selective");
    std::vector<std::string> fast = exact;
    fast.push_back("sim.mode=fast");
    const runner::SimResult e = run(b200, exact);
    const runner::SimResult f = run(b200, fast);
    CHECK_FALSE(e.oom);
    CHECK(e.iteration_time_s > 0);
    CHECK(e.mfu > 0);
    CHECK(e.mfu < 1);
    CHECK(std::abs(f.iteration_time_s / e.iteration_time_s - 1.0) < 0.01);
  }
}

TEST_CASE("GB200 NVL72: tensor parallelism across trays is faster inside the NVLink domain than over the NICs") {
  const std::string b200 = kSource + "/scenarios/examples/b200-llama3.1-8b-hf.yaml";
  const std::vector<std::string> layout = {
      "hardware.profile=gb200-nvl72", "hardware.nodes=18", "parallel.tp=8", "parallel.pp=1", "parallel.dp=9",
      "parallel.global_batch=36", "model.seq_len=4096", "recompute.strategy=selective"};
  std::vector<std::string> trays_only = layout;
  trays_only.push_back("hardware.node.nvlink_domain_gpus=4");  // each tray its own NVLink domain
  const runner::SimResult rack = run(b200, layout);
  const runner::SimResult trays = run(b200, trays_only);
  CHECK(rack.stages[0].tp_exposed_s < trays.stages[0].tp_exposed_s);
  CHECK(rack.iteration_time_s < trays.iteration_time_s);
}
