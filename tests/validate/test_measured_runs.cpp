// The vTrain CSV reader: good rows, comments and blank lines, CRLF, and malformed rows whose
// message names the file and line.
#include "common/error.hpp"
#include "validate/measured_runs.hpp"

#include <doctest/doctest.h>

#include <string>

using lynx::validate::MeasuredRun;
using lynx::validate::parse_measured_runs;

namespace {

/// The message of the lynx::Error that parsing `text` throws ("" if none).
std::string parse_error(const std::string& text) {
  try {
    parse_measured_runs(text, "runs.csv");
  } catch (const lynx::Error& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kHeader =
    "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
    "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n";

}  // namespace

TEST_CASE("vTrain rows parse into measured runs, skipping the header, blanks and CRLF") {
  const std::string text = std::string(kHeader) +
                           "2,16,8,1024,16,24,1024,1,1,2,372.160408\r\n"
                           "\n"
                           "8,32,4,1024,16,24,1024,2,2,2,219.732754\n";
  const auto runs = parse_measured_runs(text, "runs.csv");
  REQUIRE(runs.size() == 2);
  const MeasuredRun& a = runs[0];
  CHECK(a.line == 2);
  CHECK(a.gpus == 2);
  CHECK(a.global_batch == 16);
  CHECK(a.micro_batch == 8);
  CHECK(a.hidden == 1024);
  CHECK(a.heads == 16);
  CHECK(a.layers == 24);
  CHECK(a.seq_len == 1024);
  CHECK(a.tp == 1);
  CHECK(a.dp == 1);
  CHECK(a.pp == 2);
  CHECK(a.iteration_ms == doctest::Approx(372.160408).epsilon(1e-12));
  const MeasuredRun& b = runs[1];
  CHECK(b.line == 4);  // the blank line 3 counts
  CHECK(b.tp == 2);
  CHECK(b.dp == 2);
  CHECK(b.pp == 2);
  CHECK(b.iteration_ms == doctest::Approx(219.732754).epsilon(1e-12));
}

TEST_CASE("malformed rows are errors naming file:line and the column") {
  const std::string ok = "2,16,8,1024,16,24,1024,1,1,2,372.1\n";
  SUBCASE("too few columns") {
    const auto msg = parse_error(std::string(kHeader) + ok + "2,16,8,1024,16,24,1024,1,1,2\n");
    CHECK(msg.find("runs.csv:3:") == 0);
    CHECK(msg.find("expected 11 comma-separated columns, got 10") != std::string::npos);
  }
  SUBCASE("too many columns") {
    const auto msg = parse_error(ok + "2,16,8,1024,16,24,1024,1,1,2,3.0,7\n");
    CHECK(msg.find("runs.csv:2:") == 0);
    CHECK(msg.find("got 12") != std::string::npos);
  }
  SUBCASE("not an integer") {
    const auto msg = parse_error("2,16,8x,1024,16,24,1024,1,1,2,372.1\n");
    CHECK(msg.find("runs.csv:1:") == 0);
    CHECK(msg.find("column 3 (micro batch): '8x' is not a positive integer") != std::string::npos);
  }
  SUBCASE("zero is not positive") {
    const auto msg = parse_error("2,16,8,0,16,24,1024,1,1,2,372.1\n");
    CHECK(msg.find("column 4 (hidden size)") != std::string::npos);
  }
  SUBCASE("bad time") {
    const auto msg = parse_error(ok + ok + "2,16,8,1024,16,24,1024,1,1,2,-5\n");
    CHECK(msg.find("runs.csv:3:") == 0);
    CHECK(msg.find("column 11 (iteration time (ms)): '-5' is not a positive number") !=
          std::string::npos);
  }
  SUBCASE("layout does not match the GPU count") {
    const auto msg = parse_error("4,16,8,1024,16,24,1024,1,1,2,372.1\n");
    CHECK(msg.find("runs.csv:1:") == 0);
    CHECK(msg.find("tp · dp · pp = 1 · 1 · 2 does not equal the 4 GPUs") != std::string::npos);
  }
  SUBCASE("global batch not divisible by micro batch · dp") {
    const auto msg = parse_error("4,12,8,1024,16,24,1024,1,2,2,372.1\n");
    CHECK(msg.find("global batch 12 is not divisible by micro batch · dp = 8 · 2") !=
          std::string::npos);
  }
  SUBCASE("no rows at all") {
    const auto msg = parse_error(std::string(kHeader) + "\n");
    CHECK(msg == "runs.csv: no measured rows (only blank or '#' lines)");
  }
}

TEST_CASE("a missing measurements file is an error naming the path") {
  try {
    lynx::validate::load_measured_runs("/nonexistent/runs.csv");
    FAIL("no error for a missing file");
  } catch (const lynx::Error& e) {
    CHECK(std::string(e.what()) == "/nonexistent/runs.csv: cannot open the measurements CSV: no such file");
  }
}

namespace {

constexpr const char* kHeaded =
    "pp,dp,tp,gpus,global_batch,micro_batch,hidden,heads,layers,seq_len,iteration_s";

}  // namespace

TEST_CASE("a headed CSV: core columns in any order, seconds, settings columns by alias or key") {
  const std::string text = std::string("# a comment\n") + kHeaded +
                           ",recompute,parallel.sequence_parallel,virtual_stages\r\n"
                           "2,4,8,64,64,1,4096,32,32,2048,1.5,full,true,2\n"
                           "\n"
                           "1,2,8,16,32,2,2048,16,24,2048,0.25,,,\n";
  const auto runs = parse_measured_runs(text, "runs.csv");
  REQUIRE(runs.size() == 2);
  const MeasuredRun& a = runs[0];
  CHECK(a.line == 3);
  CHECK(a.gpus == 64);
  CHECK(a.tp == 8);
  CHECK(a.dp == 4);
  CHECK(a.pp == 2);
  CHECK(a.global_batch == 64);
  CHECK(a.hidden == 4096);
  CHECK(a.seq_len == 2048);
  CHECK(a.iteration_ms == 1500.0);
  REQUIRE(a.settings.size() == 3);
  CHECK(a.settings[0].key == "recompute.strategy");
  CHECK(a.settings[0].column == "recompute");
  CHECK(a.settings[0].value == "full");
  CHECK(a.settings[1].key == "parallel.sequence_parallel");
  CHECK(a.settings[2].key == "parallel.virtual_stages");
  CHECK(a.settings[2].value == "2");
  const MeasuredRun& b = runs[1];
  CHECK(b.line == 5);
  CHECK(b.iteration_ms == 250.0);
  CHECK(b.settings.empty());  // empty cells keep the defaults
}

TEST_CASE("headed CSV errors name the file, the line and the column") {
  const std::string row = "2,4,8,64,64,1,4096,32,32,2048,1.5";
  SUBCASE("an unknown column") {
    const auto msg = parse_error(std::string(kHeaded) + ",recomput\n" + row + ",full\n");
    CHECK(msg.find("runs.csv:1: column 12 'recomput' is not a known column") == 0);
    CHECK(msg.find("sequence_parallel") != std::string::npos);
  }
  SUBCASE("a key the core columns own, the preset, the profile") {
    CHECK(parse_error(std::string(kHeaded) + ",parallel.tp\n").find(
              "runs.csv:1: column 12 'parallel.tp' cannot be a settings column: the core column 'tp' gives it") == 0);
    CHECK(parse_error(std::string(kHeaded) + ",model.preset\n").find("cannot be a settings column") !=
          std::string::npos);
    CHECK(parse_error(std::string(kHeaded) + ",hardware.profile\n").find("--profile") !=
          std::string::npos);
  }
  SUBCASE("the same setting twice") {
    const auto msg = parse_error(std::string(kHeaded) + ",recompute,recompute.strategy\n");
    CHECK(msg == "runs.csv:1: columns 12 'recompute' and 13 'recompute.strategy' both set recompute.strategy");
  }
  SUBCASE("a missing core column, two times, a repeated core column") {
    CHECK(parse_error("tp,dp,pp\n").find("runs.csv:1: the header has no 'gpus' column") == 0);
    CHECK(parse_error(std::string(kHeaded) + ",iteration_ms\n").find(
              "columns 11 and 12 both give the measured time") != std::string::npos);
    CHECK(parse_error(std::string(kHeaded) + ",tp\n") == "runs.csv:1: columns 3 and 12 are both 'tp'");
    CHECK(parse_error("pp,dp,tp,gpus,global_batch,micro_batch,hidden,heads,layers,seq_len\n").find(
              "the header has no measured time") != std::string::npos);
  }
  SUBCASE("a setting value its field refuses") {
    const auto msg = parse_error(std::string(kHeaded) + ",recompute,virtual_stages\n" + row +
                                 ",full,2\n" + row + ",fulll,2\n");
    CHECK(msg.find("runs.csv:3: column 12 (recompute): 'fulll' is not one of") == 0);
    const auto bad_int = parse_error(std::string(kHeaded) + ",virtual_stages\n" + row + ",two\n");
    CHECK(bad_int.find("runs.csv:2: column 12 (virtual_stages):") == 0);
  }
  SUBCASE("core cells, column count and layout as in the vTrain form") {
    CHECK(parse_error(std::string(kHeaded) + "\n2,4,8,64,64,1,4096,32,32,2048,-1\n").find(
              "runs.csv:2: column 11 (iteration_s): '-1' is not a positive number") == 0);
    CHECK(parse_error(std::string(kHeaded) + "\n2,4,8,64,64,1,4096,32,32,2048\n").find(
              "runs.csv:2: expected 11 comma-separated columns, got 10") == 0);
    CHECK(parse_error(std::string(kHeaded) + "\n2,4,8,32,64,1,4096,32,32,2048,1\n").find(
              "tp · dp · pp = 8 · 4 · 2 does not equal the 32 GPUs") != std::string::npos);
  }
  SUBCASE("a header without rows") {
    CHECK(parse_error(std::string(kHeaded) + "\n") ==
          "runs.csv: no measured rows (only blank or '#' lines and the header)");
  }
}
