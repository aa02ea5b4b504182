// `lynxsim fields`: every scenario and hardware-profile field (name, unit, default, meaning).
#include "apps/cli.hpp"
#include "scenarios/scenario_loader.hpp"

#include <iostream>

namespace lynx::cli {

int cmd_fields(const std::vector<std::string>& argv) {
  po::options_description desc("fields options");
  desc.add_options()("help,h", "show this help");
  if (!parse_options(argv, desc, {}, "usage: lynxsim fields   (Markdown table of every field)"))
    return 0;
  std::cout << scenario_fields_markdown();
  return 0;
}

}  // namespace lynx::cli
