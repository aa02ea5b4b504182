// Live mode without a GPU: the op stream is the simulator's program, the host backend honours
// every dependency, its allocator replays the simulator's peak exactly, and its per-op CSV goes
// through `lynxsim fit`.
#include "calibrate/fit_command.hpp"
#include "calibrate/raw_csv.hpp"
#include "live/buffer_ledger.hpp"
#include "live/cpu_reference.hpp"
#include "live/dry_run.hpp"
#include "live/host_backend.hpp"
#include "live/live_report.hpp"
#include "live/op_stream.hpp"
#include "model/resolved_scenario.hpp"
#include "model/workload.hpp"
#include "runner/plan_file.hpp"
#include "runner/simulate.hpp"
#include "schedule/program_builder.hpp"
#include "strategies/plan_yaml.hpp"
#include "tests/error_of.hpp"
#include "tests/live/live_small.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace lynx::live {
namespace {

OpStream stream_for(const std::string& strategy, int tp = 2, int pp = 2, int dp = 1) {
  return build_op_stream(test::plan_of(test::simulate_kept(test::small_scenario(strategy, tp, pp, dp))), "plan.yaml");
}

}  // namespace

TEST_CASE("op stream: the simulator's program, with what to launch") {
  const OpStream ops = stream_for("full");
  const sim::Program& program = ops.sim.built.program;
  REQUIRE(ops.num_tasks == program.tasks.size());
  REQUIRE(ops.gpu_names.size() == 4);  // every GPU simulated: tp 2 x pp 2
  CHECK(ops.stream_names.back() == "pp_recv");
  std::size_t recvs = 0, sends = 0, collectives = 0, gemms = 0, recomputes = 0, rendezvous = 0;
  for (std::size_t i = 0; i < ops.ops.size(); ++i) {
    const LiveOp& op = ops.ops[i];
    if (i < ops.num_tasks) {
      const sim::Task& t = program.tasks[i];
      CHECK(op.task == static_cast<sim::TaskId>(i));
      CHECK(op.rank == t.gpu);
      CHECK(op.stream == t.stream);
      CHECK(op.predicted_end_ps == ops.sim.exec.task_end_ps[i]);
      CHECK(op.mem.size() == t.num_mem);
      // Every dependency of the program is kept: same-rank ones as they are, one on another
      // rank through the receive that stands for it.
      for (std::uint32_t k = 0; k < t.num_deps; ++k) {
        const sim::TaskId dep = program.deps[t.first_dep + k];
        const bool found = std::find(op.deps.begin(), op.deps.end(), dep) != op.deps.end();
        if (program.tasks[static_cast<std::size_t>(dep)].gpu == t.gpu) {
          CHECK(found);
        } else if (program.tasks[static_cast<std::size_t>(dep)].kind == sim::TaskKind::kMarker) {
          // A send's rendezvous with its receiver's blocking exchange (the 1F1B default): NCCL
          // makes it by itself, nothing is launched for it.
          CHECK_FALSE(found);
          ++rendezvous;
        } else {
          CHECK_FALSE(found);
          bool via_recv = false;
          for (int d : op.deps)
            via_recv = via_recv || (ops.ops[static_cast<std::size_t>(d)].launch == LaunchKind::kRecv &&
                                    ops.ops[static_cast<std::size_t>(d)].match == dep);
          CHECK(via_recv);
        }
      }
    } else {
      REQUIRE(op.launch == LaunchKind::kRecv);
      ++recvs;
      const LiveOp& send = ops.ops[static_cast<std::size_t>(op.match)];
      CHECK(send.launch == LaunchKind::kSend);
      CHECK(send.match == static_cast<int>(i));
      CHECK(send.peer == op.rank);
      CHECK(op.peer == send.rank);
      CHECK(op.bytes == send.bytes);
      CHECK(op.stream == recv_stream(ops));
    }
    sends += op.launch == LaunchKind::kSend;
    collectives += op.launch == LaunchKind::kCollective;
    gemms += op.launch == LaunchKind::kGemm;
    recomputes += op.pass == "recompute";
  }
  CHECK(recvs == sends);
  CHECK(recvs > 0);
  CHECK(rendezvous == sends);  // every send waits for its receiver's exchange
  CHECK(collectives > 0);
  CHECK(gemms > 0);
  CHECK(recomputes > 0);  // full recomputation re-runs every layer's forward
  // Each rank's issue order lists its ops once, in program order.
  std::size_t listed = 0;
  for (const auto& list : ops.rank_ops) listed += list.size();
  CHECK(listed == ops.ops.size());

  // Shapes are the workload's: qkv GEMM forward, dgrad and wgrad of rank 0.
  const model::Workload w = model::gpt_workload(ops.scenario.model, ops.scenario.parallel);
  const model::Op& qkv = *std::find_if(w.layer.begin(), w.layer.end(), [](const model::Op& o) { return o.name == "qkv_gemm"; });
  std::set<std::string> seen;
  for (const LiveOp& op : ops.ops) {
    if (op.op != "qkv_gemm" || op.rank != 0) continue;
    seen.insert(op.pass);
    if (op.pass == "fwd" || op.pass == "recompute") {
      CHECK(std::tie(op.m, op.n, op.k) == std::tie(qkv.gemm_m, qkv.gemm_n, qkv.gemm_k));
    } else if (op.pass == "dgrad") {
      CHECK(std::tie(op.m, op.n, op.k) == std::tie(qkv.gemm_m, qkv.gemm_k, qkv.gemm_n));
    } else if (op.pass == "wgrad") {
      CHECK(std::tie(op.m, op.n, op.k) == std::tie(qkv.gemm_k, qkv.gemm_n, qkv.gemm_m));
    }
  }
  CHECK(seen == std::set<std::string>{"fwd", "recompute", "dgrad", "wgrad"});
  // TP collectives: one communicator per TP group (2 stages x 1 replica), of 2 ranks each.
  std::size_t tp_comms = 0;
  for (const Communicator& c : ops.comms) tp_comms += ops.stream_names[static_cast<std::size_t>(c.stream)] == "tp";
  CHECK(tp_comms == 2);
}

TEST_CASE("op stream: overlapped recomputation runs on its own stream, on-demand on compute") {
  const OpStream selective = stream_for("selective");
  for (const LiveOp& op : selective.ops)
    if (op.pass == "recompute") CHECK(selective.stream_names[static_cast<std::size_t>(op.stream)] == "compute");
  const OpStream lynx = stream_for("lynx-heu", 2, 1, 1);
  std::map<std::string, int> recompute_streams;
  for (const LiveOp& op : lynx.ops)
    if (op.pass == "recompute") ++recompute_streams[lynx.stream_names[static_cast<std::size_t>(op.stream)]];
  // Whatever the planner kept, each recompute is on the stream its category says.
  for (const LiveOp& op : lynx.ops) {
    if (op.pass != "recompute" || op.launch == LaunchKind::kCollective) continue;
    const bool overlapped = op.category == sim::Category::kRecomputeOverlapped;
    CHECK((lynx.stream_names[static_cast<std::size_t>(op.stream)] == "recompute") == overlapped);
  }
}

TEST_CASE("op stream: the micro-batch load's broadcasts are NCCL broadcasts of Megatron's bytes, run by the host backend") {
  // With the host model on the program has them (schedule::micro_batch_load_bytes).
  const model::ResolvedScenario resolved = test::small_scenario("none", 2, 2, 1, {"hardware.gpu.host_kernel=5us"});
  const OpStream ops = build_op_stream(test::plan_of(test::simulate_kept(resolved)), "plan.yaml");
  const schedule::MicroBatchLoadBytes bytes = schedule::micro_batch_load_bytes(ops.scenario);
  std::size_t sizes = 0, data = 0;
  for (const LiveOp& op : ops.ops) {
    if (op.op != "batch_sizes_broadcast" && op.op != "batch_broadcast") continue;
    CAPTURE(op.label);
    CHECK(op.launch == LaunchKind::kCollective);
    CHECK(op.collective == model::CollectiveKind::kBroadcast);
    CHECK(op.pass == "batch-load");
    // Every member the same payload (the chain's last member sends nothing on).
    CHECK(op.bytes == (op.op == "batch_broadcast" ? bytes.data : bytes.sizes));
    CHECK(ops.comms.at(static_cast<std::size_t>(op.comm)).ranks.size() == 2);
    ++(op.op == "batch_broadcast" ? data : sizes);
  }
  // 4 micro-batches, both stages load (pp 2), 2 tp ranks each.
  CHECK(sizes == 4 * 2 * 2);
  CHECK(data == 4 * 2 * 2);
  HostBackend host;
  host.prepare(ops);
  const Measured m = host.run_iteration(ops);
  for (std::size_t i = 0; i < ops.ops.size(); ++i) CHECK(m.op_end_seq[i] > m.op_start_seq[i]);
}

TEST_CASE("host backend honours every dependency, stream order and transfer of the program") {
  for (const char* strategy : {"none", "full", "lynx-heu"}) {
    CAPTURE(strategy);
    const OpStream ops = stream_for(strategy);
    HostBackend host;
    host.prepare(ops);
    const Measured m = host.run_iteration(ops);
    REQUIRE(m.op_start_seq.size() == ops.ops.size());
    std::map<std::pair<int, int>, int> previous;
    for (const auto& list : ops.rank_ops)
      for (int index : list) {
        const auto i = static_cast<std::size_t>(index);
        const LiveOp& op = ops.ops[i];
        REQUIRE(m.op_start_seq[i] >= 0);
        CHECK(m.op_end_seq[i] > m.op_start_seq[i]);
        for (int d : op.deps) CHECK(m.op_start_seq[i] > m.op_end_seq[static_cast<std::size_t>(d)]);
        if (op.launch == LaunchKind::kRecv) CHECK(m.op_end_seq[i] > m.op_end_seq[static_cast<std::size_t>(op.match)]);
        const auto key = std::make_pair(op.rank, op.stream);
        if (const auto it = previous.find(key); it != previous.end())
          CHECK(m.op_start_seq[i] > m.op_end_seq[static_cast<std::size_t>(it->second)]);
        previous[key] = index;
      }
    // Collective members start only when every member is ready: after all members' deps.
    std::map<std::int32_t, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < ops.num_tasks; ++i)
      if (ops.sim.built.program.tasks[i].group >= 0) groups[ops.sim.built.program.tasks[i].group].push_back(i);
    for (const auto& [g, members] : groups)
      for (std::size_t a : members)
        for (std::size_t b : members)
          for (int d : ops.ops[b].deps) CHECK(m.op_start_seq[a] > m.op_end_seq[static_cast<std::size_t>(d)]);
    for (std::size_t r = 0; r < ops.gpu_names.size(); ++r) CHECK(m.peak_bytes[r] >= ops.static_bytes[r]);
  }
}

TEST_CASE("host backend runs blocking pipeline exchanges: each receive after its send, every op once") {
  const OpStream ops = build_op_stream(
      test::plan_of(test::simulate_kept(test::small_scenario("full", 2, 2, 1, {"parallel.pipeline_exchange=blocking"}))),
      "plan.yaml");
  HostBackend host;
  host.prepare(ops);
  const Measured m = host.run_iteration(ops);
  REQUIRE(m.op_start_seq.size() == ops.ops.size());
  int receives = 0;
  for (std::size_t i = 0; i < ops.ops.size(); ++i) {
    CHECK(m.op_start_seq[i] >= 0);
    if (ops.ops[i].launch != LaunchKind::kRecv) continue;
    ++receives;
    CHECK(m.op_end_seq[i] > m.op_end_seq[static_cast<std::size_t>(ops.ops[i].match)]);
  }
  CHECK(receives == 2 * 4 * 2);  // 4 micro-batches, an activation and a gradient each, per tp rank
}

TEST_CASE("host backend in the simulator's order: allocator peak equals the simulator's exactly") {
  for (const char* strategy : {"none", "full", "selective", "lynx-heu"}) {
    for (const auto& [tp, pp, dp] : {std::tuple{2, 2, 1}, std::tuple{1, 4, 1}, std::tuple{2, 1, 2}}) {
      CAPTURE(strategy);
      CAPTURE(tp);
      CAPTURE(pp);
      const OpStream ops = stream_for(strategy, tp, pp, dp);
      HostBackend host({.size_scale = 1.0 / 4096, .simulator_order = true});
      host.prepare(ops);
      const Measured m = host.run_iteration(ops);
      REQUIRE(m.peak_bytes.size() == ops.sim.exec.peak_bytes.size());
      for (std::size_t r = 0; r < m.peak_bytes.size(); ++r) CHECK(m.peak_bytes[r] == ops.sim.exec.peak_bytes[r]);
      // Activations are real: the peak is above the static bytes wherever a layer runs.
      CHECK(m.peak_bytes[0] > ops.static_bytes[0]);
    }
  }
}

TEST_CASE("dry run: streams, ops, shapes, bytes, allocations, frees and the peak") {
  const OpStream ops = stream_for("selective");
  std::ostringstream out;
  write_dry_run(out, ops, "plan.yaml");
  const std::string text = out.str();
  for (const char* expected : {"streams per rank: compute tp pp dp recompute pp_grad pp_recv", "rank 3 (stage1.dp0.tp1)",
                               "qkv_gemm", "bf16 128x384x256", "all_reduce", "recv mb0.send_activation",
                               "+act/attn_core", "-act/attn_core", "re.softmax", "causal_softmax 256x128",
                               "memory peak", "predicted iteration time"})
    CHECK_MESSAGE(text.find(expected) != std::string::npos, expected);
  // The replayed peak printed is the simulator's.
  for (std::size_t r = 0; r < ops.gpu_names.size(); ++r) {
    const std::string peak = format_bytes(static_cast<std::uint64_t>(ops.sim.exec.peak_bytes[r]));
    CHECK(text.find(fmt::format("rank {} memory peak: {} replayed in the simulator's order, {} tracked", r, peak, peak)) !=
          std::string::npos);
  }
}

TEST_CASE("live outputs: comparison rows, a fit-ready raw CSV, a trace in the simulator's format") {
  const OpStream ops = stream_for("lynx-heu");
  HostBackend host;
  host.prepare(ops);
  LiveRun run;
  run.plan_label = "plan.yaml";
  run.backend = host.name();
  run.device = host.device();
  run.warmup = 1;
  for (int i = 0; i < 3; ++i) run.iterations.push_back(host.run_iteration(ops));

  const std::vector<CompareRow> rows = compare_rows(ops, run);
  REQUIRE(rows.size() > 5);
  CHECK(rows[0].row == "iteration");
  CHECK(rows[0].predicted == doctest::Approx(static_cast<double>(ops.predicted_iteration_ps) / 1e12));
  CHECK(rows[0].measured > 0);
  CHECK(rows[1].row == "peak_memory");
  CHECK(rows[1].predicted == static_cast<double>(ops.sim.exec.peak_bytes[0]));
  std::ostringstream csv;
  write_compare_csv(csv, rows);
  CHECK(csv.str().rfind("row,rank,op,pass,stream,count,unit,measured,predicted,measured_over_predicted\n", 0) == 0);

  // Per-op CSV in calibrate's schema, read back by the parser and fitted by `lynxsim fit`.
  const calibrate::RawMeasurements raw = raw_measurements(ops, run);
  std::set<calibrate::MeasurementKind> kinds;
  for (const auto& r : raw.rows) kinds.insert(r.kind);
  CHECK(kinds.count(calibrate::MeasurementKind::kGemm) == 1);
  CHECK(kinds.count(calibrate::MeasurementKind::kMemoryBound) == 1);
  CHECK(kinds.count(calibrate::MeasurementKind::kCollective) == 1);
  const auto path = (std::filesystem::temp_directory_path() / "lynxsim_test_live_raw.csv").string();
  calibrate::write_raw_csv_file(path, raw);
  const calibrate::RawMeasurements back = calibrate::read_raw_csv(path);
  CHECK(back.rows.size() == raw.rows.size());
  CHECK(back.metadata_value("source") == "lynxsim live");
  calibrate::FitCommandOptions fit;
  fit.raw_csv_paths = {path};
  fit.base_profile = "dgx-a100-80gb";
  const calibrate::FitCommandResult fitted = calibrate::run_fit_command(fit);
  CHECK(fitted.fitted.profile == "dgx-a100-80gb-calibrated");
  CHECK(fitted.report.find("gpu.gemm_efficiency") != nullptr);

  std::ostringstream trace;
  write_live_trace(trace, ops, run);
  const std::string t = trace.str();
  CHECK(t.find("\"traceEvents\"") != std::string::npos);
  CHECK(t.find("live (measured)") != std::string::npos);
  CHECK(t.find("qkv_gemm") != std::string::npos);
}

TEST_CASE("buffer ledger: counts like the simulator's tracker, refuses a free never allocated") {
  BufferLedger ledger(100, 2);
  int a = 0, b = 0;
  ledger.add(0, 50, &a, 0.0);
  ledger.add(1, 30, &b, 0.1);
  CHECK(ledger.current_bytes() == 180);
  CHECK(ledger.take(0, 50, 0.2) == &a);
  CHECK(ledger.peak_bytes() == 180);
  CHECK(ledger.current_bytes() == 130);
  CHECK(lynx::test::error_of([&] { (void)ledger.take(0, 50, 0.3); }).find("never allocated") != std::string::npos);
  CHECK(lynx::test::error_of([&] { (void)ledger.take(1, 31, 0.3); }).find("31 bytes of memory tag 1") != std::string::npos);
  CHECK(ledger.held() == std::vector<void*>{&b});
}

TEST_CASE("CPU references of the kernels") {
  // LayerNorm of [1, 2, 3, 4]: mean 2.5, variance 1.25.
  const std::vector<float> ln = layernorm_reference({1, 2, 3, 4}, {1, 1, 1, 1}, {0, 0, 0, 1}, 1, 4);
  CHECK(ln[0] == doctest::Approx(-1.5 / std::sqrt(1.25 + 1e-5)));
  CHECK(ln[3] == doctest::Approx(1.0 + 1.5 / std::sqrt(1.25 + 1e-5)));
  const std::vector<float> g = bias_gelu_reference({0, 1, -1, 3}, {0, 0, 0, 0}, 1, 4);
  CHECK(g[0] == 0.0f);
  CHECK(g[1] == doctest::Approx(0.841192));
  CHECK(g[2] == doctest::Approx(-0.158808));
  // Causal softmax: row r sees positions 0..r % seq; each row sums to 1.
  const std::vector<float> sm = causal_softmax_reference({1, 5, 2, 3}, 2, 2, 2, 1.0f);
  CHECK(sm[0] == 1.0f);
  CHECK(sm[1] == 0.0f);
  CHECK(sm[2] + sm[3] == doctest::Approx(1.0));
  CHECK(sm[3] == doctest::Approx(std::exp(1.0) / (1 + std::exp(1.0))));
  const std::vector<float> d = dropout_reference({1, 2, 3, 4}, {1, 0, 1, 0}, 0.5f);
  CHECK(d == std::vector<float>{2, 0, 6, 0});
  const std::vector<float> dr = dropout_residual_reference({1, 2}, {1, 1}, {10, 20}, {1, 0}, 1, 2, 0.5f);
  CHECK(dr == std::vector<float>{14, 20});

  check_close("same", {1.0f, 2.0f}, {1.0f, 2.01f}, 0.01f, 0.0f);
  CHECK(lynx::test::error_of([] { check_close("off", {1.0f, 2.5f}, {1.0f, 2.0f}, 0.01f, 0.0f); })
            .find("element 1 is 2.5, the CPU reference gives 2") != std::string::npos);
  CHECK(lynx::test::error_of([] { check_close("zeros", {0.0f}, {0.0f}, 0.01f, 0.0f); }).find("all zeros") != std::string::npos);
  check_keep_fraction("mask", {1, 1, 1, 0}, 0.75f, 0.01f);
  CHECK(lynx::test::error_of([] { check_keep_fraction("mask", {1, 0, 0, 0}, 0.75f, 0.1f); }).find("kept 0.2500") !=
        std::string::npos);
}

}  // namespace lynx::live
