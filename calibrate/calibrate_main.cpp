// lynxsim-calibrate: CUDA / cuBLAS / NCCL microbenchmarks over the shapes the workload uses;
// writes the raw CSV (calibrate/raw_csv.hpp) that `lynxsim fit` turns into a hardware profile.
#include "calibrate/bench_contention.hpp"
#include "calibrate/bench_context.hpp"
#include "calibrate/bench_kernels.hpp"
#include "calibrate/bench_nccl.hpp"
#include "gpu/cuda_check.hpp"
#include "calibrate/workload_shapes.hpp"
#include "common/error.hpp"

#include <boost/program_options.hpp>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#ifdef LYNXSIM_CALIBRATE_WITH_MPI
#include <mpi.h>
#endif

#include <algorithm>
#include <array>
#include <ctime>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef LYNXSIM_VERSION
#define LYNXSIM_VERSION "unknown"
#endif

namespace po = boost::program_options;
using namespace lynx;
using namespace lynx::calibrate;

namespace {

/// The benchmark sections, in the order they run.
const std::vector<std::string> kSections{"launch", "memory", "gemm", "nccl", "contention"};

std::vector<std::string> split_list(const std::string& text, const char* option) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) items.push_back(item);
  if (items.empty()) fail(ErrorCode::kInvalidOption, "--{}: empty list", option);
  return items;
}

std::vector<int> split_ints(const std::string& text, const char* option) {
  std::vector<int> values;
  for (const std::string& item : split_list(text, option)) {
    try {
      std::size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      values.push_back(v);
    } catch (const std::exception&) {
      fail(ErrorCode::kInvalidOption, "--{}: '{}' is not a positive integer", option, item);
    }
  }
  return values;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

/// "13000" -> "13.0" (CUDA encodes 1000·major + 10·minor).
std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

/// Header metadata: what ran, where, with which library versions.
std::vector<std::pair<std::string, std::string>> run_metadata(int gpus, bool quick,
                                                              const std::string& command_line) {
  cudaDeviceProp prop{};
  LYNX_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0, nccl = 0;
  LYNX_CUDA_CHECK(cudaDriverGetVersion(&driver));
  LYNX_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  LYNX_NCCL_CHECK(ncclGetVersion(&nccl));
  int cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  LYNX_CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &cublas_major));
  LYNX_CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &cublas_minor));
  LYNX_CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &cublas_patch));
  // NCCL_VERSION_CODE since 2.9: 10000·major + 100·minor + patch.
  const std::string nccl_text =
      fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100);
  return {
      {"device", prop.name},
      {"sm_count", std::to_string(prop.multiProcessorCount)},
      {"compute_capability", fmt::format("{}.{}", prop.major, prop.minor)},
      {"memory_bytes", std::to_string(prop.totalGlobalMem)},
      {"l2_bytes", std::to_string(prop.l2CacheSize)},
      {"gpus", std::to_string(gpus)},
      {"driver", cuda_version_text(driver)},
      {"runtime", cuda_version_text(runtime)},
      {"cublas", fmt::format("{}.{}.{}", cublas_major, cublas_minor, cublas_patch)},
      {"nccl", nccl_text},
      {"date", utc_now()},
      {"host", host_name()},
      {"mode", quick ? "quick" : "full"},
      {"lynxsim_version", LYNXSIM_VERSION},
      {"command", command_line},
  };
}

void print_shapes(const WorkloadShapes& shapes) {
  std::cout << fmt::format("{} GEMM shapes, {} memory-bound kernel shapes\n", shapes.gemms.size(),
                           shapes.memory_kernels.size());
  for (const GemmShape& g : shapes.gemms)
    std::cout << fmt::format("{:<9} m={:<6} n={:<6} k={:<6} batch={:<4} {} {:.4g} FLOPs  {}\n",
                             g.kind == model::OpKind::kAttention ? "attention" : "gemm", g.m, g.n,
                             g.k, g.batch, g.layout(), g.flops(), g.name);
  for (const MemoryKernelShape& k : shapes.memory_kernels)
    std::cout << fmt::format("{:<16} rows={:<8} cols={:<8} {:>12} bytes  {}\n", to_string(k.kernel),
                             k.rows, k.cols, memory_kernel_bytes(k, 2), k.name);
  for (const std::string& note : shapes.notes) std::cout << "note: " << note << "\n";
}

int run(int argc, char** argv) {
  std::string models_text, tp_text, micro_batch_text, dtypes_text, only_text, out_path;
  int seq_len = 2048, gpus_option = 0, reps = 0, warmup = -1;
  double time_budget_s = -1.0;
  std::uint64_t max_bytes = 0;
  po::options_description options(
      "lynxsim-calibrate: GPU microbenchmarks for the lynxsim hardware model\n"
      "Usage: lynxsim-calibrate [options]\nOptions");
  options.add_options()
      ("help,h", "this help")
      ("model", po::value(&models_text)->default_value("gpt-1.3b"),
       "model presets whose shapes are measured, comma-separated (e.g. gpt-1.3b,gpt-6.7b)")
      ("tp", po::value(&tp_text)->default_value("1,2,4,8"), "tensor-parallel degrees")
      ("micro-batch", po::value(&micro_batch_text)->default_value("1,2,4"), "micro-batch sizes")
      ("seq", po::value(&seq_len)->default_value(2048), "sequence length")
      ("sequence-parallel", "shapes with sequence parallelism")
      ("no-sweeps", "only workload shapes (no square-GEMM / elementwise size sweeps)")
      ("dtypes", po::value(&dtypes_text)->default_value("bf16,fp16"), "bf16 and/or fp16")
      ("only", po::value(&only_text)->default_value(join(kSections)),
       "sections to run: launch,memory,gemm,nccl,contention")
      ("gpus", po::value(&gpus_option)->default_value(0),
       "GPUs for NCCL and contention (0 = all visible)")
      ("out", po::value(&out_path)->default_value("calib-raw.csv"), "raw CSV to write")
      ("quick",
       "fewer repetitions, x4 NCCL size steps, a 150 s budget (one H200: ~7 s of measuring)")
      ("reps", po::value(&reps)->default_value(0), "timed repetitions (0 = mode default)")
      ("warmup", po::value(&warmup)->default_value(-1), "warm-up calls (-1 = mode default)")
      ("max-bytes", po::value(&max_bytes)->default_value(0),
       "largest NCCL message in bytes (0 = 1 GiB)")
      ("time-budget", po::value(&time_budget_s)->default_value(-1.0),
       "seconds after which remaining measurements are skipped (-1 = 150 with --quick, none "
       "otherwise; 0 = none)")
      ("list-shapes", "print the derived shapes and exit (no GPU needed)")
#ifdef LYNXSIM_CALIBRATE_WITH_MPI
      ("mpi", "multi-node NCCL mode: run under mpirun, one rank per GPU; only NCCL is measured")
#endif
      ;
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, options), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    fail(ErrorCode::kBadUsage, "{} (see --help)", e.what());
  }
  if (vm.count("help") != 0) {
    std::cout << options << "\n";
    return 0;
  }
  std::string command_line;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) command_line += ' ';
    command_line += argv[i];
  }
  const bool quick = vm.count("quick") != 0;

  ShapeDerivationOptions shape_options;
  shape_options.models.clear();
  for (const std::string& name : split_list(models_text, "model"))
    shape_options.models.push_back(preset_model(name, seq_len));
  shape_options.tp = split_ints(tp_text, "tp");
  shape_options.micro_batch = split_ints(micro_batch_text, "micro-batch");
  shape_options.sequence_parallel = vm.count("sequence-parallel") != 0;
  shape_options.include_sweeps = vm.count("no-sweeps") == 0;
  const WorkloadShapes shapes = derive_workload_shapes(shape_options);
  if (vm.count("list-shapes") != 0) {
    print_shapes(shapes);
    return 0;
  }

  BenchSettings settings;
  settings.warmup = warmup >= 0 ? warmup : (quick ? 3 : 10);
  settings.reps = reps > 0 ? reps : (quick ? 10 : 50);
  settings.dtypes.clear();
  for (const std::string& name : split_list(dtypes_text, "dtypes")) {
    if (name == "bf16") settings.dtypes.push_back(gpu::Dtype::kBf16);
    else if (name == "fp16") settings.dtypes.push_back(gpu::Dtype::kFp16);
    else fail(ErrorCode::kInvalidOption, "--dtypes: '{}' is not bf16 or fp16", name);
  }
  settings.nccl_step = quick ? 4 : 2;
  if (max_bytes > 0) settings.nccl_max_bytes = max_bytes;
  if (quick) {
    settings.contention_burst_ms = 20.0;
    settings.contention_reps = 3;
  }
  const std::vector<std::string> sections = split_list(only_text, "only");
  for (const std::string& s : sections)
    if (std::find(kSections.begin(), kSections.end(), s) == kSections.end())
      fail(ErrorCode::kInvalidOption, "--only: unknown section '{}' (sections: {})", s, join(kSections));
  const auto wanted = [&](const std::string& s) {
    return std::find(sections.begin(), sections.end(), s) != sections.end();
  };
  const Deadline deadline(time_budget_s >= 0.0 ? time_budget_s : (quick ? 150.0 : 0.0));

#ifdef LYNXSIM_CALIBRATE_WITH_MPI
  if (vm.count("mpi") != 0) {
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) fail(ErrorCode::kSystemFailure, "MPI_Init failed");
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int status = 0;
    try {
      int device_count = 0;
      LYNX_CUDA_CHECK(cudaGetDeviceCount(&device_count));
      std::unique_ptr<RawCsvWriter> writer;
      if (rank == 0) {
        auto metadata = run_metadata(size, quick, command_line);
        metadata.emplace_back("mpi_ranks", std::to_string(size));
        writer = std::make_unique<RawCsvWriter>(out_path, metadata);
      }
      BenchContext ctx{settings, writer.get(), &deadline, rank == 0 ? &std::cout : nullptr};
      bench_nccl_mpi(ctx);
      if (rank == 0) ctx.say("wrote {} rows to {}", writer->rows_written(), out_path);
    } catch (const std::exception& e) {
      std::cerr << fmt::format("lynxsim-calibrate (rank {}): {}\n", rank, e.what());
      status = 1;
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return status;
  }
#endif

  int device_count = 0;
  LYNX_CUDA_CHECK(cudaGetDeviceCount(&device_count));
  if (device_count < 1) fail(ErrorCode::kSystemFailure, "no CUDA device visible");
  const int gpus = gpus_option > 0 ? std::min(gpus_option, device_count) : device_count;
  LYNX_CUDA_CHECK(cudaSetDevice(0));

  RawCsvWriter writer(out_path, run_metadata(gpus, quick, command_line));
  const BenchContext ctx{settings, &writer, &deadline, &std::cout};
  ctx.say("lynxsim-calibrate {}: {} on {} GPU(s); {} GEMM and {} memory-bound shapes; writing {}",
          quick ? "--quick" : "(full)", writer.path(), gpus, shapes.gemms.size(),
          shapes.memory_kernels.size(), out_path);
  for (const std::string& note : shapes.notes) ctx.say("note: {}", note);

  const std::vector<std::pair<std::string, std::function<void()>>> runs{
      {"launch", [&] { bench_launch(ctx); }},
      {"memory", [&] { bench_memory_kernels(ctx, shapes.memory_kernels); }},
      {"gemm", [&] { bench_gemms(ctx, shapes.gemms); }},
      {"nccl", [&] { bench_nccl_single_process(ctx, gpus); }},
      {"contention", [&] { bench_contention(ctx, gpus); }},
  };
  int failed = 0;
  for (const auto& [name, section] : runs) {
    if (!wanted(name)) continue;
    if (ctx.out_of_time()) {
      ctx.say("section {}: skipped, time budget spent", name);
      continue;
    }
    ctx.say("section {}", name);
    try {
      section();
    } catch (const std::exception& e) {
      // Keep going: the rows of the other sections are still worth fitting.
      ++failed;
      ctx.say("section {} FAILED: {}", name, e.what());
      (void)cudaGetLastError();
    }
  }
  ctx.say("wrote {} rows to {}{}", writer.rows_written(), out_path,
          failed > 0 ? fmt::format("; {} section(s) failed", failed) : std::string());
  return failed > 0 ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const lynx::Error& e) {
    std::cerr << "lynxsim-calibrate: error " << lynx::error_code_id(e.code()) << " ("
              << lynx::error_code_info(e.code()).name << "): " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lynxsim-calibrate: " << e.what() << "\n";
    return 1;
  }
}
