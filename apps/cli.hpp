#pragma once
/// Shared pieces of the lynxsim subcommands: one file per command (cmd_*.cpp), each a
/// function taking the arguments after the command name and returning the exit code.
#include "model/resolved_scenario.hpp"

#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace lynx::apps {

namespace po = boost::program_options;

/// FILE positional argument and the repeatable --set overrides.
struct ScenarioArgs {
  std::string file;
  std::vector<std::string> overrides;
};

/// Adds FILE, --set and --help to `desc`.
void add_scenario_options(po::options_description& desc, ScenarioArgs& args);
/// The scenario named by args (the built-in default when no FILE), overrides applied, resolved.
model::ResolvedScenario load_scenario(const ScenarioArgs& args);
/// Parses options with `positional` names in order; prints usage + options and returns false
/// on --help.
bool parse_options(const std::vector<std::string>& argv, po::options_description& desc,
                   const std::vector<std::string>& positional, const std::string& usage);

/// `option`'s value `text` as a whole number >= `minimum`; else "OPTION TEXT: expected a whole
/// number of WHAT >= MINIMUM".
int parse_whole_number(const std::string& text, const std::string& option, const std::string& what,
                       int minimum);

int cmd_run(const std::vector<std::string>& argv);
int cmd_show(const std::vector<std::string>& argv);
int cmd_fields(const std::vector<std::string>& argv);
int cmd_presets(const std::vector<std::string>& argv);
int cmd_plan(const std::vector<std::string>& argv);
int cmd_figures(const std::vector<std::string>& argv);
int cmd_fit(const std::vector<std::string>& argv);
int cmd_validate(const std::vector<std::string>& argv);
int cmd_sweep(const std::vector<std::string>& argv);
int cmd_best(const std::vector<std::string>& argv);
int cmd_live(const std::vector<std::string>& argv);
int cmd_errors(const std::vector<std::string>& argv);

}  // namespace lynx::apps
