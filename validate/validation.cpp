#include "validate/validation.hpp"

#include "runner/simulate.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/checked.hpp"
#include "common/error.hpp"
#include "validate/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

namespace lynx::validate {

std::vector<std::string> megatron_deepspeed_overrides() {
  return {
      // GPT-2 BPE has 50257 tokens; Megatron pads the embedding to a multiple of
      // 128 · tp (--make-vocab-size-divisible-by 128): 50304 at tp 1 … 51200 at tp 8. We use
      // 51200 for every row (divisible by every tp here); the difference is < 2% of the LM
      // head and embedding, themselves a few percent of the work.
      "model.vocab=51200",
      "model.ffn_hidden=0",  // 4h, Megatron's default --ffn-hidden-size
      "model.flash_attention=false",
      "parallel.sequence_parallel=false",
      "parallel.schedule=1f1b",
      "parallel.virtual_stages=1",
      "parallel.distributed_optimizer=false",
      // Megatron-DeepSpeed of the time trained in fp16 (16-bit gradients, reduced as such);
      // the data agree: dp 1 -> 2 adds 5.5 ms, the 2-byte all-reduce (VALIDATION.md, Method).
      "parallel.fp32_main_grads=false",
      // Megatron-DeepSpeed reduces data-parallel gradients once per iteration after the last
      // backward (DeepSpeed engine allreduce_gradients / PipelineEngine _exec_reduce_grads),
      // not bucket by bucket during the backward.
      "parallel.dp_overlap=end",
      // No gradient-accumulation fusion: the fused wgrad GEMM accumulates into Megatron's DDP
      // `main_grad` buffers, which DeepSpeed's engine does not create; gradients land in
      // `.grad` and autograd adds each micro-batch's (as remembered; no source at hand).
      "model.gradient_accumulation_fusion=false",
      "recompute.strategy=none",
      "hardware.nodes=1",
  };
}

Scenario validation_base_scenario(const BaseOptions& options) {
  std::vector<std::string> overrides;
  if (!options.profile_file.empty()) {
    const std::filesystem::path path =
        std::filesystem::absolute(options.profile_file).lexically_normal();
    overrides.push_back("hardware.profile=");
    overrides.push_back("hardware.profile_file=" + path.string());
  } else {
    overrides.push_back("hardware.profile=" + options.profile);
  }
  for (std::string& o : megatron_deepspeed_overrides()) overrides.push_back(std::move(o));
  if (!options.recompute.empty()) {
    Scenario scratch;  // checked here so that the message names the option, not a --set
    try {
      row_setting_field("recompute.strategy").set(scratch, options.recompute);
    } catch (const Error& e) {
      fail(ErrorCode::kInvalidOption, "--recompute: {}", e.what());
    }
    overrides.push_back("recompute.strategy=" + options.recompute);
  }
  // Placeholders for what every row replaces: one GPU, one sequence, so that the loader's
  // layout checks pass whatever the built-in default's layout and the user's overrides are.
  for (const char* o : {"parallel.tp=1", "parallel.pp=1", "parallel.dp=1", "parallel.micro_batch=1",
                        "parallel.global_batch=1"})
    overrides.emplace_back(o);
  for (const std::string& o : options.overrides) overrides.push_back(o);
  return model::default_scenario(overrides).scenario();
}

Scenario scenario_for_run(const Scenario& base, const MeasuredRun& run, const std::string& file_label) {
  Scenario sc = base;
  sc.name = file_label + ":" + std::to_string(run.line);
  sc.model.preset.clear();
  sc.model.layers = run.layers;
  sc.model.hidden = run.hidden;
  sc.model.heads = run.heads;
  // Multi-head attention, as GPT: the base is a resolved scenario whose preset filled
  // kv_heads for its own head count, which a row with other heads must not inherit.
  sc.model.kv_heads = run.heads;
  // Megatron's default 4 · hidden; one that does not fit an int is left 0 for resolution to
  // refuse (the range check names model.hidden).
  const std::int64_t ffn = checked_product("4 x hidden size", {4, run.hidden});
  sc.model.ffn_hidden = ffn <= std::numeric_limits<int>::max() ? static_cast<int>(ffn) : 0;
  sc.model.seq_len = run.seq_len;
  sc.parallel.tp = run.tp;
  sc.parallel.dp = run.dp;
  sc.parallel.pp = run.pp;
  sc.parallel.micro_batch = run.micro_batch;
  sc.parallel.global_batch = run.global_batch;
  // As many nodes of the profile as the row's GPUs fill (the range check of hardware.nodes
  // refuses a count beyond it when the scenario is resolved).
  if (sc.hardware.gpus_per_node > 0) {
    const std::int64_t nodes =
        (std::int64_t{run.gpus} + sc.hardware.gpus_per_node - 1) / sc.hardware.gpus_per_node;
    sc.hardware.nodes = nodes <= std::numeric_limits<int>::max() ? static_cast<int>(nodes) : 0;
  }
  bool schedule_given = false;
  for (const RowSetting& setting : run.settings) {
    try {
      row_setting_field(setting.key).set(sc, setting.value);
    } catch (const Error& e) {
      fail(ErrorCode::kBadCsvRow, "{}:{}: column {}: {}", file_label, run.line, setting.column, e.what());
    }
    schedule_given = schedule_given || setting.key == "parallel.schedule";
  }
  // Megatron-LM has no schedule option: virtual pipeline stages mean the interleaved schedule.
  if (!schedule_given && sc.parallel.virtual_stages > 1 &&
      sc.parallel.schedule == ScheduleKind::kOneFOneB)
    sc.parallel.schedule = ScheduleKind::kInterleaved;
  const std::int64_t available = checked_product(
      "hardware.nodes x hardware.gpus_per_node", {sc.hardware.nodes, sc.hardware.gpus_per_node});
  if (run.gpus > available)
    fail(ErrorCode::kTooManyGpus, "{}:{}: the row uses {} GPUs, the simulated cluster has {} ({} node(s) × {})", file_label,
         run.line, run.gpus, available, sc.hardware.nodes, sc.hardware.gpus_per_node);
  return sc;
}

namespace {

RowResult simulate_row(const Scenario& base, const std::vector<MeasuredRun>& runs,
                       std::size_t index, const std::string& file_label) {
  if (index >= runs.size()) fail(ErrorCode::kInternal, "row index {} is out of range ({} rows)", index, runs.size());
  const MeasuredRun& run = runs[index];
  const model::ResolvedScenario sc = model::resolve_scenario(
      scenario_for_run(base, run, file_label), fmt::format("{}:{}", file_label, run.line));
  runner::SimRun sim;
  try {
    sim = runner::simulate(sc);
  } catch (const Error& e) {
    fail(e.code(), "{}:{}: {}", file_label, run.line, e.what());
  }
  RowResult row;
  row.index = index;
  row.run = run;
  row.predicted_ms = sim.result.iteration_time_s * 1e3;
  row.error_percent = 100.0 * (row.predicted_ms - run.iteration_ms) / run.iteration_ms;
  row.oom = sim.result.oom;
  return row;
}

}  // namespace

std::vector<RowResult> simulate_runs(const Scenario& base, const std::vector<MeasuredRun>& runs,
                                     const std::vector<std::size_t>& indices,
                                     const std::string& file_label, const Progress& progress,
                                     unsigned threads) {
  if (threads < 1) fail(ErrorCode::kInvalidOption, "simulate_runs: threads must be >= 1");
  std::vector<RowResult> out(indices.size());
  std::vector<std::exception_ptr> errors(indices.size());
  std::mutex progress_mutex;
  std::size_t done = 0;
  auto work = [&](std::size_t first, std::size_t stride) {
    for (std::size_t k = first; k < indices.size(); k += stride) {
      try {
        out[k] = simulate_row(base, runs, indices[k], file_label);
      } catch (...) {
        errors[k] = std::current_exception();
        return;  // later rows of this worker are not needed: the first error is rethrown
      }
      if (progress) {
        const std::lock_guard<std::mutex> lock(progress_mutex);
        progress(++done, indices.size());
      }
    }
  };
  const std::size_t workers = std::min<std::size_t>(threads, std::max<std::size_t>(indices.size(), 1));
  if (workers <= 1) {
    work(0, 1);
  } else {
    std::vector<std::thread> pool;
    try {
      for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(work, t, workers);
    } catch (const std::system_error& e) {
      // Not std::terminate: join the threads already started, then report.
      for (std::thread& th : pool) th.join();
      fail(ErrorCode::kSystemFailure, "cannot start {} simulation threads ({}); use fewer with --threads", workers, e.what());
    }
    work(0, workers);
    for (std::thread& th : pool) th.join();
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

Summary summarize(const std::vector<RowResult>& rows, const std::string& rows_label) {
  if (rows.size() < 2)
    fail(ErrorCode::kInsufficientData, "{}: a summary needs at least 2 rows, got {}", rows_label, rows.size());
  std::vector<double> predicted, measured;
  Summary s;
  s.rows = rows.size();
  for (const RowResult& r : rows) {
    predicted.push_back(r.predicted_ms);
    measured.push_back(r.run.iteration_ms);
    s.mean_signed_error_percent += r.error_percent;
    if (r.oom) ++s.oom_rows;
  }
  s.mean_signed_error_percent /= static_cast<double>(rows.size());
  s.mape_percent = mean_absolute_percentage_error(predicted, measured);
  s.median_ape_percent = median_absolute_percentage_error(predicted, measured);
  s.mean_abs_log_error = mean_absolute_log_error(predicted, measured);
  try {
    s.kendall_tau_b = kendall_tau_b(predicted, measured);
  } catch (const Error& e) {
    fail(e.code(), "{}: {}", rows_label, e.what());  // every measured time alike
  }
  return s;
}

std::vector<RowResult> worst_rows(const std::vector<RowResult>& rows, std::size_t count) {
  std::vector<RowResult> sorted = rows;
  std::stable_sort(sorted.begin(), sorted.end(), [](const RowResult& a, const RowResult& b) {
    const double ea = std::abs(a.error_percent), eb = std::abs(b.error_percent);
    return ea != eb ? ea > eb : a.index < b.index;
  });
  if (sorted.size() > count) sorted.resize(count);
  return sorted;
}

std::vector<CategoryError> errors_by_category(const std::vector<RowResult>& rows) {
  using Getter = int (*)(const MeasuredRun&);
  const std::vector<std::pair<const char*, Getter>> columns = {
      {"tp", [](const MeasuredRun& r) { return r.tp; }},
      {"pp", [](const MeasuredRun& r) { return r.pp; }},
      {"dp", [](const MeasuredRun& r) { return r.dp; }},
      {"micro_batch", [](const MeasuredRun& r) { return r.micro_batch; }},
      {"hidden", [](const MeasuredRun& r) { return r.hidden; }},
      {"layers", [](const MeasuredRun& r) { return r.layers; }},
      {"gpus", [](const MeasuredRun& r) { return r.gpus; }},
      {"micro_batches",
       [](const MeasuredRun& r) { return r.global_batch / (r.micro_batch * r.dp); }},
  };
  std::vector<CategoryError> out;
  for (const auto& [column, get] : columns) {
    std::map<int, CategoryError> groups;
    for (const RowResult& r : rows) {
      CategoryError& g = groups[get(r.run)];
      g.column = column;
      g.value = get(r.run);
      ++g.rows;
      g.mean_signed_error_percent += r.error_percent;
      g.mape_percent += std::abs(r.error_percent);
    }
    for (auto& [value, g] : groups) {
      g.mean_signed_error_percent /= static_cast<double>(g.rows);
      g.mape_percent /= static_cast<double>(g.rows);
      out.push_back(g);
    }
  }
  return out;
}

std::vector<std::size_t> fold_rows(std::size_t row_count, int fold) {
  if (fold != 0 && fold != 1) fail(ErrorCode::kInternal, "fold must be 0 or 1, got {}", fold);
  std::vector<std::size_t> rows;
  for (std::size_t i = static_cast<std::size_t>(fold); i < row_count; i += 2) rows.push_back(i);
  return rows;
}

std::vector<std::size_t> all_rows(std::size_t row_count) {
  std::vector<std::size_t> rows(row_count);
  for (std::size_t i = 0; i < row_count; ++i) rows[i] = i;
  return rows;
}

}  // namespace lynx::validate
