// Plan files: write → read round trip, and every read error names file, line and key.
#include "strategies/plan_yaml.hpp"

#include <doctest/doctest.h>

using namespace lynx;
using namespace lynx::strategy;

namespace {

RecomputePlan sample_plan() {
  RecomputePlan plan;
  plan.strategy = "lynx-heu";
  StagePlan s0;
  s0.first_layer = 0;
  LayerDecision keep;
  LayerDecision overlap;
  overlap.group[static_cast<size_t>(model::OpGroup::kAttnCore)] = Action::kOverlap;
  overlap.group[static_cast<size_t>(model::OpGroup::kMlp)] = Action::kOverlap;
  overlap.window = Window::kBwdTpComm;
  s0.layers = {overlap, keep};
  StagePlan s1;
  s1.first_layer = 2;
  LayerDecision demand;
  demand.group[static_cast<size_t>(model::OpGroup::kAttnCore)] = Action::kRecompute;
  demand.rerun_whole_groups = true;
  LayerDecision top = overlap;
  top.window = Window::kPpRecvWait;
  s1.layers = {demand, top};
  plan.stages = {s0, s1};
  return plan;
}

}  // namespace

TEST_CASE("plan YAML round trip keeps every decision") {
  const RecomputePlan plan = sample_plan();
  const std::string yaml = plan_to_yaml(plan, "unit", nullptr);
  const RecomputePlan back = load_plan_text(yaml, "plan.yaml", 2, 4);
  CHECK(back.strategy == "lynx-heu");
  REQUIRE(back.stages.size() == 2);
  for (size_t s = 0; s < 2; ++s) {
    CHECK(back.stages[s].first_layer == plan.stages[s].first_layer);
    REQUIRE(back.stages[s].layers.size() == plan.stages[s].layers.size());
    for (size_t l = 0; l < plan.stages[s].layers.size(); ++l) {
      CHECK(back.stages[s].layers[l].group == plan.stages[s].layers[l].group);
      CHECK(back.stages[s].layers[l].window == plan.stages[s].layers[l].window);
      CHECK(back.stages[s].layers[l].rerun_whole_groups == plan.stages[s].layers[l].rerun_whole_groups);
    }
  }
  CHECK(plan_to_yaml(back, "unit", nullptr) == yaml);
}

TEST_CASE("plan YAML errors name the file, line and key") {
  const std::string good = plan_to_yaml(sample_plan(), "unit", nullptr);
  SUBCASE("layout mismatch") {
    CHECK_THROWS_WITH_AS(load_plan_text(good, "p.yaml", 3, 4),
                         doctest::Contains("has 2 stages, the scenario's layout has 3"), Error);
    CHECK_THROWS_WITH_AS(load_plan_text(good, "p.yaml", 2, 6), doctest::Contains("hold 4 layers, the model has 6"), Error);
  }
  SUBCASE("unknown group") {
    std::string bad = good;
    bad.replace(bad.find("drop: [core, mlp]"), 17, "drop: [core, mpl]");
    CHECK_THROWS_WITH_AS(load_plan_text(bad, "p.yaml", 2, 4), doctest::Contains("p.yaml:"), Error);
    CHECK_THROWS_WITH_AS(load_plan_text(bad, "p.yaml", 2, 4), doctest::Contains("unknown group 'mpl'"), Error);
  }
  SUBCASE("bad mode, unknown key, malformed YAML") {
    std::string bad_mode = good;
    bad_mode.replace(bad_mode.find("mode: demand"), 12, "mode: lazy  ");
    CHECK_THROWS_WITH_AS(load_plan_text(bad_mode, "p.yaml", 2, 4),
                         doctest::Contains("'lazy' is not one of: keep, demand, overlap"), Error);
    CHECK_THROWS_WITH_AS(load_plan_text(good + "extra: 1\n", "p.yaml", 2, 4),
                         doctest::Contains("key 'extra': unknown key"), Error);
    CHECK_THROWS_WITH_AS(load_plan_text("stages: [\n", "p.yaml", 2, 4),
                         doctest::Contains("p.yaml:"), Error);
  }
}
