// Units: every quantity kind, decimal vs binary prefixes, bits vs bytes, rounding, rejects and
// the written form. Expected values are computed by hand in the comments.
#include "tests/error_of.hpp"
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "scenarios/units.hpp"

using namespace lynx;
using namespace lynx::units;

namespace {

using lynx::test::error_of;

}  // namespace

TEST_CASE("sizes: decimal and binary prefixes, exact") {
  CHECK(parse_size_bytes("80GiB") == 85'899'345'920ULL);  // 80 * 2^30
  CHECK(parse_size_bytes("40GB") == 40'000'000'000ULL);   // 40 * 10^9
  CHECK(parse_size_bytes("512MiB") == 536'870'912ULL);    // 512 * 2^20
  CHECK(parse_size_bytes("1.5KB") == 1'500ULL);           // 1.5 * 10^3
  CHECK(parse_size_bytes("1.5KiB") == 1'536ULL);          // 1.5 * 1024
  CHECK(parse_size_bytes("1kB") == 1'000ULL);
  CHECK(parse_size_bytes("4096B") == 4'096ULL);
  CHECK(parse_size_bytes("1TiB") == 1'099'511'627'776ULL);  // 2^40
  CHECK(parse_size_bytes("2PB") == 2'000'000'000'000'000ULL);
  CHECK(parse_size_bytes("2.5e3B") == 2'500ULL);
  CHECK(parse_size_bytes(" 80 GiB ") == 85'899'345'920ULL);
  CHECK(parse_size_bytes("143771MiB") == 150'754'820'096ULL);  // 143771 * 1048576
}

TEST_CASE("sizes: rounding to the nearest byte, half up") {
  CHECK(parse_size_bytes("0.5B") == 1);                           // 0.5 -> 1
  CHECK(parse_size_bytes("0.4B", Bound::kNonNegative) == 0);      // 0.4 -> 0
  CHECK(parse_size_bytes("1.0000000005GB") == 1'000'000'001ULL);  // ...000.5 -> up
  CHECK(parse_size_bytes("1.0000000004GB") == 1'000'000'000ULL);  // ...000.4 -> down
  CHECK(parse_size_bytes("0.001KiB") == 1);                       // 1.024 -> 1
}

TEST_CASE("sizes: rejects") {
  CHECK(error_of([] { parse_size_bytes("4096"); }).find("a unit is required") != std::string::npos);
  CHECK(error_of([] { parse_size_bytes("-1GiB"); }) == "expected a non-negative size, got '-1GiB'");
  CHECK(error_of([] { parse_size_bytes("0GiB"); }) == "expected a positive size, got '0GiB'");
  CHECK(parse_size_bytes("0GiB", Bound::kNonNegative) == 0);
  // 0.4 B rounds to 0, which a positive field refuses.
  CHECK(error_of([] { parse_size_bytes("0.4B"); }) == "expected a positive size, got '0.4B'");
  CHECK(
      error_of([] { parse_size_bytes("80Gb"); }).find("expected a size like '80GiB', got '80Gb'") !=
      std::string::npos);  // bits are not a size
  CHECK_THROWS_AS(parse_size_bytes("GiB"), Error);
  CHECK_THROWS_AS(parse_size_bytes("1.2.3GB"), Error);
  CHECK_THROWS_AS(parse_size_bytes("80GiBs"), Error);
  CHECK_THROWS_AS(parse_size_bytes(""), Error);
  // 20000 * 2^50 = 2.25e19 > 2^64 - 1 = 1.8e19
  CHECK(error_of([] { parse_size_bytes("20000PiB"); }) == "size '20000PiB' is too large");
}

TEST_CASE("bandwidth: bytes and bits") {
  CHECK(parse_bandwidth_bytes_per_s("600GB/s") == 600'000'000'000ULL);
  CHECK(parse_bandwidth_bytes_per_s("200Gb/s") == 25'000'000'000ULL);  // 200e9 / 8
  CHECK(parse_bandwidth_bytes_per_s("400Gb/s") == 50'000'000'000ULL);  // 400e9 / 8
  CHECK(parse_bandwidth_bytes_per_s("25GiB/s") == 26'843'545'600ULL);  // 25 * 2^30
  CHECK(parse_bandwidth_bytes_per_s("31.5GB/s") == 31'500'000'000ULL);
  CHECK(parse_bandwidth_bytes_per_s("3.35TB/s") == 3'350'000'000'000ULL);
  CHECK(parse_bandwidth_bytes_per_s("4b/s") == 1);   // 0.5 B/s rounds up
  CHECK(parse_bandwidth_bytes_per_s("12b/s") == 2);  // 1.5 B/s rounds up
  CHECK(parse_bandwidth_bytes_per_s("0GB/s", Bound::kNonNegative) == 0);
}

TEST_CASE("bandwidth: rejects") {
  CHECK(error_of([] {
          parse_bandwidth_bytes_per_s("600GB");
        }).rfind("expected a bandwidth like '600GB/s', got '600GB'", 0) == 0);
  CHECK(error_of([] { parse_bandwidth_bytes_per_s("-1GB/s"); }) ==
        "expected a non-negative bandwidth, got '-1GB/s'");
  CHECK(error_of([] { parse_bandwidth_bytes_per_s("0GB/s"); }) ==
        "expected a positive bandwidth, got '0GB/s'");
  // 1 bit/s = 0.125 B/s rounds to 0.
  CHECK(error_of([] { parse_bandwidth_bytes_per_s("1b/s"); }) ==
        "expected a positive bandwidth, got '1b/s'");
  CHECK_THROWS_AS(parse_bandwidth_bytes_per_s("600 GB/sec"), Error);
  CHECK_THROWS_AS(parse_bandwidth_bytes_per_s("600"), Error);
}

TEST_CASE("time: every unit, in picoseconds") {
  CHECK(parse_time_ps("1.5us") == 1'500'000);
  CHECK(parse_time_ps("10ns") == 10'000);
  CHECK(parse_time_ps("2ms") == 2'000'000'000);
  CHECK(parse_time_ps("1s") == 1'000'000'000'000);
  CHECK(parse_time_ps("300ps") == 300);
  CHECK(parse_time_ps("2.5\u00b5s") == 2'500'000);
  CHECK(parse_time_ps("0s") == 0);
  CHECK(parse_time_ps("1.0005ns") == 1'001);  // 1000.5 ps rounds up
  CHECK(parse_time_ps("0.4ps") == 0);
  CHECK(error_of([] { parse_time_ps("0.4ps", Bound::kPositive); }) ==
        "expected a positive time, got '0.4ps'");
}

TEST_CASE("time: rejects") {
  CHECK(error_of([] { parse_time_ps("12 parsecs"); }) ==
        "expected a time like '1.5us', got '12 parsecs' (units: ps, ns, us, ms, s)");
  CHECK(error_of([] { parse_time_ps("-2us"); }) == "expected a non-negative time, got '-2us'");
  CHECK_THROWS_AS(parse_time_ps("1.5"), Error);
  CHECK_THROWS_AS(parse_time_ps("1.5 usec"), Error);
  // 1e10 s = 1e22 ps > 2^63 - 1 ps (about 9.2e18)
  CHECK(error_of([] { parse_time_ps("1e10s"); }) == "time '1e10s' is too large");
}

TEST_CASE("FLOP rates") {
  CHECK(parse_flop_rate_per_s("312TFLOPS") == 312'000'000'000'000ULL);
  CHECK(parse_flop_rate_per_s("989.5TFLOPS") == 989'500'000'000'000ULL);
  CHECK(parse_flop_rate_per_s("1.2PFLOPS") == 1'200'000'000'000'000ULL);
  CHECK(parse_flop_rate_per_s("312 TFLOP/s") == 312'000'000'000'000ULL);
  CHECK(parse_flop_rate_per_s("19.5GFLOPS") == 19'500'000'000ULL);
  CHECK_THROWS_AS(parse_flop_rate_per_s("312TFLOP"), Error);
  CHECK_THROWS_AS(parse_flop_rate_per_s("312TiFLOPS"), Error);  // no binary FLOP rates
  CHECK(error_of([] { parse_flop_rate_per_s("0TFLOPS"); }) ==
        "expected a positive FLOP rate, got '0TFLOPS'");
}

TEST_CASE("plain integers, numbers, ratios and booleans") {
  CHECK(parse_integer("48") == 48);
  CHECK(parse_integer("-3") == -3);
  CHECK(error_of([] { parse_integer("2.0"); }) == "expected an integer, got '2.0'");
  CHECK_THROWS_AS(parse_integer("abc"), Error);
  CHECK_THROWS_AS(parse_integer(""), Error);
  CHECK(error_of([] { parse_integer("99999999999999999999"); }) ==
        "integer '99999999999999999999' is out of range");

  CHECK(parse_number("0.75") == 0.75);
  CHECK(parse_number("1e9") == 1e9);
  CHECK(parse_number("3") == 3.0);
  CHECK_THROWS_AS(parse_number("1e9x"), Error);
  CHECK_THROWS_AS(parse_number("inf"), Error);
  CHECK_THROWS_AS(parse_number("nan"), Error);

  CHECK(parse_ratio("0.8") == 0.8);
  CHECK(parse_ratio("80%") == 0.8);  // 80 / 100
  CHECK(parse_ratio("12.5%") == 0.125);
  CHECK(parse_ratio("1") == 1.0);
  CHECK(error_of([] { parse_ratio("1.5"); }) ==
        "expected a ratio between 0 and 1 (or 0% to 100%), got '1.5'");
  CHECK_THROWS_AS(parse_ratio("150%"), Error);
  CHECK_THROWS_AS(parse_ratio("-0.1"), Error);
  CHECK_THROWS_AS(parse_ratio("high"), Error);

  CHECK(parse_bool("true"));
  CHECK_FALSE(parse_bool("False"));
  CHECK(error_of([] { parse_bool("yes"); }) == "expected true or false, got 'yes'");
  CHECK_THROWS_AS(parse_bool("1"), Error);
}

TEST_CASE("written form: shortest exact spelling") {
  CHECK(format_size(85'899'345'920ULL) == "80GiB");
  CHECK(format_size(40'000'000ULL) == "40MB");   // 40e6 is not a whole number of KiB
  CHECK(format_size(1'572'864ULL) == "1.5MiB");  // 1.5 * 2^20
  CHECK(format_size(1'536ULL) == "1536B");       // shorter than "1.5KiB"
  CHECK(format_size(1'000ULL) == "1KB");
  CHECK(format_size(1'024ULL) == "1KiB");
  CHECK(format_size(0) == "0B");
  CHECK(format_bandwidth(25'000'000'000ULL) == "25GB/s");
  CHECK(format_bandwidth(31'500'000'000ULL) == "31.5GB/s");
  CHECK(format_bandwidth(26'843'545'600ULL) == "25GiB/s");
  CHECK(format_time(1'500'000) == "1.5us");
  CHECK(format_time(300) == "300ps");
  CHECK(format_time(0) == "0s");
  CHECK(format_time(2'000'000'000) == "2ms");
  CHECK(format_time(1'500) == "1.5ns");
  CHECK(format_flop_rate(989'500'000'000'000ULL) == "989.5TFLOPS");
  CHECK(format_flop_rate(1'200'000'000'000'000ULL) == "1.2PFLOPS");
  CHECK(format_flop_rate(312'000'000'000'000ULL) == "312TFLOPS");
  CHECK(format_number(0.75) == "0.75");
}

TEST_CASE("written form parses back to the same value") {
  const std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();
  for (const std::uint64_t v : {std::uint64_t{1}, std::uint64_t{123'456'789},
                                std::uint64_t{1} << 50, std::uint64_t{999'999'999'999}, max_u64}) {
    CAPTURE(v);
    CHECK(parse_size_bytes(format_size(v)) == v);
    CHECK(parse_bandwidth_bytes_per_s(format_bandwidth(v)) == v);
    CHECK(parse_flop_rate_per_s(format_flop_rate(v)) == v);
  }
  for (const TimePs t :
       {TimePs{1}, TimePs{999}, TimePs{123'456'789'012}, std::numeric_limits<TimePs>::max()}) {
    CAPTURE(t);
    CHECK(parse_time_ps(format_time(t)) == t);
  }
  for (const double x : {0.1, 1e9, 3.0e-7, 0.8}) CHECK(parse_number(format_number(x)) == x);
}
