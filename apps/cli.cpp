#include "apps/cli.hpp"

#include "scenarios/scenario_loader.hpp"

#include "common/error.hpp"

#include <charconv>
#include <iostream>

namespace lynx::apps {

void add_scenario_options(po::options_description& desc, ScenarioArgs& args) {
  desc.add_options()("file", po::value(&args.file), "scenario YAML file")(
      "set", po::value(&args.overrides)->composing(),
      "override a scenario field: --set key.path=value (repeatable)")("help,h", "show this help");
}

model::ResolvedScenario load_scenario(const ScenarioArgs& args) {
  return args.file.empty() ? model::default_scenario(args.overrides)
                           : model::load_scenario_file(args.file, args.overrides);
}

int parse_whole_number(const std::string& text, const std::string& option, const std::string& what,
                       int minimum) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < minimum)
    fail(ErrorCode::kInvalidOption, "{} {}: expected a whole number of {} >= {}", option, text, what, minimum);
  return value;
}

bool parse_options(const std::vector<std::string>& argv, po::options_description& desc,
                   const std::vector<std::string>& positional, const std::string& usage) {
  po::positional_options_description pos;
  for (const auto& name : positional) pos.add(name.c_str(), 1);
  po::variables_map vm;
  po::store(po::command_line_parser(argv).options(desc).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << desc << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

}  // namespace lynx::apps
