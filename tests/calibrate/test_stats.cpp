#include "calibrate/least_squares.hpp"
#include "calibrate/stats.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

using namespace lynx;
using namespace lynx::calibrate;

TEST_CASE("percentile interpolates between closest ranks") {
  // Sorted {1,2,3,4,5}: rank = q/100·4. p50 -> rank 2 -> 3; p10 -> rank 0.4 -> 1 + 0.4 = 1.4;
  // p90 -> rank 3.6 -> 4 + 0.6 = 4.6.
  const std::vector<double> values{5, 1, 4, 2, 3};
  CHECK(median(values) == doctest::Approx(3.0));
  CHECK(percentile(values, 10) == doctest::Approx(1.4));
  CHECK(percentile(values, 90) == doctest::Approx(4.6));
  CHECK(percentile(values, 0) == 1.0);
  CHECK(percentile(values, 100) == 5.0);
  // Even count {1,2,3,4}: median rank 1.5 -> 2.5.
  CHECK(median({4, 3, 2, 1}) == doctest::Approx(2.5));

  const TimingSummary s = summarize(values);
  CHECK(s.median == doctest::Approx(3.0));
  CHECK(s.p10 == doctest::Approx(1.4));
  CHECK(s.p90 == doctest::Approx(4.6));
  CHECK(s.reps == 5);

  CHECK_THROWS_AS(median({}), Error);
  CHECK_THROWS_AS(percentile(values, 101), Error);
  CHECK_THROWS_AS(summarize({}), Error);
}

TEST_CASE("weighted least squares") {
  SUBCASE("line through exact points") {
    // y = 2 + 3x at x = 1, 2, 4; any positive weights give the exact line.
    const LineFit fit = fit_line_weighted({1, 2, 4}, {5, 8, 14}, {1, 10, 0.5});
    CHECK(fit.intercept == doctest::Approx(2.0));
    CHECK(fit.slope == doctest::Approx(3.0));
  }
  SUBCASE("weights decide between inconsistent points") {
    // Points (0,0), (1,1), (1,3): at x = 1 the weighted mean of y is (1·w1 + 3·w2)/(w1 + w2).
    // With w = (1, 1, 3): mean at x=1 is (1 + 9)/4 = 2.5, the line passes (0,0) and (1,2.5).
    const LineFit fit = fit_line_weighted({0, 1, 1}, {0, 1, 3}, {1, 1, 3});
    CHECK(fit.intercept == doctest::Approx(0.0));
    CHECK(fit.slope == doctest::Approx(2.5));
  }
  SUBCASE("two terms without intercept") {
    // y = 0.5·x1 + 4·x2 exactly.
    const TwoTermFit fit =
        fit_two_terms_weighted({1, 2, 3, 4}, {1, 0, 2, 5}, {4.5, 1, 9.5, 22}, {1, 1, 1, 1});
    CHECK(fit.a == doctest::Approx(0.5));
    CHECK(fit.b == doctest::Approx(4.0));
    CHECK_THROWS_AS(fit_two_terms_weighted({1, 2}, {2, 4}, {1, 2}, {1, 1}), Error);
  }
  SUBCASE("proportional") {
    // Σwxy/Σwx² with w = 1: (1·2 + 2·4.5)/(1 + 4) = 11/5.
    CHECK(fit_proportional_weighted({1, 2}, {2, 4.5}, {1, 1}) == doctest::Approx(2.2));
  }
  SUBCASE("errors") {
    CHECK_THROWS_AS(fit_line_weighted({1}, {1}, {1}), Error);
    CHECK_THROWS_AS(fit_line_weighted({1, 1}, {1, 2}, {1, 1}), Error);
    CHECK_THROWS_AS(fit_line_weighted({1, 2}, {1, 2}, {1, 0}), Error);
    CHECK_THROWS_AS(fit_line_weighted({1, 2}, {1}, {1, 1}), Error);
  }
}
