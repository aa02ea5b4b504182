#include "runner/layer_times.hpp"

#include "common/error.hpp"
#include "schedule/program_builder.hpp"

#include <algorithm>
#include <optional>

namespace lynx::runner {

namespace {

using schedule::LayerSpan;

/// The span of (gpu, micro-batch 0, layer) in `spans`, if the program has one.
std::optional<LayerSpan> find_span(const std::vector<LayerSpan>& spans, sim::GpuId gpu, int layer) {
  for (const LayerSpan& s : spans)
    if (s.gpu == gpu && s.micro_batch == 0 && s.layer == layer) return s;
  return std::nullopt;
}

/// End time of the span's last compute-stream task (the layer's last kernel in stream order).
TimePs compute_end_ps(const SimRun& run, const LayerSpan& span) {
  const sim::Program& prog = run.built.program;
  for (sim::TaskId t = span.end_task; t-- > span.first_task;) {
    const sim::Task& task = prog.tasks[static_cast<std::size_t>(t)];
    if (task.stream == schedule::kCompute && task.gpu == span.gpu && task.kind == sim::TaskKind::kKernel)
      return run.exec.task_end_ps[static_cast<std::size_t>(t)];
  }
  fail(ErrorCode::kInternal, "layer {} of micro-batch 0 has no compute-stream kernel", span.layer);
}

double seconds(TimePs ps) { return static_cast<double>(ps) * 1e-12; }

}  // namespace

LayerTimes layer_times(const SimRun& run, int layer) {
  const schedule::BuiltProgram& built = run.built;
  if (built.program.tasks.empty() || run.exec.task_end_ps.size() != built.program.tasks.size())
    fail(ErrorCode::kInternal, "layer_times needs a run simulated with keep_trace_data");
  // The first GPU that runs the layer's forward in micro-batch 0.
  std::optional<LayerSpan> fwd;
  for (const LayerSpan& s : built.layer_forward)
    if (s.micro_batch == 0 && s.layer == layer) {
      fwd = s;
      break;
    }
  if (!fwd) fail(ErrorCode::kInvalidOption, "layer {}: no simulated GPU runs it", layer);
  const sim::GpuId gpu = fwd->gpu;
  const auto below_fwd = find_span(built.layer_forward, gpu, layer - 1);
  const auto bwd = find_span(built.layer_backward, gpu, layer);
  const auto above_bwd = find_span(built.layer_backward, gpu, layer + 1);
  if (!below_fwd || !bwd || !above_bwd || below_fwd->virtual_stage != fwd->virtual_stage ||
      above_bwd->virtual_stage != fwd->virtual_stage)
    fail(ErrorCode::kInvalidOption,
         "layer {}: its per-layer times need a layer below and above it in the same pipeline chunk; pick a middle layer",
         layer);
  LayerTimes out;
  out.layer = layer;
  out.forward_s = seconds(compute_end_ps(run, *fwd) - compute_end_ps(run, *below_fwd));
  out.backward_s = seconds(compute_end_ps(run, *bwd) - compute_end_ps(run, *above_bwd));
  // The layer's on-demand recompute is emitted after the layer above's backward ops and
  // before its own (schedule::Builder::emit_backward_step).
  const sim::Program& prog = built.program;
  for (sim::TaskId t = above_bwd->end_task; t < bwd->first_task; ++t) {
    const sim::Task& task = prog.tasks[static_cast<std::size_t>(t)];
    if (task.gpu == gpu && task.stream == schedule::kCompute && task.category == sim::Category::kRecompute)
      out.recompute_s += seconds(run.exec.task_end_ps[static_cast<std::size_t>(t)] -
                                 run.exec.task_start_ps[static_cast<std::size_t>(t)]);
  }
  return out;
}

}  // namespace lynx::runner
