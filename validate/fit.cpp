#include "validate/fit.hpp"

#include "common/error.hpp"
#include "validate/statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace lynx::validate {

namespace {

constexpr double kPsPerUs = 1e6;

/// Picoseconds from microseconds, rounded to the nearest whole ps.
TimePs us_to_ps(double us) { return static_cast<TimePs>(std::llround(us * kPsPerUs)); }
double ps_to_us(TimePs ps) { return static_cast<double>(ps) / kPsPerUs; }

std::vector<FitParameter> make_parameters() {
  std::vector<FitParameter> p;
  // Intervals are wide physical ranges, not tuned to the data: a launch gap from sub-µs
  // (CUDA graphs) to a few hundred µs (host-bound eager PyTorch); efficiencies over (0, 1].
  p.push_back({"gpu.kernel_launch", "us",
               "time added to every compute kernel: launch gap, and the host (Python/PyTorch) "
               "issue time the simulator has no model of",
               0.5, 500.0, true, [](const HardwareSpec& h) { return ps_to_us(h.kernel_launch_ps); },
               [](HardwareSpec& h, double v) { h.kernel_launch_ps = us_to_ps(v); }});
  // Host costs: a server CPU issues an eager PyTorch op in a few to tens of µs; a collective
  // call (torch.distributed + NCCL enqueue) in about ten to a hundred.
  p.push_back({"gpu.host_kernel", "us",
               "host (CPU) time per launched CUDA kernel: framework dispatch and the launch call (an op "
               "costs its Megatron kernel count times it, docs/host.md)",
               0.5, 200.0, true, [](const HardwareSpec& h) { return ps_to_us(h.host_kernel_ps); },
               [](HardwareSpec& h, double v) { h.host_kernel_ps = us_to_ps(v); }});
  p.push_back({"gpu.host_collective", "us",
               "host time of one collective or send/recv call beyond its NCCL kernel "
               "(torch.distributed + NCCL enqueue), separate from link latency",
               0.5, 500.0, true, [](const HardwareSpec& h) { return ps_to_us(h.host_collective_ps); },
               [](HardwareSpec& h, double v) { h.host_collective_ps = us_to_ps(v); }});
  // A GEMM call's extra dispatch (cuBLAS heuristics, workspace, autograd's matmul): a few to
  // a few tens of µs on top of its kernel's launch.
  p.push_back({"gpu.host_gemm", "us",
               "host time of one GEMM call (a GEMM or attention op's forward, dgrad or wgrad task) "
               "beyond its kernels' gpu.host_kernel (docs/host.md)",
               0.5, 500.0, true, [](const HardwareSpec& h) { return ps_to_us(h.host_gemm_ps); },
               [](HardwareSpec& h, double v) { h.host_gemm_ps = us_to_ps(v); }});
  p.push_back({"gpu.gemm_efficiency.max", "", "fraction of peak FLOP/s large GEMMs reach", 0.3, 1.0,
               false, [](const HardwareSpec& h) { return h.gemm.max; },
               [](HardwareSpec& h, double v) { h.gemm.max = v; }});
  p.push_back({"gpu.gemm_efficiency.half_flops", "FLOP",
               "GEMM size at which it reaches half its limit (small-GEMM efficiency loss)", 1e7,
               1e11, true, [](const HardwareSpec& h) { return h.gemm.half_work; },
               [](HardwareSpec& h, double v) { h.gemm.half_work = v; }});
  p.push_back({"gpu.attention_efficiency.max", "", "fraction of peak batched QK^T / .V GEMMs reach",
               0.1, 1.0, false, [](const HardwareSpec& h) { return h.attention.max; },
               [](HardwareSpec& h, double v) { h.attention.max = v; }});
  p.push_back({"gpu.memory_bound_efficiency.max", "",
               "fraction of HBM bandwidth elementwise / norm / softmax kernels reach", 0.1, 1.0,
               false, [](const HardwareSpec& h) { return h.memory_bound.max; },
               [](HardwareSpec& h, double v) { h.memory_bound.max = v; }});
  p.push_back({"gpu.memory_bound_efficiency.half_bytes", "B",
               "kernel bytes at which memory-bound kernels reach half their limit", 1e4, 1e9,
               true, [](const HardwareSpec& h) { return h.memory_bound.half_work; },
               [](HardwareSpec& h, double v) { h.memory_bound.half_work = v; }});
  p.push_back({"node.nvlink.latency", "us",
               "one NVLink traversal; an NCCL ring step through the NVSwitch pays two, so it "
               "carries the per-step cost of NCCL collectives (launch, synchronisation)",
               0.1, 200.0, true, [](const HardwareSpec& h) { return ps_to_us(h.nvlink.latency_ps); },
               [](HardwareSpec& h, double v) { h.nvlink.latency_ps = us_to_ps(v); }});
  p.push_back({"collective_efficiency", "", "achieved / link bandwidth of NCCL ring steps", 0.2,
               1.0, false, [](const HardwareSpec& h) { return h.collective_efficiency; },
               [](HardwareSpec& h, double v) { h.collective_efficiency = v; }});
  p.push_back({"gpu.contention", "",
               "slowdown of a compute kernel per concurrent communication kernel", 0.0, 1.0, false,
               [](const HardwareSpec& h) { return h.contention_factor; },
               [](HardwareSpec& h, double v) { h.contention_factor = v; }});
  return p;
}

/// Maps a parameter value to the search coordinate and back.
double to_coordinate(const FitParameter& p, double value) {
  return p.log_scale ? std::log(value) : value;
}
double from_coordinate(const FitParameter& p, double u) { return p.log_scale ? std::exp(u) : u; }

/// Scores hardware variants on a fixed set of rows, remembering every value it has scored.
class Objective {
 public:
  Objective(const Scenario& base, const std::vector<MeasuredRun>& runs,
            std::vector<std::size_t> rows, const std::string& file_label, unsigned threads)
      : base_(base), runs_(runs), rows_(std::move(rows)), label_(file_label), threads_(threads) {}

  double operator()(const HardwareSpec& hw) {
    Scenario sc = base_;
    sc.hardware = hw;
    const std::vector<RowResult> results = simulate_runs(sc, runs_, rows_, label_, {}, threads_);
    std::vector<double> predicted, measured;
    for (const RowResult& r : results) {
      predicted.push_back(r.predicted_ms);
      measured.push_back(r.run.iteration_ms);
    }
    ++evaluations_;
    return mean_absolute_log_error(predicted, measured);
  }
  int evaluations() const { return evaluations_; }
  std::size_t rows() const { return rows_.size(); }

 private:
  const Scenario& base_;
  const std::vector<MeasuredRun>& runs_;
  std::vector<std::size_t> rows_;
  const std::string& label_;
  unsigned threads_;
  int evaluations_ = 0;
};

}  // namespace

const std::vector<FitParameter>& fittable_parameters() {
  static const std::vector<FitParameter> parameters = make_parameters();
  return parameters;
}

const FitParameter& fittable_parameter(const std::string& key) {
  for (const FitParameter& p : fittable_parameters())
    if (p.key == key) return p;
  std::vector<std::string> known;
  for (const FitParameter& p : fittable_parameters()) known.push_back(p.key);
  fail(ErrorCode::kInvalidOption, "unknown fit parameter '{}' (known: {})", key, fmt::join(known, ", "));
}

std::vector<std::string> default_fit_keys() {
  return {"gpu.host_kernel", "gpu.host_collective", "gpu.gemm_efficiency.max",
          "gpu.gemm_efficiency.half_flops", "gpu.memory_bound_efficiency.max"};
}

double round_significant(double value, int digits) {
  if (value == 0.0 || !std::isfinite(value)) return value;
  const double magnitude = std::floor(std::log10(std::abs(value)));
  const double scale = std::pow(10.0, static_cast<double>(digits - 1) - magnitude);
  return std::round(value * scale) / scale;
}

FitResult fit_hardware(const Scenario& base, const std::vector<MeasuredRun>& runs,
                       const std::vector<std::size_t>& train, const std::string& file_label,
                       const FitOptions& options, const Progress& progress) {
  if (train.empty()) fail(ErrorCode::kInsufficientData, "fit: no training rows");
  if (options.keys.empty() || options.keys.size() > 5)
    fail(ErrorCode::kInvalidOption, "fit: choose 1 to 5 parameters, got {}", options.keys.size());
  if (options.sweeps < 1 || options.golden_steps < 1 || options.inner_stride < 1)
    fail(ErrorCode::kInvalidOption, "fit: sweeps, golden_steps and inner_stride must be >= 1");
  std::vector<const FitParameter*> params;
  for (const std::string& key : options.keys) {
    const FitParameter& p = fittable_parameter(key);
    if (std::find(params.begin(), params.end(), &p) != params.end())
      fail(ErrorCode::kInvalidOption, "fit: parameter '{}' given twice", key);
    params.push_back(&p);
  }

  std::vector<std::size_t> inner;
  for (std::size_t i = 0; i < train.size(); i += options.inner_stride) inner.push_back(train[i]);
  Objective inner_objective(base, runs, inner, file_label, options.threads);
  Objective full_objective(base, runs, train, file_label, options.threads);

  FitResult result;
  result.keys = options.keys;
  result.inner_rows = inner.size();
  HardwareSpec hw = base.hardware;
  for (const FitParameter* p : params) {
    // Start inside the search interval (the datasheet value may lie outside it).
    const double v = std::clamp(p->get(hw), p->lower, p->upper);
    result.start_values.push_back(p->get(hw));
    p->set(hw, v);
  }
  result.start_objective = full_objective(base.hardware);

  const int budget = 1 + options.sweeps * static_cast<int>(params.size()) * (options.golden_steps + 2);
  auto report = [&] {
    if (progress) progress(static_cast<std::size_t>(inner_objective.evaluations()),
                           static_cast<std::size_t>(budget));
  };
  double best = inner_objective(hw);
  report();
  // Golden ratio conjugate (sqrt(5) − 1) / 2.
  const double inv_phi = (std::sqrt(5.0) - 1.0) / 2.0;
  for (int sweep = 0; sweep < options.sweeps; ++sweep) {
    for (const FitParameter* p : params) {
      auto score = [&](double u) {
        HardwareSpec trial = hw;
        p->set(trial, from_coordinate(*p, u));
        const double f = inner_objective(trial);
        report();
        return f;
      };
      double a = to_coordinate(*p, p->lower), b = to_coordinate(*p, p->upper);
      double c = b - inv_phi * (b - a), d = a + inv_phi * (b - a);
      double fc = score(c), fd = score(d);
      double best_u = fc < fd ? c : d;
      double best_f = std::min(fc, fd);
      for (int step = 0; step < options.golden_steps; ++step) {
        if (fc < fd) {
          b = d;
          d = c;
          fd = fc;
          c = b - inv_phi * (b - a);
          fc = score(c);
          if (fc < best_f) {
            best_f = fc;
            best_u = c;
          }
        } else {
          a = c;
          c = d;
          fc = fd;
          d = a + inv_phi * (b - a);
          fd = score(d);
          if (fd < best_f) {
            best_f = fd;
            best_u = d;
          }
        }
      }
      // Keep the current value unless the search found strictly better: the objective never rises.
      if (best_f < best) {
        best = best_f;
        p->set(hw, from_coordinate(*p, best_u));
      }
    }
  }
  for (const FitParameter* p : params) {
    p->set(hw, round_significant(p->get(hw), options.significant_digits));
    result.values.push_back(p->get(hw));
  }
  result.hardware = hw;
  result.objective = full_objective(hw);
  result.evaluations = inner_objective.evaluations();
  return result;
}

}  // namespace lynx::validate
