// The error catalogue: one row per code, docs/errors.md current, a CLI case for every code that
// a command line can trigger, and the codes no command line triggers tested here.
#include "common/error.hpp"
#include "common/error_codes.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>

using namespace lynx;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Every code of LYNX_ERROR_CODE_LIST, in list order.
const std::vector<ErrorCode> kListed = {
#define LYNX_ERROR_CODE_LISTED(name, number) ErrorCode::name,
    LYNX_ERROR_CODE_LIST(LYNX_ERROR_CODE_LISTED)
#undef LYNX_ERROR_CODE_LISTED
};

}  // namespace

TEST_CASE("every listed code has exactly one catalogue row, in order, with a unique kebab-case name") {
  const std::vector<ErrorCodeInfo>& rows = error_catalogue();
  REQUIRE(rows.size() == kListed.size());
  std::set<std::string> names;
  const std::regex kebab("[a-z0-9]+(-[a-z0-9]+)*");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(error_code_id(kListed[i]));
    CHECK(rows[i].code == kListed[i]);
    CHECK(&error_code_info(kListed[i]) == &rows[i]);
    CHECK(std::regex_match(std::string(rows[i].name), kebab));
    CHECK(names.insert(rows[i].name).second);
    CHECK(std::string(rows[i].meaning).find('\n') == std::string::npos);
    CHECK(!std::string(rows[i].remedy).empty());
    CHECK(!std::string(rows[i].example).empty());
    if (i > 0) CHECK(static_cast<int>(rows[i - 1].code) < static_cast<int>(rows[i].code));
  }
  CHECK(error_code_id(ErrorCode::kUnknownKey) == "E104");
  CHECK(error_code_id(ErrorCode::kInternal) == "E001");
}

TEST_CASE("every code a command line can trigger has a CLI case, the others say why not") {
  const std::string cases = read_file(std::string(LYNXSIM_SOURCE_DIR) + "/tests/errors/cases.json") +
                            read_file(std::string(LYNXSIM_SOURCE_DIR) + "/tests/hostile/cases.json");
  for (const ErrorCodeInfo& row : error_catalogue()) {
    CAPTURE(error_code_id(row.code));
    const bool has_case = cases.find("\"code\": \"" + error_code_id(row.code) + "\"") != std::string::npos;
    const bool no_cli = std::string(row.no_cli_case).size() > 0;
    CHECK_MESSAGE(has_case != no_cli, "a code needs a case in tests/errors/cases.json, or (only if "
                                      "no command line can trigger it) a no_cli_case reason");
  }
}

TEST_CASE("docs/errors.md contains the current catalogue") {
  const std::string docs = read_file(std::string(LYNXSIM_SOURCE_DIR) + "/docs/errors.md");
  const std::string begin_marker = "<!-- BEGIN GENERATED: error_catalogue_markdown() -->\n";
  const std::string end_marker = "<!-- END GENERATED -->";
  const std::size_t begin = docs.find(begin_marker);
  REQUIRE(begin != std::string::npos);
  const std::size_t end = docs.find(end_marker, begin);
  REQUIRE(end != std::string::npos);
  const std::string generated = docs.substr(begin + begin_marker.size(), end - begin - begin_marker.size());
  const std::string current = error_catalogue_markdown();
  if (generated != current) std::ofstream(std::string(LYNXSIM_BINARY_DIR) + "/errors.md") << current;
  CHECK_MESSAGE(generated == current, "docs/errors.md is out of date: paste " LYNXSIM_BINARY_DIR
                                      "/errors.md between its GENERATED markers");
}

TEST_CASE("fail and LYNX_CHECK carry their code") {
  using test::code_of;
  CHECK(code_of([] { fail(ErrorCode::kUnknownKey, "x {}", 1); }) == ErrorCode::kUnknownKey);
  CHECK(test::error_of([] { fail(ErrorCode::kUnknownKey, "x {}", 1); }) == "x 1");
  // kInternal: no input reaches a LYNX_CHECK on purpose; the macro is what throws it.
  CHECK(code_of([] { LYNX_CHECK(1 + 1 == 3, "arithmetic {}", "broke"); }) == ErrorCode::kInternal);
  CHECK(test::error_of([] { LYNX_CHECK(false, "why"); }).find("internal check failed at") == 0);
}
