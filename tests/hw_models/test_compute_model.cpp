// Tests for hw_models/compute_model: roofline × efficiency + launch overhead, rounded up.
#include "hw_models/compute_model.hpp"

#include "hw_fixtures.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

using namespace lynx;
using lynx::model::OpKind;

TEST_CASE("efficiency curve") {
  CHECK(hw_models::efficiency({1.0, 0.0}, 123.0) == 1.0);
  // eff(w) = max·w/(w + half): 0.8·1e9/(1e9 + 1e9) = 0.4.
  CHECK(hw_models::efficiency({0.8, 1e9}, 1e9) == doctest::Approx(0.4).epsilon(1e-15));
  CHECK(hw_models::efficiency({0.8, 1e9}, 3e9) == doctest::Approx(0.6).epsilon(1e-15));
  CHECK_THROWS_AS(hw_models::efficiency({1.0, 0.0}, 0.0), lynx::Error);
  CHECK_THROWS_AS(hw_models::efficiency({0.0, 0.0}, 1.0), lynx::Error);
  CHECK_THROWS_AS(hw_models::efficiency({1.0, -1.0}, 1.0), lynx::Error);
}

TEST_CASE("kernel time") {
  HardwareSpec hw = test::nvswitch_cluster(1);  // 100 TFLOP/s, 2 TB/s
  hw.kernel_launch_ps = 0;
  hw.gemm = {1.0, 0.0};
  hw.attention = {1.0, 0.0};
  hw.memory_bound = {1.0, 0.0};

  SUBCASE("GEMM at the roofline with max 1, half 0: flops / peak") {
    // 1e12 FLOPs / 1e14 FLOP/s = 0.01 s = 1e10 ps; its 1e6 bytes would take only 5e5 ps.
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 1e12, 1e6) == 10'000'000'000);
  }
  SUBCASE("GEMM below the roofline: the curve lowers the rate") {
    hw.gemm = {0.8, 1e12};  // eff(1e12) = 0.4 -> 1e12 / 4e13 = 0.025 s
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 1e12, 0) == 25'000'000'000);
  }
  SUBCASE("attention uses its own curve") {
    hw.attention = {0.5, 0.0};  // 1e12 / 5e13 = 0.02 s
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kAttention, 1e12, 0) == 20'000'000'000);
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 1e12, 0) == 10'000'000'000);
  }
  SUBCASE("memory-bound: bytes / HBM bandwidth, FLOPs ignored") {
    // 2e9 bytes / 2e12 B/s = 1e-3 s = 1e9 ps, whatever the FLOPs.
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kMemoryBound, 1e15, 2e9) == 1'000'000'000);
    hw.memory_bound = {0.5, 1e6};  // eff(1e6) = 0.25 -> 1e6 / 5e11 = 2e-6 s
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kMemoryBound, 0, 1e6) == 2'000'000);
  }
  SUBCASE("a GEMM with little reuse is memory-bound") {
    // 1e9 FLOPs -> 1e7 ps; 1e9 bytes -> 5e8 ps.
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 1e9, 1e9) == 500'000'000);
  }
  SUBCASE("launch overhead is added") {
    hw.kernel_launch_ps = 3'000'000;  // 3 us
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 1e12, 0) == 10'003'000'000);
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kMemoryBound, 0, 2e9) == 1'003'000'000);
  }
  SUBCASE("no work takes 0, even with a launch overhead") {
    hw.kernel_launch_ps = 3'000'000;
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 0, 0) == 0);
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kMemoryBound, 1e9, 0) == 0);  // FLOPs ignored
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kCollective, 0, 0) == 0);
  }
  SUBCASE("rounding up to whole ps") {
    hw.peak_flops_per_s = 3'000'000'000'000;  // 3e12: 1 FLOP = 1/3 ps
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 1, 0) == 1);
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 4, 0) == 2);   // 4/3 ps
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 6, 0) == 2);   // exactly 2 ps
    // 800 FLOPs at 1e12 · 0.8 = 1000 ps exactly; the inexact 0.8 must not push it to 1001.
    hw.peak_flops_per_s = 1'000'000'000'000;
    hw.gemm = {0.8, 0.0};
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 800, 0) == 1000);
    CHECK(hw_models::kernel_time_ps(hw, OpKind::kGemm, 801, 0) == 1002);  // 1001.25 -> 1002
  }
  SUBCASE("bad inputs") {
    CHECK_THROWS_AS(hw_models::kernel_time_ps(hw, OpKind::kGemm, -1, 0), lynx::Error);
    hw.peak_flops_per_s = 0;
    CHECK_THROWS_AS(hw_models::kernel_time_ps(hw, OpKind::kGemm, 1, 0), lynx::Error);
  }
}
