#include "calibrate/raw_csv.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>

using namespace lynx;
using namespace lynx::calibrate;

namespace {

RawMeasurements sample() {
  RawMeasurements raw;
  raw.metadata = {{"device", "NVIDIA H200"}, {"sm_count", "132"}, {"date", "2025-01-02T03:04:05Z"}};
  Measurement gemm;
  gemm.kind = MeasurementKind::kGemm;
  gemm.name = "gpt-1.3b:tp1:mb1:qkv_gemm.fwd";
  gemm.dtype = "bf16";
  gemm.m = 2048;
  gemm.n = 6144;
  gemm.k = 2048;
  gemm.bytes = 2 * (2048 * 2048 + 2048 * 6144 + 2048 * 6144);
  gemm.time_us_median = 0.1;  // not exactly representable: the round trip must still be exact
  gemm.time_us_p10 = 1e-7;
  gemm.time_us_p90 = 123456.789;
  gemm.reps = 20;
  Measurement coll;
  coll.kind = MeasurementKind::kCollective;
  coll.name = "all_reduce";
  coll.dtype = "";
  coll.bytes = 1ULL << 30;
  coll.ranks = 16;
  coll.nodes = 2;
  coll.scope = "inter";
  coll.time_us_median = 2.0 / 3.0;
  coll.time_us_p10 = 0.5;
  coll.time_us_p90 = 1.0;
  coll.reps = 7;
  raw.rows = {gemm, coll};
  return raw;
}

std::string csv_text(const RawMeasurements& raw) {
  std::ostringstream out;
  write_raw_csv(out, raw);
  return out.str();
}

/// The message of the lynx::Error `fn` throws ("" if none).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

const std::string kHeader = raw_csv_header_line();
const std::string kGoodRow = "gemm,x,bf16,1,2,3,1,12,1,1,device,5,4,6,10";

}  // namespace

TEST_CASE("raw CSV: header and row format") {
  CHECK(kHeader ==
        "kind,name,dtype,m,n,k,batch,bytes,ranks,nodes,scope,time_us_median,time_us_p10,"
        "time_us_p90,reps");
  Measurement row;
  row.kind = MeasurementKind::kMemoryBound;
  row.name = "layernorm";
  row.dtype = "bf16";
  row.m = 4096;
  row.n = 2048;
  row.k = 0;
  row.bytes = 33587200;
  row.time_us_median = 12.5;
  row.time_us_p10 = 12.25;
  row.time_us_p90 = 13;
  row.reps = 20;
  CHECK(format_raw_csv_row(row) ==
        "memory_bound,layernorm,bf16,4096,2048,0,1,33587200,1,1,device,12.5,12.25,13,20");
  row.name = "a,b";
  CHECK_THROWS_AS(format_raw_csv_row(row), Error);
}

TEST_CASE("raw CSV: write -> read round trip is exact") {
  const RawMeasurements raw = sample();
  const RawMeasurements back = parse_raw_csv(csv_text(raw), "mem.csv");
  CHECK(back.metadata == raw.metadata);
  REQUIRE(back.rows.size() == 2);
  CHECK(back.rows[0] == raw.rows[0]);
  CHECK(back.rows[1] == raw.rows[1]);
  CHECK(back.rows[0].time_us_median == 0.1);
  CHECK(back.device_name() == "NVIDIA H200");
  CHECK(back.source_label == "mem.csv");

  SUBCASE("through a file and the streaming writer") {
    const auto dir = std::filesystem::temp_directory_path();
    const std::string whole = (dir / "lynxsim_test_raw_whole.csv").string();
    const std::string streamed = (dir / "lynxsim_test_raw_streamed.csv").string();
    write_raw_csv_file(whole, raw);
    {
      RawCsvWriter writer(streamed, raw.metadata);
      for (const Measurement& row : raw.rows) writer.append(row);
      CHECK(writer.rows_written() == 2);
    }
    const RawMeasurements a = read_raw_csv(whole);
    const RawMeasurements b = read_raw_csv(streamed);
    CHECK(a.rows == raw.rows);
    CHECK(b.rows == raw.rows);
    CHECK(b.metadata == raw.metadata);
    CHECK(a.source_label == whole);
    std::filesystem::remove(whole);
    std::filesystem::remove(streamed);
  }
}

TEST_CASE("raw CSV: comments, blank lines and merging") {
  const std::string text = "# device: GPU A\n# free comment without colon\n\n" + kHeader +
                           "\n" + kGoodRow + "\n# later comment: ignored\n\n" + kGoodRow + "\n";
  const RawMeasurements raw = parse_raw_csv(text, "a.csv");
  CHECK(raw.rows.size() == 2);
  REQUIRE(raw.metadata.size() == 1);
  CHECK(raw.metadata_value("device") == "GPU A");
  CHECK(raw.metadata_value("missing").empty());

  const RawMeasurements other =
      parse_raw_csv("# device: GPU B\n" + kHeader + "\n" + kGoodRow, "b.csv");
  const RawMeasurements merged = merge_raw({raw, other});
  CHECK(merged.rows.size() == 3);
  CHECK(merged.device_name() == "GPU A");
  CHECK(merged.metadata_value("file2.device") == "GPU B");
  CHECK(merged.source_label == "a.csv, b.csv");
  CHECK(parse_raw_csv(kHeader + "\n", "e.csv").device_name() == "unknown device");
}

TEST_CASE("raw CSV: malformed input names the line") {
  const auto parse = [](const std::string& text) {
    return error_of([&] { (void)parse_raw_csv(text, "bad.csv"); });
  };
  // Line numbers are 1-based and count comments and blank lines.
  CHECK(parse("# device: x\n" + kGoodRow).find("bad.csv:2: expected the raw CSV header") !=
        std::string::npos);
  CHECK(parse("# only a comment\n").find("bad.csv: no header line") != std::string::npos);
  const std::string head = "# device: x\n\n" + kHeader + "\n";  // data starts at line 4
  CHECK(
      parse(head + "gemm,x,bf16,1,2,3\n").find("bad.csv:4: expected 15 comma-separated columns") !=
      std::string::npos);
  CHECK(parse(head + kGoodRow + "\ngemm,x,bf16,abc,2,3,1,12,1,1,device,5,4,6,10\n")
            .find("bad.csv:5: column 'm': expected an integer, got 'abc'") != std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,-12,1,1,device,5,4,6,10\n")
            .find("bad.csv:4: column 'bytes': expected a non-negative integer") !=
        std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,12,1,1,device,5x,4,6,10\n")
            .find("bad.csv:4: column 'time_us_median': expected a number, got '5x'") !=
        std::string::npos);
  CHECK(parse(head + "gem,x,bf16,1,2,3,1,12,1,1,device,5,4,6,10\n")
            .find("bad.csv:4: column 'kind': unknown measurement kind 'gem'") != std::string::npos);
  CHECK(parse(head + "gemm,x,int8,1,2,3,1,12,1,1,device,5,4,6,10\n")
            .find("bad.csv:4: column 'dtype'") != std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,12,1,1,galaxy,5,4,6,10\n")
            .find("bad.csv:4: column 'scope'") != std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,12,1,1,device,5,6,7,10\n")
            .find("bad.csv:4: percentiles out of order") != std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,12,1,1,device,-5,-6,7,10\n")
            .find("bad.csv:4: column 'time_us_median' must be a positive") != std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,12,1,1,device,inf,4,inf,10\n")
            .find("bad.csv:4: column 'time_us_median' must be a positive finite") !=
        std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,12,2,3,intra,5,4,6,10\n")
            .find("bad.csv:4: column 'nodes' must be in [1, ranks = 2]") != std::string::npos);
  CHECK(parse(head + "gemm,x,bf16,1,2,3,1,12,1,1,device,5,4,6,0\n")
            .find("bad.csv:4: column 'reps' must be >= 1") != std::string::npos);
  CHECK(parse(head + "gemm,,bf16,1,2,3,1,12,1,1,device,5,4,6,1\n")
            .find("bad.csv:4: column 'name' is empty") != std::string::npos);
  CHECK(error_of([] { (void)read_raw_csv("/nonexistent/raw.csv"); })
            .find("/nonexistent/raw.csv: cannot open the raw measurements CSV: no such file") != std::string::npos);
}
