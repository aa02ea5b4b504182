#include "calibrate/fit_command.hpp"
#include "calibrate/fitter.hpp"
#include "hw_models/topology.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/error.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace lynx;
using namespace lynx::calibrate;

namespace {

/// A hand-built base profile: an 8-GPU NVSwitch node with H200-like datasheet numbers.
HardwareSpec base_profile() {
  HardwareSpec hw;
  hw.profile = "test-base";
  hw.gpu_name = "TEST-GPU";
  hw.peak_flops_per_s = 989'500'000'000'000;
  hw.hbm_bw_bytes_per_s = 4'800'000'000'000;
  hw.memory_bytes = 141'000'000'000;
  hw.kernel_launch_ps = 5'000'000;  // 5 us
  hw.gemm = {0.5, 1e9};
  hw.attention = {0.5, 1e9};
  hw.memory_bound = {0.5, 1e6};
  hw.contention_factor = 0.3;
  hw.nodes = 1;
  hw.gpus_per_node = 8;
  hw.intra_node = IntraNode::kNvSwitch;
  hw.nvlink = {450'000'000'000, 1'000'000};
  hw.pcie = {63'000'000'000, 500'000};
  hw.gpus_per_pcie_switch = 2;
  hw.pcie_host = {63'000'000'000, 1'000'000};
  hw.nics_per_node = 8;
  hw.nic = {50'000'000'000, 1'500'000};
  hw.collective_efficiency = 0.8;
  return hw;
}

/// The parameters the synthetic measurements are generated from (the brief's values).
struct Truth {
  double launch_s = 3e-6;
  EfficiencyCurve gemm{0.8, 3e9};          // FLOPs
  EfficiencyCurve attention{0.6, 1e9};     // FLOPs
  EfficiencyCurve memory_bound{0.85, 2e6};  // bytes
  double contention = 0.15;
  double comm_contention = 0.55;  // the communication side (comm_alone / comm_concurrent rows)
  double intra_ring_bw = 250e9;     // achieved per-rank ring bandwidth in a node
  double all_reduce_alpha_s = 8e-6;  // 8 ranks: 2·7 = 14 steps
  double nic_ring_bw = 40e9;         // achieved per NIC across nodes
  TimePs nic_latency_ps = 2'000'000;
  double noise = 0.0;                // relative amplitude of the deterministic noise
};

/// Deterministic "noise": 1 + a·sin(1.7·i + 0.3), a different phase for every row.
struct Noise {
  double amplitude;
  int i = 0;
  double next() { return 1.0 + amplitude * std::sin(1.7 * i++ + 0.3); }
};

Measurement row(MeasurementKind kind, std::string name, std::string dtype, double time_s) {
  Measurement r;
  r.kind = kind;
  r.name = std::move(name);
  r.dtype = std::move(dtype);
  r.time_us_median = time_s * 1e6;
  r.time_us_p10 = r.time_us_median;
  r.time_us_p90 = r.time_us_median;
  r.reps = 10;
  return r;
}

/// t = L + (w + half)/(roof·max): the profile's kernel model (hw_models/compute_model.hpp).
double kernel_time(const Truth& truth, const EfficiencyCurve& curve, double work, double roof) {
  return truth.launch_s + (work + curve.half_work) / (roof * curve.max);
}

RawMeasurements synthetic(const Truth& truth, const HardwareSpec& base, bool with_inter) {
  Noise noise{truth.noise};
  const double peak = static_cast<double>(base.peak_flops_per_s);
  const double hbm = static_cast<double>(base.hbm_bw_bytes_per_s);
  RawMeasurements raw;
  raw.metadata = {{"device", "Synthetic GPU"}, {"sm_count", "132"}};
  raw.source_label = "synthetic.csv";

  for (int i = 0; i < 5; ++i)
    raw.rows.push_back(
        row(MeasurementKind::kLaunch, "empty_kernel", "", truth.launch_s * noise.next()));
  // Host-paced launches are informational: 10x the device time, must not move the fit.
  raw.rows.push_back(
      row(MeasurementKind::kLaunch, "empty_kernel_host_paced", "", 10 * truth.launch_s));

  for (std::int64_t n : {128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192}) {
    const double flops = 2.0 * static_cast<double>(n * n * n);
    Measurement r = row(MeasurementKind::kGemm, "square", "bf16",
                        kernel_time(truth, truth.gemm, flops, peak) * noise.next());
    r.m = r.n = r.k = n;
    raw.rows.push_back(r);
    // The same shape in fp16, 10x slower: must be ignored by a bf16 fit.
    Measurement fp16 = r;
    fp16.dtype = "fp16";
    fp16.time_us_median *= 10;
    fp16.time_us_p10 = fp16.time_us_p90 = fp16.time_us_median;
    raw.rows.push_back(fp16);
  }
  for (std::int64_t s : {128, 256, 512, 1024, 2048, 4096}) {
    const double flops = 2.0 * 32.0 * static_cast<double>(s * s * 128);
    Measurement r = row(MeasurementKind::kAttention, "qk", "bf16",
                        kernel_time(truth, truth.attention, flops, peak) * noise.next());
    r.m = r.n = s;
    r.k = 128;
    r.batch = 32;
    raw.rows.push_back(r);
  }
  for (std::uint64_t bytes = 4096; bytes <= (1ULL << 30); bytes *= 4) {
    Measurement r = row(MeasurementKind::kMemoryBound, "elementwise", "bf16",
                        kernel_time(truth, truth.memory_bound, static_cast<double>(bytes), hbm) *
                            noise.next());
    r.bytes = bytes;
    raw.rows.push_back(r);
  }
  Noise comm_noise{truth.noise, 101};
  for (std::int64_t n : {2048, 4096, 8192}) {
    const double alone = kernel_time(truth, truth.gemm, 2.0 * static_cast<double>(n * n * n), peak);
    for (const char* name : {"gemm_alone", "gemm_concurrent"}) {
      const bool concurrent = std::string(name) == "gemm_concurrent";
      Measurement r = row(MeasurementKind::kContention, name, "bf16",
                          alone * (concurrent ? (1.0 + truth.contention) * noise.next() : 1.0));
      r.m = r.n = r.k = n;
      r.scope = "intra";
      r.ranks = 8;
      raw.rows.push_back(r);
    }
    // The communication burst beside the GEMMs: 500 us alone (as the H200 run measured); its
    // own noise sequence, so the other rows keep theirs.
    for (const char* name : {"comm_alone", "comm_concurrent"}) {
      const bool concurrent = std::string(name) == "comm_concurrent";
      Measurement r = row(MeasurementKind::kContention, name, "bf16",
                          500e-6 * (concurrent ? (1.0 + truth.comm_contention) * comm_noise.next() : 1.0));
      r.m = r.n = r.k = n;
      r.bytes = 256ULL << 20;
      r.scope = "intra";
      r.ranks = 8;
      raw.rows.push_back(r);
    }
  }
  // Intra-node rings on 8 ranks: step latency λ = alpha/14 shared by every collective.
  const double step = truth.all_reduce_alpha_s / 14.0;
  for (std::uint64_t bytes = 1024; bytes <= (1ULL << 30); bytes *= 4) {
    const double s = static_cast<double>(bytes);
    Measurement ar = row(MeasurementKind::kCollective, "all_reduce", "bf16",
                         (14 * step + 2.0 * 7.0 / 8.0 * s / truth.intra_ring_bw) * noise.next());
    Measurement ag = row(MeasurementKind::kCollective, "all_gather", "bf16",
                         (7 * step + 7.0 / 8.0 * s / truth.intra_ring_bw) * noise.next());
    for (Measurement* r : {&ar, &ag}) {
      r->bytes = bytes;
      r->ranks = 8;
      r->scope = "intra";
      raw.rows.push_back(*r);
    }
    // One-rank rows are recorded but not fitted.
    Measurement one = row(MeasurementKind::kCollective, "all_reduce", "bf16", 1e-6 + s / 2e12);
    one.bytes = bytes;
    one.scope = "intra";
    raw.rows.push_back(one);
  }
  if (with_inter) {
    // 2 nodes × 8 ranks, hierarchical as hw_models/collectives.hpp plans it: intra RS + inter
    // ring all-reduce of the S/8 shard (2 steps, 2·(1/2)·S/8 bytes per NIC) + intra AG. The
    // inter step latency is the simulator's own cross-node path latency with the true NIC
    // latency.
    HardwareSpec two = base;
    two.nodes = 2;
    two.nic.latency_ps = truth.nic_latency_ps;
    const double inter_step = ps_to_s(hw_models::Topology(two).path_latency_ps(0, 8));
    for (std::uint64_t bytes = 1024; bytes <= (1ULL << 30); bytes *= 4) {
      const double s = static_cast<double>(bytes);
      const double intra_phase = 7.0 / 8.0 * s / truth.intra_ring_bw + 7 * step;
      Measurement r =
          row(MeasurementKind::kCollective, "all_reduce", "bf16",
              (2 * intra_phase + 2 * inter_step + 2.0 * 0.5 * s / 8.0 / truth.nic_ring_bw) *
                  noise.next());
      r.bytes = bytes;
      r.ranks = 16;
      r.nodes = 2;
      r.scope = "inter";
      raw.rows.push_back(r);
    }
  }
  return raw;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("fitter recovers known parameters from synthetic measurements") {
  const HardwareSpec base = base_profile();
  Truth truth;
  // Noise-free data must come back exactly (closed-form least squares); with ±0.5%
  // deterministic noise every parameter must be within the stated tolerance.
  double tolerance = 0.0;  // relative
  double half_tolerance = 0.0;
  SUBCASE("exact data") {
    truth.noise = 0.0;
    tolerance = 1e-6;
    half_tolerance = 1e-6;
  }
  SUBCASE("0.5% noise") {
    truth.noise = 0.005;
    tolerance = 0.02;        // 2%
    half_tolerance = 0.05;   // 5%: half_work rests on the small kernels, where noise weighs most
  }
  CAPTURE(truth.noise);
  const RawMeasurements raw = synthetic(truth, base, /*with_inter=*/true);
  FitReport report;
  const HardwareSpec fitted = fit_profile(raw, base, &report);

  // Launch: 3 us.
  CHECK(ps_to_s(fitted.kernel_launch_ps) == doctest::Approx(truth.launch_s).epsilon(tolerance));
  // Curves.
  CHECK(fitted.gemm.max == doctest::Approx(0.8).epsilon(tolerance));
  CHECK(fitted.gemm.half_work == doctest::Approx(3e9).epsilon(half_tolerance));
  CHECK(fitted.attention.max == doctest::Approx(0.6).epsilon(tolerance));
  CHECK(fitted.attention.half_work == doctest::Approx(1e9).epsilon(half_tolerance));
  CHECK(fitted.memory_bound.max == doctest::Approx(0.85).epsilon(tolerance));
  CHECK(fitted.memory_bound.half_work == doctest::Approx(2e6).epsilon(half_tolerance));
  // Contention 0.15: within 0.01 absolute with noise (a median of 3 noisy ratios), exact without.
  const double contention_tolerance = truth.noise > 0.0 ? 0.01 : 1e-9;
  CHECK(std::fabs(fitted.contention_factor - 0.15) <= contention_tolerance);
  // Comm contention 0.55 from the communication side, the same way (exact without noise).
  CHECK(std::fabs(fitted.comm_contention - 0.55) <= contention_tolerance);
  REQUIRE(report.find("gpu.comm_contention") != nullptr);
  CHECK(report.find("gpu.comm_contention")->fitted);
  CHECK(report.find("gpu.comm_contention")->measurements == 3);

  // The all-reduce alpha-beta fit: alpha 8 us, bus bandwidth 250 GB/s.
  const CollectiveFit* all_reduce = nullptr;
  for (const CollectiveFit& c : report.collectives)
    if (c.collective == "all_reduce" && c.scope == "intra") all_reduce = &c;
  REQUIRE(all_reduce != nullptr);
  CHECK(all_reduce->ranks == 8);
  CHECK(all_reduce->measurements == 11);  // 2^10 .. 2^30 bytes in x4 steps: 11 sizes
  CHECK(all_reduce->alpha_us == doctest::Approx(8.0).epsilon(tolerance));
  CHECK(all_reduce->bus_bw_bytes_per_s == doctest::Approx(250e9).epsilon(tolerance));

  // NVLink: ring bandwidth 250 GB/s ÷ collective_efficiency 0.8 = 312.5 GB/s; step latency
  // 8/14 us over the GPU->NVSwitch->GPU path of two NVLink traversals: 4/14 us each.
  CHECK(static_cast<double>(fitted.nvlink.bw_bytes_per_s) ==
        doctest::Approx(312.5e9).epsilon(tolerance));
  CHECK(ps_to_us(fitted.nvlink.latency_ps) == doctest::Approx(4.0 / 14.0).epsilon(tolerance));
  CHECK(fitted.collective_efficiency == 0.8);
  // NIC: 40 GB/s ÷ 0.8 = 50 GB/s; latency 2 us.
  CHECK(static_cast<double>(fitted.nic.bw_bytes_per_s) == doctest::Approx(50e9).epsilon(tolerance));
  CHECK(ps_to_us(fitted.nic.latency_ps) == doctest::Approx(2.0).epsilon(tolerance));

  // Kept from base.
  CHECK(fitted.peak_flops_per_s == base.peak_flops_per_s);
  CHECK(fitted.hbm_bw_bytes_per_s == base.hbm_bw_bytes_per_s);
  CHECK(fitted.pcie.bw_bytes_per_s == base.pcie.bw_bytes_per_s);
  CHECK(fitted.gpu_name == "Synthetic GPU");

  // Report: every fitted field with its rows, residual and source.
  const FieldFit* gemm = report.find("gpu.gemm_efficiency");
  REQUIRE(gemm != nullptr);
  CHECK(gemm->fitted);
  CHECK(gemm->measurements == 12);  // the 12 bf16 squares; fp16 rows are not used
  CHECK(gemm->rms_relative_error <= truth.noise + 1e-9);
  CHECK(gemm->source == "fitted from synthetic.csv on Synthetic GPU");
  const FieldFit* launch = report.find("gpu.kernel_launch");
  REQUIRE(launch != nullptr);
  CHECK(launch->measurements == 5);
  const FieldFit* nvlink = report.find("node.nvlink");
  REQUIRE(nvlink != nullptr);
  CHECK(nvlink->measurements == 22);  // 11 all-reduce + 11 all-gather rows on 8 ranks
  CHECK(nvlink->rms_relative_error <= truth.noise + 1e-9);
  CHECK(contains(fitted.source, "fitted from synthetic.csv on Synthetic GPU"));
  bool one_rank_noted = false, fp16_noted = false, host_paced_noted = false;
  for (const std::string& note : report.notes) {
    one_rank_noted = one_rank_noted || contains(note, "11 row(s) on 1 rank");
    fp16_noted = fp16_noted || contains(note, "12 fp16 row(s) not used");
    host_paced_noted =
        host_paced_noted || contains(note, "1 launch row(s) other than empty_kernel");
  }
  CHECK(one_rank_noted);
  CHECK(fp16_noted);
  CHECK(host_paced_noted);
  CHECK(contains(format_fit_report(report), "gpu.gemm_efficiency"));
}

TEST_CASE("fitter keeps the base profile where nothing was measured") {
  const HardwareSpec base = base_profile();
  Truth truth;
  RawMeasurements raw = synthetic(truth, base, /*with_inter=*/false);
  // Keep only the GEMM rows.
  std::erase_if(raw.rows, [](const Measurement& r) { return r.kind != MeasurementKind::kGemm; });
  FitReport report;
  const HardwareSpec fitted = fit_profile(raw, base, &report);
  // Without launch rows (and no memory-bound rows for the fallback) the base launch (5 us) is
  // used to fit the GEMM curve, which then is off — but the launch stays as in the base.
  CHECK(fitted.kernel_launch_ps == base.kernel_launch_ps);
  CHECK(fitted.attention.max == base.attention.max);
  CHECK(fitted.memory_bound.half_work == base.memory_bound.half_work);
  CHECK(fitted.contention_factor == base.contention_factor);
  CHECK(fitted.comm_contention == base.comm_contention);
  CHECK(fitted.nvlink.bw_bytes_per_s == base.nvlink.bw_bytes_per_s);
  CHECK(fitted.nic.latency_ps == base.nic.latency_ps);
  for (const char* field : {"gpu.kernel_launch", "gpu.attention_efficiency",
                            "gpu.memory_bound_efficiency", "gpu.contention", "gpu.comm_contention", "node.nvlink",
                            "node.nic"}) {
    CAPTURE(field);
    const FieldFit* f = report.find(field);
    REQUIRE(f != nullptr);
    CHECK_FALSE(f->fitted);
    CHECK(contains(f->source, "not measured"));
    CHECK(contains(fitted.source, field));
  }
  CHECK(report.find("gpu.gemm_efficiency")->fitted);
}

TEST_CASE("fitter: launch fallback, clamps and errors") {
  const HardwareSpec base = base_profile();
  SUBCASE("launch from the smallest memory-bound kernels when no empty-kernel rows exist") {
    Truth truth;
    RawMeasurements raw = synthetic(truth, base, false);
    std::erase_if(raw.rows,
                  [](const Measurement& r) { return r.kind == MeasurementKind::kLaunch; });
    FitReport report;
    const HardwareSpec fitted = fit_profile(raw, base, &report);
    // The intercept of t(bytes) is L + half/(hbm·max) = 3 us + 2e6/(4.8e12·0.85) = 3.4902 us.
    CHECK(ps_to_us(fitted.kernel_launch_ps) ==
          doctest::Approx(3.0 + 2e6 / (4.8e12 * 0.85) * 1e6).epsilon(1e-6));
    CHECK(contains(report.find("gpu.kernel_launch")->source, "no empty-kernel rows"));
    // ... so the memory curve's half_work fits to about 0 and its predictions stay exact.
    CHECK(fitted.memory_bound.half_work == doctest::Approx(0.0).epsilon(1e-6).scale(2e6));
    CHECK(report.find("gpu.memory_bound_efficiency")->rms_relative_error < 1e-6);
  }
  SUBCASE("a max above 1 is clamped to 1") {
    Truth truth;
    truth.gemm = {1.25, 3e9};
    const RawMeasurements raw = synthetic(truth, base, false);
    FitReport report;
    const HardwareSpec fitted = fit_profile(raw, base, &report);
    CHECK(fitted.gemm.max == 1.0);
    bool noted = false;
    for (const std::string& note : report.notes) noted = noted || contains(note, "clamped to 1");
    CHECK(noted);
  }
  SUBCASE("negative contention is clamped to 0") {
    Truth truth;
    truth.contention = -0.05;
    truth.comm_contention = -0.02;
    const HardwareSpec fitted = fit_profile(synthetic(truth, base, false), base, nullptr);
    CHECK(fitted.contention_factor == 0.0);
    CHECK(fitted.comm_contention == 0.0);
  }
  SUBCASE("a base profile without peak is rejected") {
    HardwareSpec no_peak = base;
    no_peak.peak_flops_per_s = 0;
    CHECK_THROWS_AS(fit_profile(RawMeasurements{}, no_peak, nullptr), Error);
  }
  SUBCASE("an unknown collective name is rejected") {
    RawMeasurements raw;
    Measurement r = row(MeasurementKind::kCollective, "all_to_all", "bf16", 1e-5);
    r.ranks = 2;
    r.scope = "intra";
    raw.rows.push_back(r);
    CHECK_THROWS_AS(fit_profile(raw, base, nullptr), Error);
  }
}

TEST_CASE("lynxsim fit command: CSV in, loadable profile out") {
  const HardwareSpec h200 = builtin_hardware_profile("h200-sxm-141gb");
  Truth truth;
  truth.noise = 0.005;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string csv = (dir / "lynxsim_test_fit_raw.csv").string();
  const std::string yaml = (dir / "lynxsim_test_fit_profile.yaml").string();
  write_raw_csv_file(csv, synthetic(truth, h200, false));

  FitCommandOptions options;
  options.raw_csv_paths = {csv};
  options.base_profile = "h200-sxm-141gb";
  options.output_path = yaml;
  const FitCommandResult result = run_fit_command(options);
  CHECK(result.fitted.profile == "h200-sxm-141gb-calibrated");
  CHECK(result.fitted.gemm.max == doctest::Approx(0.8).epsilon(0.02));

  const HardwareSpec loaded = load_hardware_profile_file(yaml);
  CHECK(loaded.profile == "h200-sxm-141gb-calibrated");
  CHECK(loaded.gemm.max == doctest::Approx(result.fitted.gemm.max).epsilon(1e-6));
  CHECK(loaded.gemm.half_work == doctest::Approx(result.fitted.gemm.half_work).epsilon(1e-6));
  CHECK(loaded.kernel_launch_ps ==
        doctest::Approx(static_cast<double>(result.fitted.kernel_launch_ps)).epsilon(1e-6));
  CHECK(loaded.nvlink.bw_bytes_per_s ==
        doctest::Approx(static_cast<double>(result.fitted.nvlink.bw_bytes_per_s)).epsilon(1e-6));
  CHECK(contains(loaded.source, "fitted from " + csv));
  CHECK(contains(result.text, "node.nic"));
  CHECK(contains(result.text, "not measured"));
  CHECK(contains(result.text, "fitted vs base profile"));
  CHECK(contains(result.text, "prediction error"));

  options.base_profile = "no-such-gpu";
  try {
    (void)run_fit_command(options);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "h200-sxm-141gb"));  // lists the built-in profiles
  }
  std::filesystem::remove(csv);
  std::filesystem::remove(yaml);
}

TEST_CASE("fit of real H200 measurements (calibrate/measurements/h200-sxm-quick.csv)") {
  // lynxsim-calibrate --quick on one H200 (calibrate/run_on_device.sh). Row counts per kind as
  // `cut -d, -f1 | sort | uniq -c` gives them: 6 launch, 174 memory_bound, 584 gemm,
  // 56 attention, 44 collective, 12 contention.
  const RawMeasurements raw =
      read_raw_csv(std::string(LYNXSIM_SOURCE_DIR) + "/calibrate/measurements/h200-sxm-quick.csv");
  CHECK(raw.device_name() == "NVIDIA H200");
  CHECK(raw.rows.size() == 876);
  FitReport report;
  const HardwareSpec fitted = fit_profile(raw, builtin_hardware_profile("h200-sxm-141gb"), &report);
  // Bounds, not values: an earlier H200 reading gave 769-798 TFLOP/s for an 8192^3 bf16 GEMM
  // (0.78-0.81 of 989.5) and ~4.3 TB/s for a copy (0.9 of 4.8 TB/s); launch costs are
  // microseconds.
  CHECK(fitted.gemm.max > 0.6);
  CHECK(fitted.gemm.max <= 1.0);
  CHECK(fitted.memory_bound.max > 0.5);
  CHECK(fitted.memory_bound.max <= 1.0);
  CHECK(ps_to_us(fitted.kernel_launch_ps) > 1.0);
  CHECK(ps_to_us(fitted.kernel_launch_ps) < 10.0);
  CHECK(fitted.contention_factor >= 0.0);
  // bf16 rows only (half of 584 GEMM and of 56 attention rows); the 5 empty_kernel launch rows
  // (the sixth launch row is host-paced, not fitted).
  CHECK(report.find("gpu.gemm_efficiency")->measurements == 292);
  CHECK(report.find("gpu.attention_efficiency")->measurements == 28);
  CHECK(report.find("gpu.kernel_launch")->measurements == 5);
  // One GPU: no link could be measured.
  CHECK_FALSE(report.find("node.nvlink")->fitted);
  CHECK(contains(report.find("gpu.contention")->source, "stand"));
}

TEST_CASE("fitter recovers NCCL protocol parameters (collective_model nccl) from synthetic rows") {
  // Rows generated from known protocols with the simulator's own rule (the fastest protocol
  // per call): t = base + path latency + steps·step + wire / (ring bw · bw_fraction).
  HardwareSpec base = base_profile();
  base.collective_model = CollectiveModel::kNccl;
  base.nccl.ll = {6'000'000, 600'000, 0, 0, 0.25};
  base.nccl.ll128 = {14'000'000, 1'900'000, 0, 0, 0.92};
  base.nccl.simple = {8'000'000, 3'400'000, 0, 0, 1.0};
  HardwareSpec truth = base;
  truth.nccl.ll.base_ps = 4'000'000;
  truth.nccl.ll.step_nvlink_ps = 900'000;
  truth.nccl.ll128.base_ps = 11'000'000;
  truth.nccl.ll128.step_nvlink_ps = 1'500'000;
  truth.nccl.simple.base_ps = 12'000'000;
  truth.nccl.simple.step_nvlink_ps = 4'000'000;
  const double ring_bw = 330e9;  // achieved; link = ring / collective_efficiency
  const double path_s = ps_to_s(hw_models::Topology(base).path_latency_ps(0, 1));
  RawMeasurements raw;
  raw.metadata = {{"device", "Synthetic GPU"}};
  raw.source_label = "synthetic-nccl.csv";
  for (int n : {2, 4, 8})
    for (const char* name : {"all_reduce", "all_gather", "reduce_scatter"})
      for (std::uint64_t bytes = 1024; bytes <= (1ULL << 30); bytes *= 2) {
        const bool ar = std::string(name) == "all_reduce";
        const double steps = ar ? 2.0 * (n - 1) : n - 1.0;
        const double wire = (ar ? 2.0 : 1.0) * (n - 1.0) / n * static_cast<double>(bytes);
        double best = 0.0;
        for (const NcclProtocol* p : {&truth.nccl.simple, &truth.nccl.ll128, &truth.nccl.ll}) {
          const double t = ps_to_s(p->base_ps) + path_s + steps * ps_to_s(p->step_nvlink_ps) +
                           wire / (ring_bw * p->bw_fraction);
          if (best == 0.0 || t < best) best = t;
        }
        Measurement r = row(MeasurementKind::kCollective, name, "bf16", best);
        r.bytes = bytes;
        r.ranks = n;
        r.scope = "intra";
        raw.rows.push_back(r);
      }
  FitReport report;
  const HardwareSpec fitted = fit_profile(raw, base, &report);
  INFO(format_fit_report(report));
  for (const auto& [fit, want] : {std::pair{&fitted.nccl.simple, &truth.nccl.simple},
                                  std::pair{&fitted.nccl.ll128, &truth.nccl.ll128},
                                  std::pair{&fitted.nccl.ll, &truth.nccl.ll}}) {
    CHECK(ps_to_s(fit->base_ps) == doctest::Approx(ps_to_s(want->base_ps)).epsilon(1e-6));
    CHECK(ps_to_s(fit->step_nvlink_ps) == doctest::Approx(ps_to_s(want->step_nvlink_ps)).epsilon(1e-6));
    CHECK(fit->bw_fraction == want->bw_fraction);  // the wire format's: not fitted
  }
  CHECK(static_cast<double>(fitted.nvlink.bw_bytes_per_s) ==
        doctest::Approx(ring_bw / base.collective_efficiency).epsilon(1e-6));
  CHECK(fitted.nvlink.latency_ps == base.nvlink.latency_ps);  // kept
}
