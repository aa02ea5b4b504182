#pragma once
/// What every lynxsim-calibrate benchmark section shares: its settings, the CSV sink, the
/// run's time budget and the progress log.
#include "gpu/gpu_kernels.hpp"
#include "calibrate/bench_timing.hpp"
#include "calibrate/raw_csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace lynx::calibrate {

/// Repetitions and sizes (--quick picks smaller ones; see calibrate_main.cpp).
struct BenchSettings {
  int warmup = 10;
  int reps = 50;
  std::vector<gpu::Dtype> dtypes{gpu::Dtype::kBf16, gpu::Dtype::kFp16};
  int launch_rows = 5;                      ///< rows of the empty-kernel measurement
  std::uint64_t nccl_min_bytes = 1024;      ///< 1 KiB
  std::uint64_t nccl_max_bytes = 1ULL << 30;  ///< 1 GiB
  int nccl_step = 2;                        ///< size factor between NCCL sizes (2 or 4)
  std::vector<std::int64_t> contention_sizes{2048, 4096, 8192};  ///< square GEMMs
  std::uint64_t contention_comm_bytes = 256ULL << 20;            ///< all-reduce / copy payload
  double contention_burst_ms = 50.0;  ///< length of each GEMM burst and communication burst
  int contention_reps = 5;
  /// Blocks of the one-GPU stand-in copy kernel: NCCL runs its rings on a few dozen SMs
  /// (one block per channel; 16-32 channels on NVSwitch systems), so a copy on 32 SMs takes
  /// SMs and HBM bandwidth from a GEMM the way NCCL does.
  int standin_blocks = 32;
};

/// The shared state of one run.
struct BenchContext {
  BenchSettings settings;
  RawCsvWriter* csv = nullptr;  ///< null on MPI ranks other than 0
  const Deadline* deadline = nullptr;
  std::ostream* log = &std::cout;  ///< null: quiet (other MPI ranks)

  /// Writes one measurement (no-op without a CSV sink).
  void emit(const Measurement& row) const {
    if (csv != nullptr) csv->append(row);
  }
  /// True once the run's time budget is spent; sections stop measuring then.
  bool out_of_time() const { return deadline != nullptr && deadline->expired(); }
  /// "[  12.3 s] message" on the log.
  template <typename... Args>
  void say(fmt::format_string<Args...> format, Args&&... args) const {
    if (log == nullptr) return;
    *log << fmt::format("[{:7.1f} s] ", deadline != nullptr ? deadline->elapsed_s() : 0.0)
         << fmt::format(format, std::forward<Args>(args)...) << std::endl;
  }
};

/// "bf16" or "fp16".
inline std::string dtype_name(gpu::Dtype dtype) {
  return dtype == gpu::Dtype::kBf16 ? "bf16" : "fp16";
}

/// Row with the common fields filled from a timing summary. CUDA event times have a
/// resolution of about 0.5 us and can read 0 for the fastest kernels; such times are recorded
/// as 0.001 us (the raw CSV requires positive times), i.e. "below resolution".
inline Measurement timed_row(MeasurementKind kind, std::string name, std::string dtype,
                             const TimingSummary& t) {
  constexpr double kFloorUs = 0.001;
  Measurement row;
  row.kind = kind;
  row.name = std::move(name);
  row.dtype = std::move(dtype);
  row.time_us_median = std::max(t.median, kFloorUs);
  row.time_us_p10 = std::max(t.p10, kFloorUs);
  row.time_us_p90 = std::max(t.p90, kFloorUs);
  row.reps = t.reps;
  return row;
}

}  // namespace lynx::calibrate
