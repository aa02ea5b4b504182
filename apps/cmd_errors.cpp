// `lynxsim errors [CODE] [--markdown]`: the error catalogue (common/error_codes.cpp), every code
// with its name, meaning and what to do; docs/errors.md holds the Markdown form.
#include "apps/cli.hpp"
#include "common/error.hpp"

#include <iostream>

namespace lynx::apps {

int cmd_errors(const std::vector<std::string>& argv) {
  std::string code;
  bool markdown = false;
  po::options_description desc("errors options");
  desc.add_options()("code", po::value(&code), "only this code, by number (E104) or name (unknown-key)")(
      "markdown", po::bool_switch(&markdown), "print the Markdown of docs/errors.md")("help,h", "show this help");
  if (!parse_options(argv, desc, {"code"},
                     "usage: lynxsim errors [CODE] [--markdown]   (the error codes: meaning, what to do)"))
    return 0;
  if (markdown) {
    std::cout << error_catalogue_markdown();
    return 0;
  }
  if (code.empty()) {
    std::cout << error_catalogue_text();
    return 0;
  }
  for (const ErrorCodeInfo& row : error_catalogue()) {
    if (code != error_code_id(row.code) && code != row.name) continue;
    std::cout << error_text(row);
    return 0;
  }
  fail(ErrorCode::kInvalidOption, "errors {}: no such error code (lynxsim errors lists them)", code);
}

}  // namespace lynx::apps
