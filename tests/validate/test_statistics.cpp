// Error and rank statistics on small hand-computed cases.
#include "common/error.hpp"
#include "validate/statistics.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace lynx::validate;

TEST_CASE("Kendall tau-b on hand-counted pairs") {
  SUBCASE("identical and reversed order") {
    CHECK(kendall_tau_b({1, 2, 3, 4}, {10, 20, 30, 40}) == doctest::Approx(1.0));
    CHECK(kendall_tau_b({1, 2, 3, 4}, {40, 30, 20, 10}) == doctest::Approx(-1.0));
  }
  SUBCASE("one discordant pair of three") {
    // Pairs (0,1): dx -1, dy -2 concordant; (0,2): -2, -1 concordant; (1,2): -1, +1
    // discordant. C = 2, D = 1, no ties, N0 = 3: tau = (2 - 1) / 3.
    CHECK(kendall_tau_b({1, 2, 3}, {1, 3, 2}) == doctest::Approx(1.0 / 3.0));
  }
  SUBCASE("ties in x and in y") {
    // x = 1 2 2 3, y = 1 2 3 3. Pairs: (0,1) C, (0,2) C, (0,3) C, (1,2) tied in x,
    // (1,3) C, (2,3) tied in y. C = 4, D = 0, N0 = 6, Tx = 1, Ty = 1:
    // tau_b = 4 / sqrt((6 - 1)(6 - 1)) = 0.8 (tau-a would give 4/6).
    CHECK(kendall_tau_b({1, 2, 2, 3}, {1, 2, 3, 3}) == doctest::Approx(0.8));
  }
  SUBCASE("a pair tied in both counts in both") {
    // x = 1 1 2, y = 1 1 0: (0,1) tied in x and y; (0,2) and (1,2) discordant.
    // C = 0, D = 2, N0 = 3, Tx = Ty = 1: tau_b = -2 / sqrt(2 · 2) = -1.
    CHECK(kendall_tau_b({1, 1, 2}, {1, 1, 0}) == doctest::Approx(-1.0));
  }
  SUBCASE("undefined cases are errors") {
    CHECK_THROWS_AS(kendall_tau_b({1, 1, 1}, {1, 2, 3}), lynx::Error);
    CHECK_THROWS_AS(kendall_tau_b({1}, {1}), lynx::Error);
    CHECK_THROWS_AS(kendall_tau_b({1, 2}, {1, 2, 3}), lynx::Error);
  }
}

TEST_CASE("MAPE, median APE and mean absolute log error on a hand case") {
  // Predicted 110, 90, 200 against 100 each: APEs 10, 10, 100.
  const std::vector<double> predicted{110, 90, 200};
  const std::vector<double> measured{100, 100, 100};
  CHECK(absolute_percentage_error(90, 100) == doctest::Approx(10.0));
  // (10 + 10 + 100) / 3 = 40.
  CHECK(mean_absolute_percentage_error(predicted, measured) == doctest::Approx(40.0));
  // Sorted 10, 10, 100: the middle one.
  CHECK(median_absolute_percentage_error(predicted, measured) == doctest::Approx(10.0));
  // (ln 1.1 + |ln 0.9| + ln 2) / 3 = (0.0953102 + 0.1053605 + 0.6931472) / 3 = 0.2979393.
  CHECK(mean_absolute_log_error(predicted, measured) == doctest::Approx(0.2979393).epsilon(1e-6));
  CHECK_THROWS_AS(mean_absolute_percentage_error({1, 2}, {1}), lynx::Error);
  CHECK_THROWS_AS(mean_absolute_percentage_error({}, {}), lynx::Error);
  CHECK_THROWS_AS(absolute_percentage_error(1, 0), lynx::Error);
}

TEST_CASE("median of an even count is the mean of the middle two") {
  CHECK(median({4, 1, 3, 2}) == doctest::Approx(2.5));
  CHECK(median({7}) == doctest::Approx(7.0));
  CHECK_THROWS_AS(median({}), lynx::Error);
}
