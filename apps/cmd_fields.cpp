// `lynxsim fields [PREFIX]`: the scenario and hardware-profile fields (name, unit, default,
// meaning), all of them or those whose key is PREFIX or lies under it.
#include "apps/cli.hpp"
#include "scenarios/scenario_loader.hpp"

#include <iostream>

namespace lynx::apps {

int cmd_fields(const std::vector<std::string>& argv) {
  std::string prefix;
  po::options_description desc("fields options");
  desc.add_options()("prefix", po::value(&prefix),
                     "only the fields whose scenario or profile key is this or lies under it, "
                     "e.g. hardware.node or gpu")("help,h", "show this help");
  if (!parse_options(argv, desc, {"prefix"},
                     "usage: lynxsim fields [PREFIX]   (Markdown table of the fields)"))
    return 0;
  std::cout << scenario_fields_markdown(prefix);
  return 0;
}

}  // namespace lynx::apps
