// `lynxsim run`: simulate one training iteration of a scenario.
#include "apps/cli.hpp"
#include "strategies/plan_yaml.hpp"
#include "runner/report.hpp"
#include "runner/simulate.hpp"
#include "common/error.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <fstream>
#include <iostream>

namespace lynx::cli {

int cmd_run(const std::vector<std::string>& argv) {
  ScenarioArgs args;
  std::string format = "table";
  std::string trace_path;
  std::string output_path;
  std::string plan_path;
  po::options_description desc("run options");
  add_scenario_options(desc, args);
  desc.add_options()("format", po::value(&format), "table | csv | json (default table)")(
      "trace", po::value(&trace_path), "write a Chrome-trace / Perfetto JSON timeline to this file")(
      "output,o", po::value(&output_path), "write the report to this file instead of stdout")(
      "plan", po::value(&plan_path), "run this plan file (from `lynxsim plan`) instead of planning");
  if (!parse_options(argv, desc, {"file"},
                     "usage: lynxsim run [FILE] [--set k=v]... [--format table|csv|json] "
                     "[--trace OUT.json] [-o OUT] [--plan PLAN.yaml]"))
    return 0;
  const auto report_format = parse_report_format(format);
  const model::ResolvedScenario resolved = load_scenario(args);
  const Scenario& scenario = resolved.scenario();
  SimOptions options;
  options.keep_trace_data = !trace_path.empty();
  strategy::RecomputePlan plan;
  if (!plan_path.empty()) {
    plan = strategy::load_plan_file(plan_path, scenario.parallel.pp * scenario.parallel.virtual_stages,
                                    scenario.model.layers);
    options.plan = &plan;
  }
  const SimRun run = simulate(resolved, options);
  if (!trace_path.empty()) {
    std::ofstream trace(trace_path);
    if (!trace) fail("--trace: cannot write '{}'", trace_path);
    sim::write_chrome_trace(trace, run.built.machine, run.built.program, run.exec,
                            trace_annotations(run));
  }
  if (output_path.empty()) {
    write_report(std::cout, run.result, report_format);
  } else {
    std::ofstream out(output_path);
    if (!out) fail("-o: cannot write '{}'", output_path);
    write_report(out, run.result, report_format);
  }
  if (!trace_path.empty()) fmt::print(std::cerr, "trace written to {} (open in ui.perfetto.dev)\n", trace_path);
  return 0;
}

}  // namespace lynx::cli
