/// lynxsim command-line interface. The only place that exits: every other component throws
/// lynx::Error, which is printed here as one line.
#include "apps/cli.hpp"
#include "common/files.hpp"
#include "runner/report.hpp"
#include "common/error.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

struct Command {
  std::function<int(const std::vector<std::string>&)> run;
  const char* summary;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> table = {
      {"run", {lynx::apps::cmd_run, "simulate one training iteration (built-in default without FILE)"}},
      {"show", {lynx::apps::cmd_show, "print the resolved scenario (all fields, units) and derived sizes"}},
      {"figures", {lynx::apps::cmd_figures, "the paper experiment: all strategies × GPT 1.3B-23B, CSV + PNG figures"}},
      {"sweep", {lynx::apps::cmd_sweep, "simulate every point of a grid (axes, ranges, filters) into CSV / JSON lines; threads, MPI, resume"}},
      {"best", {lynx::apps::cmd_best, "search layouts, micro-batch, virtual stages, SP and recompute strategy for the fastest plan that fits on N GPUs"}},
      {"live", {lynx::apps::cmd_live, "run a plan file's iteration on GPUs (or --dry-run, --backend host) and compare with the prediction"}},
      {"plan", {lynx::apps::cmd_plan, "plan recomputation (lynx-heu, lynx-opt, ...) and write the plan YAML"}},
      {"fit", {lynx::apps::cmd_fit, "fit a hardware profile from lynxsim-calibrate measurements"}},
      {"validate", {lynx::apps::cmd_validate, "simulate measured runs (CSV) and compare; --fit calibrates the profile"}},
      {"fields", {lynx::apps::cmd_fields, "list the scenario / profile fields (all, or those under a PREFIX): unit, default, meaning"}},
      {"errors", {lynx::apps::cmd_errors, "list the error codes: meaning and what to do (docs/errors.md)"}},
      {"presets", {lynx::apps::cmd_presets, "list the GPT and Llama model presets with their shapes and parameter counts"}},
  };
  return table;
}

void print_usage(std::ostream& out) {
  fmt::print(out, "usage: lynxsim <command> [options]   (lynxsim <command> --help for its options)\n\ncommands:\n");
  for (const auto& [name, cmd] : commands()) fmt::print(out, "  {:<10} {}\n", name, cmd.summary);
  fmt::print(out, "\n  -h, --help   this help\n  --version    print the version\n");
}

/// The one line every error ends in: "lynxsim: error E104 (unknown-key): MESSAGE".
void print_error(lynx::ErrorCode code, const std::string& message) {
  fmt::print(std::cerr, "lynxsim: error {} ({}): {}\n", lynx::error_code_id(code),
             lynx::error_code_info(code).name, message);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty()) {
      print_usage(std::cerr);
      return 2;
    }
    if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      print_usage(std::cout);
      return 0;
    }
    if (args[0] == "--version") {
      fmt::print("lynxsim {}\n", lynx::runner::lynxsim_version());
      return 0;
    }
    const auto it = commands().find(args[0]);
    if (it == commands().end()) {
      print_error(lynx::ErrorCode::kBadUsage, fmt::format("unknown command '{}'", args[0]));
      print_usage(std::cerr);
      return 2;
    }
    const int status = it->second.run(std::vector<std::string>(args.begin() + 1, args.end()));
    lynx::check_stdout();  // a full disk or closed pipe under stdout is an error, not exit 0
    return status;
  } catch (const lynx::Error& e) {
    print_error(e.code(), e.what());
    return e.code() == lynx::ErrorCode::kInternal ? 3 : 1;
  } catch (const boost::program_options::error& e) {
    print_error(lynx::ErrorCode::kBadUsage, e.what());
    return 2;
  } catch (const std::exception& e) {
    print_error(lynx::ErrorCode::kInternal, e.what());
    return 3;
  }
}
