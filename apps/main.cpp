/// lynxsim command-line interface. The only place that exits: every other component throws
/// lynx::Error, which is printed here as one line.
#include "model/gpt.hpp"
#include "runner/report.hpp"
#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "sim/error.hpp"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: lynxsim <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [FILE]     simulate one training iteration of a scenario (built-in default without FILE)\n"
    "  show [FILE]    print the resolved scenario (all fields, units) and derived sizes\n"
    "\n"
    "global options:\n"
    "  -h, --help     this help (or `lynxsim <command> --help`)\n"
    "  --version      print the version\n";

struct CommonArgs {
  std::string file;
  std::vector<std::string> overrides;
};

lynx::Scenario load(const CommonArgs& args) {
  return args.file.empty() ? lynx::default_scenario(args.overrides)
                           : lynx::load_scenario_file(args.file, args.overrides);
}

void add_common(po::options_description& desc, CommonArgs& args) {
  desc.add_options()("file", po::value(&args.file), "scenario YAML file")(
      "set", po::value(&args.overrides)->composing(),
      "override a scenario field: --set key.path=value (repeatable)")("help,h", "show this help");
}

/// Parses a subcommand's options; returns false when --help was printed.
bool parse(const std::vector<std::string>& argv, po::options_description& desc,
           const std::string& usage) {
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(argv).options(desc).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n" << desc << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

int cmd_run(const std::vector<std::string>& argv) {
  CommonArgs args;
  std::string format = "table";
  std::string trace_path;
  std::string output_path;
  po::options_description desc("run options");
  add_common(desc, args);
  desc.add_options()("format", po::value(&format), "table | csv | json (default table)")(
      "trace", po::value(&trace_path), "write a Chrome-trace / Perfetto JSON timeline to this file")(
      "output,o", po::value(&output_path), "write the report to this file instead of stdout");
  if (!parse(argv, desc, "usage: lynxsim run [FILE] [--set k=v]... [--format table|csv|json] "
                         "[--trace OUT.json] [-o OUT]"))
    return 0;
  const auto report_format = lynx::parse_report_format(format);
  const lynx::Scenario scenario = load(args);
  lynx::SimOptions options;
  options.keep_trace_data = !trace_path.empty();
  const lynx::SimRun run = lynx::simulate(scenario, options);
  if (!trace_path.empty()) {
    std::ofstream trace(trace_path);
    if (!trace) lynx::fail("--trace: cannot write '{}'", trace_path);
    lynx::sim::write_chrome_trace(trace, run.built.machine, run.built.program, run.exec);
  }
  if (output_path.empty()) {
    lynx::write_report(std::cout, run.result, report_format);
  } else {
    std::ofstream out(output_path);
    if (!out) lynx::fail("-o: cannot write '{}'", output_path);
    lynx::write_report(out, run.result, report_format);
  }
  if (!trace_path.empty()) fmt::print(std::cerr, "trace written to {}\n", trace_path);
  return 0;
}

int cmd_show(const std::vector<std::string>& argv) {
  CommonArgs args;
  po::options_description desc("show options");
  add_common(desc, args);
  if (!parse(argv, desc, "usage: lynxsim show [FILE] [--set k=v]...")) return 0;
  lynx::Scenario scenario = load(args);
  scenario.model = lynx::model::resolve_model(scenario.model);
  std::cout << lynx::scenario_to_yaml(scenario);
  const auto& m = scenario.model;
  const auto& p = scenario.parallel;
  fmt::print("# derived:\n");
  fmt::print("#   parameters: {:.4g} ({:.3f} B)\n", lynx::model::parameter_count(m),
             lynx::model::parameter_count(m) / 1e9);
  fmt::print("#   GPUs used: {} of {} (tp {} × pp {} × dp {})\n", p.tp * p.pp * p.dp,
             scenario.hardware.nodes * scenario.hardware.gpus_per_node, p.tp, p.pp, p.dp);
  fmt::print("#   micro-batches per pipeline: {}\n", p.global_batch / (p.micro_batch * p.dp));
  fmt::print("#   model FLOPs per iteration: {:.4g}\n",
             lynx::model::model_flops_per_iteration(m, p.global_batch));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      std::cout << kUsage;
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
      fmt::print("lynxsim {}\n", lynx::lynxsim_version());
      return 0;
    }
    const std::string command = args[0];
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "run") return cmd_run(rest);
    if (command == "show") return cmd_show(rest);
    fmt::print(std::cerr, "lynxsim: error: unknown command '{}'\n{}", command, kUsage);
    return 2;
  } catch (const lynx::Error& e) {
    fmt::print(std::cerr, "lynxsim: error: {}\n", e.what());
    return 1;
  } catch (const po::error& e) {
    fmt::print(std::cerr, "lynxsim: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(std::cerr, "lynxsim: internal error: {}\n", e.what());
    return 3;
  }
}
