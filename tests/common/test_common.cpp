// The shared helpers of common/: one median, trim and split, and the checked file reader.
#include "common/checked.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/statistics.hpp"
#include "common/text.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

using namespace lynx;
using lynx::test::error_of;

TEST_CASE("median: the middle value, or the mean of the two middle values") {
  CHECK(median(std::vector<double>{3, 1, 2}) == 2.0);
  CHECK(median(std::vector<double>{4, 1, 3, 2}) == 2.5);
  CHECK(percentile({1, 2, 3, 4, 5}, 10) == doctest::Approx(1.4));
  // Integers (picoseconds): the same definition, exact, rounded down.
  CHECK(median(std::vector<std::int64_t>{7, 1, 4}) == 4);
  CHECK(median(std::vector<std::int64_t>{1, 4, 10, 2}) == 3);  // (2 + 4) / 2
  CHECK(median(std::vector<std::int64_t>{1, 2}) == 1);         // 1.5 rounded down
  CHECK(median(std::vector<std::int64_t>{INT64_MAX - 2, INT64_MAX}) == INT64_MAX - 1);  // no overflow
  CHECK_THROWS_AS(median(std::vector<double>{}), Error);
}

TEST_CASE("trim and split") {
  CHECK(trim(" \t a b \r") == "a b");
  CHECK(trim("   ").empty());
  const auto fields = split("a,,b ,", ',');
  REQUIRE(fields.size() == 4);
  CHECK(fields[0] == "a");
  CHECK(fields[1].empty());
  CHECK(fields[2] == "b ");
  CHECK(fields[3].empty());
  CHECK(split("", ',').size() == 1);
}

TEST_CASE("read_text_file: regular files only, up to a size limit") {
  const auto path = std::filesystem::temp_directory_path() / "lynxsim_test_common_read.txt";
  std::ofstream(path) << "0123456789";
  CHECK(read_text_file(path.string(), "test file") == "0123456789");
  CHECK(error_of([&] { read_text_file(path.string(), "test file", 4); }) ==
        path.string() + ": the test file is 10 bytes, more than the 4 bytes lynxsim reads");
  std::filesystem::remove(path);
  CHECK(error_of([] { read_text_file("/dev/null", "CSV"); }) ==
        "/dev/null: cannot read the CSV: not a regular file");
}

TEST_CASE("OutputFile and write_text_file report failed writes") {
  // /dev/full accepts the open and refuses every write with ENOSPC.
  CHECK(error_of([] { write_text_file("/dev/full", std::string(100, 'x'), "-o"); }) ==
        "-o: cannot write '/dev/full': No space left on device");
  CHECK(error_of([] { OutputFile("/nonexistent/dir/x.txt", "--trace"); })
            .rfind("--trace: cannot open '/nonexistent/dir/x.txt' for writing", 0) == 0);
  const auto path = std::filesystem::temp_directory_path() / "lynxsim_test_output_file.txt";
  write_text_file(path.string(), "ok\n", "-o");
  CHECK(read_text_file(path.string(), "test file") == "ok\n");
  std::filesystem::remove(path);
}

TEST_CASE("checked products and sums: exact in 64 bits, an error naming the quantity past them") {
  CHECK(try_product({2, 3, 7}) == 42);
  CHECK(try_product({}) == 1);
  CHECK(try_product({INT64_MAX, 1}) == INT64_MAX);
  CHECK(!try_product({std::int64_t{1} << 32, std::int64_t{1} << 31}));  // 2^63 does not fit
  CHECK(!try_product({1024, 1024, 1048576, 1048576, 1048576}));
  CHECK(try_sum({INT64_MAX - 1, 1}) == INT64_MAX);
  CHECK(!try_sum({INT64_MAX, 1}));
  CHECK(checked_product("tp x pp x dp", {8, 16, 8}) == 1024);
  CHECK(error_of([] { checked_product("tp x pp x dp", {1 << 30, 1 << 30, 1 << 30}); }) ==
        "tp x pp x dp: 1073741824 * 1073741824 * 1073741824 overflows 64 bits");
  CHECK(error_of([] { checked_sum("ops per GPU", {INT64_MAX, 2}); }) ==
        "ops per GPU: 9223372036854775807 + 2 overflows 64 bits");
}
