// `lynxsim run`: simulate one training iteration of a scenario.
#include "apps/cli.hpp"
#include "apps/megatron_options.hpp"
#include "common/files.hpp"
#include "apps/trace_options.hpp"
#include "strategies/plan_check.hpp"
#include "strategies/plan_yaml.hpp"
#include "runner/report.hpp"
#include "runner/simulate.hpp"
#include "common/error.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
#include <fstream>
#include <iostream>

namespace lynx::apps {

int cmd_run(const std::vector<std::string>& argv) {
  ScenarioArgs args;
  std::string format = "table";
  std::string output_path;
  std::string plan_path;
  std::string hf_config_path;
  TraceArgs trace_args;
  MegatronCliArgs megatron;
  po::options_description desc("run options");
  add_scenario_options(desc, args);
  add_megatron_options(desc, megatron);
  add_trace_options(desc, trace_args);
  desc.add_options()("format", po::value(&format), "table | csv | json (default table)")(
      "output,o", po::value(&output_path), "write the report to this file instead of stdout")(
      "hf-config", po::value(&hf_config_path),
      "the model shape from this Hugging Face config.json instead of the scenario's model.preset "
      "(= --set model.preset= --set model.hf_config=FILE; the scenario's other model keys still override it)")(
      "plan", po::value(&plan_path),
      "run this plan file (from `lynxsim plan`) instead of planning: on FILE if given (it must "
      "match the plan's model, layout and GPU memory), else on the scenario the plan holds");
  if (!parse_options(argv, desc, {"file"},
                     "usage: lynxsim run [FILE] [--set k=v]... [--hf-config config.json] [--format table|csv|json] "
                     "[--trace OUT.json [--trace-stages LIST] [--trace-window START:END]] [-o OUT] [--plan PLAN.yaml]\n"
                     "       lynxsim run --megatron-args \"...\" | --megatron-args-file launch.sh "
                     "--profile NAME | --profile-file FILE [--gpus N] [--set k=v]... [...]"))
    return 0;
  const auto report_format = runner::parse_report_format(format);
  if (!hf_config_path.empty()) {
    if (megatron_given(megatron))
      fail(ErrorCode::kConflictingOptions, "--hf-config: Megatron-LM arguments give the model shape themselves");
    args.overrides.push_back("model.preset=");
    args.overrides.push_back("model.hf_config=" + std::filesystem::absolute(hf_config_path).lexically_normal().string());
  }
  runner::SimOptions options;
  options.progress = true;  // a single run: bars on stderr for long searches and engine runs
  // With --plan, the plan file's scenario unless FILE is given (then checked against the plan).
  strategies::PlanFile plan_file;
  if (!plan_path.empty() && megatron_given(megatron))
    fail(ErrorCode::kConflictingOptions, "--plan runs a plan file's scenario (or FILE's): give it no Megatron-LM arguments");
  if (!plan_path.empty()) plan_file = strategies::read_plan_file(plan_path);
  const model::ResolvedScenario resolved =
      plan_path.empty() ? load_scenario(args, megatron)
                        : strategies::scenario_for_plan(plan_file, plan_path, args.file, args.overrides);
  if (!plan_path.empty()) options.plan = &plan_file.plan;
  const TraceRequest trace = parse_trace_request(trace_args, resolved->parallel.pp);
  options.keep_trace_data = !trace.path.empty();
  const runner::SimRun run = runner::simulate(resolved, options);
  write_trace(trace, run);
  if (output_path.empty()) {
    runner::write_report(std::cout, run.result, report_format);
  } else {
    OutputFile out(output_path, "-o");
    runner::write_report(out.stream(), run.result, report_format);
    out.close();
  }
  if (!trace.path.empty()) fmt::print(std::cerr, "trace written to {} (open in ui.perfetto.dev)\n", trace.path);
  return 0;
}

}  // namespace lynx::apps
