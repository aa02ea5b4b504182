// Dependencies run one way: strategies/ decides and never builds programs or runs the engine
// (no schedule/, runner/ or sim/executor.hpp include; lynxsim_strategies does not link
// lynxsim_schedule), and schedule/ reads only the plan types of strategies/.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kSource(LYNXSIM_SOURCE_DIR);

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The quoted project includes of every .hpp / .cpp in `folder`, as "file: header".
std::vector<std::string> includes_of(const std::string& folder) {
  std::vector<std::string> out;
  const std::regex include_line(R"re(#include\s+"([^"]+)")re");
  for (const auto& entry : std::filesystem::directory_iterator(kSource / folder)) {
    const auto ext = entry.path().extension();
    if (ext != ".hpp" && ext != ".cpp") continue;
    const std::string text = read(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), include_line), end; it != end; ++it)
      out.push_back(folder + "/" + entry.path().filename().string() + ": " + (*it)[1].str());
  }
  return out;
}

/// The argument list of `target_link_libraries(TARGET ...)` in a CMakeLists.txt.
std::string link_line(const std::string& cmake, const std::string& target) {
  const auto start = cmake.find("target_link_libraries(" + target + " ");
  if (start == std::string::npos) return {};
  return cmake.substr(start, cmake.find(')', start) - start);
}

}  // namespace

TEST_CASE("strategies/ includes nothing of schedule/ or runner/ and not the engine") {
  const auto includes = includes_of("strategies");
  REQUIRE(includes.size() > 10);  // the scan found the folder's files
  for (const std::string& inc : includes) {
    CAPTURE(inc);
    const std::string header = inc.substr(inc.find(": ") + 2);
    CHECK(header.rfind("schedule/", 0) == std::string::npos);
    CHECK(header.rfind("runner/", 0) == std::string::npos);
    CHECK(header != "sim/executor.hpp");
  }
}

TEST_CASE("schedule/ reads only the plan types of strategies/") {
  const auto includes = includes_of("schedule");
  REQUIRE(includes.size() > 5);
  for (const std::string& inc : includes) {
    CAPTURE(inc);
    const std::string header = inc.substr(inc.find(": ") + 2);
    if (header.rfind("strategies/", 0) == 0) CHECK(header == "strategies/recompute_plan.hpp");
    CHECK(header.rfind("runner/", 0) == std::string::npos);
  }
}

TEST_CASE("the libraries link one way: strategies and schedule do not link each other") {
  const std::string strategies = link_line(read(kSource / "strategies" / "CMakeLists.txt"), "lynxsim_strategies");
  const std::string plan = link_line(read(kSource / "strategies" / "CMakeLists.txt"), "lynxsim_recompute_plan");
  const std::string schedule = link_line(read(kSource / "schedule" / "CMakeLists.txt"), "lynxsim_schedule");
  REQUIRE_FALSE(strategies.empty());
  REQUIRE_FALSE(plan.empty());
  REQUIRE_FALSE(schedule.empty());
  CHECK(strategies.find("lynxsim_schedule") == std::string::npos);
  CHECK(strategies.find("lynxsim_runner") == std::string::npos);
  CHECK(plan.find("lynxsim_schedule") == std::string::npos);
  CHECK(plan.find("lynxsim_strategies") == std::string::npos);
  CHECK(schedule.find("lynxsim_strategies") == std::string::npos);
  CHECK(schedule.find("lynxsim_runner") == std::string::npos);
}
