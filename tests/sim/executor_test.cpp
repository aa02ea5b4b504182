#include "sim/executor.hpp"

#include "tests/sim/program_builder.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace lynx::literals;
using lynx::TimePs;
using lynx::sim::Category;
using lynx::sim::ExecOptions;
using lynx::sim::ExecResult;
using lynx::sim::MemEffect;
using lynx::sim::TaskId;
using lynx::sim::execute;
using lynx::sim::test::ProgramBuilder;

namespace {
TimePs start_of(const ExecResult& r, TaskId t) { return r.task_start_ps[static_cast<std::size_t>(t)]; }
TimePs end_of(const ExecResult& r, TaskId t) { return r.task_end_ps[static_cast<std::size_t>(t)]; }

std::string error_of(const ProgramBuilder& b) {
  try {
    execute(b.machine, b.program);
  } catch (const lynx::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("executor: stream FIFO and a cross-GPU wait") {
  ProgramBuilder b;
  b.add_gpu("g0", {"compute", "comm"});
  b.add_gpu("g1", {"compute"});
  const TaskId a = b.kernel(0, 0, 100_ns, "A");
  const TaskId d = b.kernel(1, 0, 20_ns, "D");
  const TaskId bb = b.kernel(0, 0, 50_ns, "B");      // after A on g0/compute (stream order)
  const TaskId c = b.kernel(1, 0, 30_ns, "C", {a});  // after D on g1/compute, and waits for A
  const TaskId e = b.kernel(0, 1, 40_ns, "E", {bb}); // other stream of g0, waits for B
  const ExecResult r = execute(b.machine, b.program);
  // A [0,100]; B [100,150]; D [0,20]; C starts at max(end A=100, end D=20) = 100, ends 130;
  // E starts at end B = 150 and runs alone on g0: ends 190.
  CHECK(start_of(r, a) == 0);
  CHECK(end_of(r, a) == 100_ns);
  CHECK(start_of(r, bb) == 100_ns);
  CHECK(end_of(r, bb) == 150_ns);
  CHECK(end_of(r, d) == 20_ns);
  CHECK(start_of(r, c) == 100_ns);
  CHECK(end_of(r, c) == 130_ns);
  CHECK(start_of(r, e) == 150_ns);
  CHECK(end_of(r, e) == 190_ns);
  CHECK(r.makespan_ps == 190_ns);
  CHECK(r.events > 0);
}

TEST_CASE("executor: a kernel alone takes exactly work_ps, markers take zero time") {
  ProgramBuilder b;
  b.add_gpu("g0", {"s0", "s1"}, 0, 0.37);
  const TaskId m0 = b.marker(0, 0, "start");
  const TaskId k = b.kernel(0, 0, 123'457, "K");  // odd ps count: no rounding allowed
  const TaskId m1 = b.marker(0, 1, "after K", {k});
  const TaskId m2 = b.marker(0, 1, "after that");
  const ExecResult r = execute(b.machine, b.program);
  CHECK(end_of(r, m0) == 0);
  CHECK(start_of(r, k) == 0);
  CHECK(end_of(r, k) == 123'457);
  CHECK(start_of(r, m1) == 123'457);
  CHECK(end_of(r, m1) == 123'457);
  CHECK(end_of(r, m2) == 123'457);
}

TEST_CASE("executor: collective rendezvous starts and ends a group together") {
  ProgramBuilder b;
  b.add_gpu("g0", {"compute", "tp"});
  b.add_gpu("g1", {"compute", "tp"});
  const auto l01 = b.add_link("g0->g1", 1'000'000'000, 10_ns);  // 1 byte/ns
  const auto l10 = b.add_link("g1->g0", 1'000'000'000, 20_ns);
  const TaskId k0 = b.kernel(0, 0, 100_ns, "K0");
  const TaskId k1 = b.kernel(1, 0, 300_ns, "K1");
  const TaskId c0 = b.comm(0, 1, 5_ns, "C0", {{1000, {l01}}}, {k0}, /*group=*/7);
  const TaskId c1 = b.comm(1, 1, 8_ns, "C1", {{2000, {l10}}}, {k1}, /*group=*/7);
  const TaskId n0 = b.kernel(0, 1, 10_ns, "N0");  // after C0 on g0/tp
  const ExecResult r = execute(b.machine, b.program);
  // Both start when the later one is ready: end K1 = 300 ns.
  CHECK(start_of(r, c0) == 300_ns);
  CHECK(start_of(r, c1) == 300_ns);
  // C0's flow: 1000 B at 1 B/ns = 1000 ns, + 10 ns latency -> 1310 ns.
  // C1's flow: 2000 B = 2000 ns, + 20 ns -> 2320 ns. Group ends at the last flow + max(5, 8) ns.
  CHECK(r.flow_end_ps[0] == 1310_ns);
  CHECK(r.flow_end_ps[1] == 2320_ns);
  CHECK(end_of(r, c0) == 2328_ns);
  CHECK(end_of(r, c1) == 2328_ns);
  CHECK(start_of(r, n0) == 2328_ns);
  CHECK(end_of(r, n0) == 2338_ns);
}

TEST_CASE("executor: a group with a kernel member ends when both the kernel and the flows are done") {
  ProgramBuilder b;
  b.add_gpu("g0", {"s0"});
  b.add_gpu("g1", {"s0"});
  const auto link = b.add_link("l", 1'000'000'000, 0);
  const TaskId k = b.add_task(lynx::sim::TaskKind::kKernel, 0, 0, 1000_ns, "K", {}, {}, {}, 5);
  const TaskId c = b.comm(1, 0, 0, "C", {{100, {link}}}, {}, 5);
  const ExecResult r = execute(b.machine, b.program);
  // The flow is done at 100 ns, the kernel (alone on g0) at 1000 ns: the group ends at 1000 ns.
  CHECK(r.flow_end_ps[0] == 100_ns);
  CHECK(end_of(r, k) == 1000_ns);
  CHECK(end_of(r, c) == 1000_ns);
}

TEST_CASE("executor: kernel contention with a communication kernel") {
  // c = 0.5: rate = 1 / (n_kernels * (1 + 0.5 * n_comm)).
  ProgramBuilder b;
  b.add_gpu("g0", {"s0", "s1", "s2"}, 0, 0.5);
  const auto link = b.add_link("nvlink", 1'000'000'000, 0);  // 1 byte/ns
  const TaskId ka = b.kernel(0, 0, 1000_ns, "A");
  const TaskId kb = b.kernel(0, 1, 3000_ns, "B");
  const TaskId comm = b.comm(0, 2, 0, "C", {{600, {link}}});
  const ExecResult r = execute(b.machine, b.program);
  // [0, 600]: 2 kernels + 1 comm -> rate 1/(2 * 1.5) = 1/3: A and B each do 200 ns of work.
  // The comm task is not slowed: 600 B at 1 B/ns ends at 600 ns.
  // [600, 2200]: 2 kernels, no comm -> rate 1/2: A's remaining 800 ns take 1600 ns -> 2200 ns;
  //   B does 800 ns too, 3000 - 200 - 800 = 2000 ns left.
  // [2200, 4200]: B alone at rate 1 -> 4200 ns.
  CHECK(end_of(r, comm) == 600_ns);
  CHECK(end_of(r, ka) == 2200_ns);
  CHECK(end_of(r, kb) == 4200_ns);
  CHECK(r.makespan_ps == 4200_ns);
}

TEST_CASE("executor: comm contention slows a flow while a compute kernel runs on its GPU") {
  // One flow of B = 600 bytes on an idle link of W = 1e9 B/s (1 byte/ns), beside one kernel on
  // the flow's GPU; kernels slowed by c = 0.5 per comm task, flows by f = 0.6 per kernel.
  // Flow rate W / (1 + f * n_k), kernel rate 1 / (n_k * (1 + c * n_comm)).
  auto machine_with = [](ProgramBuilder& b, double c, double f) {
    b.add_gpu("g0", {"compute", "comm"}, 0, c);
    b.machine.gpus[0].comm_contention = f;
    return b.add_link("nvlink", 1'000'000'000, 0);
  };
  SUBCASE("the kernel outlasts the flow: K = 1000 ns") {
    ProgramBuilder b;
    const auto link = machine_with(b, 0.5, 0.6);
    const TaskId k = b.kernel(0, 0, 1000_ns, "K");
    const TaskId comm = b.comm(0, 1, 0, "C", {{600, {link}}});
    const ExecResult r = execute(b.machine, b.program);
    // [0, 960 ns]: flow at 1/1.6 = 0.625 B/ns -> 600 B in 960'000 ps exactly
    //   (rate 1e9 * 1e6 / 1.6e6 = 5e9/8 B/s: ceil(600e12 * 8 / 5e9) = 960'000);
    //   kernel at 1/1.5: 640 ns of its work done (floor(960'000 * 1e12 / 1.5e6) units).
    // [960, 1320 ns]: kernel alone, its last 360 ns.
    CHECK(r.flow_end_ps[0] == 960'000);
    CHECK(end_of(r, comm) == 960'000);
    CHECK(end_of(r, k) == 1'320'000);
  }
  SUBCASE("the kernel ends first (K = 300 ns): the flow speeds up at the kernel's end") {
    ProgramBuilder b;
    const auto link = machine_with(b, 0.5, 0.6);
    const TaskId k = b.kernel(0, 0, 300_ns, "K");
    const TaskId comm = b.comm(0, 1, 0, "C", {{600, {link}}});
    const ExecResult r = execute(b.machine, b.program);
    // Kernel at 1/1.5: 300 ns of work by 450'000 ps. Flow by then: floor(450'000 * 5e9 / 8)
    // = 281.25e12 of 600e12 (byte * ps/s) through; the other 318.75 B alone at 1 B/ns:
    // 318'750 ps more -> 768'750 ps.
    CHECK(end_of(r, k) == 450'000);
    CHECK(r.flow_end_ps[0] == 768'750);
    CHECK(end_of(r, comm) == 768'750);
  }
  SUBCASE("a kernel starting while the flow runs slows it from then on") {
    ProgramBuilder b;
    const auto link = machine_with(b, 0.5, 0.6);
    b.add_gpu("g1", {"compute"});
    const TaskId k0 = b.kernel(1, 0, 200_ns, "K0");
    const TaskId k = b.kernel(0, 0, 240_ns, "K", {k0});
    const TaskId comm = b.comm(0, 1, 0, "C", {{600, {link}}});
    const ExecResult r = execute(b.machine, b.program);
    // [0, 200 ns]: the flow alone, 200 B. [200, 560 ns]: K at 1/1.5 (240 ns of work in
    // 360 ns); the flow at 0.625 B/ns moves 225 B. Then 175 B alone -> 735 ns.
    CHECK(start_of(r, k) == 200_ns);
    CHECK(end_of(r, k) == 560_ns);
    CHECK(end_of(r, comm) == 735_ns);
  }
  SUBCASE("two kernels: divided by 1 + f * 2") {
    ProgramBuilder b;
    b.add_gpu("g0", {"s0", "s1", "comm"});
    b.machine.gpus[0].comm_contention = 0.5;
    const auto link = b.add_link("l", 1'000'000'000, 0);
    const TaskId ka = b.kernel(0, 0, 1000_ns, "A");
    const TaskId kb = b.kernel(0, 1, 1000_ns, "B");
    const TaskId comm = b.comm(0, 2, 0, "C", {{600, {link}}});
    const ExecResult r = execute(b.machine, b.program);
    // c = 0: each kernel at 1/2, both end at 2000 ns; the flow at 1/(1 + 0.5 * 2) = 0.5 B/ns.
    CHECK(end_of(r, comm) == 1200_ns);
    CHECK(end_of(r, ka) == 2000_ns);
    CHECK(end_of(r, kb) == 2000_ns);
  }
  SUBCASE("a flow alone, and f = 0, keep today's times") {
    ProgramBuilder alone;
    const auto link = machine_with(alone, 0.5, 0.6);
    const TaskId comm = alone.comm(0, 1, 0, "C", {{600, {link}}});
    CHECK(end_of(execute(alone.machine, alone.program), comm) == 600_ns);
    ProgramBuilder off;
    const auto off_link = machine_with(off, 0.5, 0.0);
    const TaskId k = off.kernel(0, 0, 1000_ns, "K");
    const TaskId off_comm = off.comm(0, 1, 0, "C", {{600, {off_link}}});
    const ExecResult r = execute(off.machine, off.program);
    // The kernel rule alone: 400 ns of work by 600 ns, then 600 ns solo.
    CHECK(end_of(r, off_comm) == 600_ns);
    CHECK(end_of(r, k) == 1200_ns);
  }
  SUBCASE("kernels on another GPU than the sender's do not slow the flow") {
    ProgramBuilder b;
    const auto link = machine_with(b, 0.5, 0.6);
    b.add_gpu("g1", {"comm"});
    b.machine.gpus[1].comm_contention = 0.6;
    const TaskId k = b.kernel(0, 0, 1000_ns, "K");      // on g0
    const TaskId comm = b.comm(1, 0, 0, "C", {{600, {link}}});  // sent by g1, no kernel there
    const ExecResult r = execute(b.machine, b.program);
    CHECK(end_of(r, comm) == 600_ns);
    CHECK(end_of(r, k) == 1000_ns);  // and the kernel sees no comm task on its own GPU
  }
  SUBCASE("a rate that does not divide: rounded up once, and the same every run") {
    ProgramBuilder b;
    b.add_gpu("g0", {"compute", "comm"}, 0, 0.2);
    b.machine.gpus[0].comm_contention = 0.25;
    const auto link = b.add_link("pcie", 3'000'000'000, 5);  // 3 B/ns, 5 ps latency
    const TaskId k = b.kernel(0, 0, 700_ns, "K");
    const TaskId comm = b.comm(0, 1, 0, "C", {{1000, {link}}});
    const ExecResult r = execute(b.machine, b.program);
    // Flow at 3e9 * 1e6 / 1.25e6 = 2.4e9 B/s (12e9/5): ceil(1000e12 * 5 / 12e9) = 416'667 ps,
    // + 5 ps latency: the comm task ends at 416'672. Kernel at 1/1.2 until then:
    // floor(416'672 * 1e12 / 1.2e6) = 347'226'666'666 units done of 700e9; the other
    // 352'773'333'334 units alone: ceil(352'773'333'334 / 1e6) = 352'774 ps -> 769'446 ps.
    CHECK(r.flow_end_ps[0] == 416'672);
    CHECK(end_of(r, comm) == 416'672);
    CHECK(end_of(r, k) == 769'446);
    const ExecResult again = execute(b.machine, b.program);
    CHECK(again.fingerprint == r.fingerprint);
    CHECK(again.task_end_ps == r.task_end_ps);
  }
}

TEST_CASE("executor: a comm contention outside [0, 1e6] is a malformed machine") {
  ProgramBuilder b;
  b.add_gpu("g0", {"s0"});
  b.machine.gpus[0].comm_contention = -0.1;
  b.kernel(0, 0, 10_ns, "K");
  CHECK(error_of(b).find("comm contention -0.1 is not in [0, 1e6]") != std::string::npos);
}

TEST_CASE("executor: links share bandwidth fairly among flows") {
  SUBCASE("two flows on one link, the second joining half-way") {
    ProgramBuilder b;
    b.add_gpu("g0", {"comm"});
    b.add_gpu("g1", {"compute", "comm"});
    const auto link = b.add_link("ib", 1'000'000'000, 7_ns);  // 1e9 B/s = 1 byte/ns
    const TaskId fa = b.comm(0, 0, 0, "A", {{1000, {link}}});
    const TaskId k = b.kernel(1, 0, 500_ns, "K");
    const TaskId fb = b.comm(1, 1, 0, "B", {{1000, {link}}}, {k});
    const ExecResult r = execute(b.machine, b.program);
    // A alone for 500 ns: 500 B through. Then two flows at 0.5 B/ns: A's last 500 B take
    // 1000 ns -> bytes done at 1500 ns; B has 500 B through by then, alone again: 500 ns more
    // -> 2000 ns. Each flow then waits the 7 ns link latency.
    CHECK(start_of(r, fb) == 500_ns);
    CHECK(r.flow_end_ps[0] == 1507_ns);
    CHECK(r.flow_end_ps[1] == 2007_ns);
    CHECK(end_of(r, fa) == 1507_ns);
    CHECK(end_of(r, fb) == 2007_ns);
  }
  SUBCASE("the bottleneck link sets a multi-link flow's rate") {
    ProgramBuilder b;
    b.add_gpu("g0", {"comm"});
    b.add_gpu("g1", {"comm"});
    const auto fast = b.add_link("fast", 2'000'000'000, 0);  // 2 B/ns
    const auto slow = b.add_link("slow", 1'000'000'000, 0);  // 1 B/ns
    const TaskId x = b.comm(0, 0, 0, "X", {{1000, {fast, slow}}});
    const TaskId y = b.comm(1, 0, 0, "Y", {{3000, {fast}}});
    const ExecResult r = execute(b.machine, b.program);
    // X: min(2/2, 1/1) = 1 B/ns; Y: 2/2 = 1 B/ns. X done at 1000 ns (Y has 1000 B through);
    // Y alone at 2 B/ns: 2000 B in 1000 ns -> 2000 ns.
    CHECK(end_of(r, x) == 1000_ns);
    CHECK(end_of(r, y) == 2000_ns);
  }
  SUBCASE("a flow alone takes exactly transfer_time_ps + latency") {
    ProgramBuilder b;
    b.add_gpu("g0", {"comm"});
    const auto link = b.add_link("pcie", 3'000'000'000, 5);
    const TaskId t = b.comm(0, 0, 0, "T", {{1000, {link}}});
    const ExecResult r = execute(b.machine, b.program);
    // ceil(1000 B * 1e12 ps/s / 3e9 B/s) = ceil(333333.3) = 333334 ps, + 5 ps latency.
    CHECK(lynx::transfer_time_ps(1000, 3'000'000'000) == 333'334);
    CHECK(end_of(r, t) == 333'339);
  }
  SUBCASE("zero bytes or zero links cost only latency; then the task's work_ps") {
    ProgramBuilder b;
    b.add_gpu("g0", {"comm"});
    const auto link = b.add_link("l", 1'000'000'000, 7_ns);
    const TaskId t = b.comm(0, 0, 3_ns, "T", {{0, {link}}, {500, {}}});
    const ExecResult r = execute(b.machine, b.program);
    CHECK(r.flow_end_ps[0] == 7_ns);  // only the link latency
    CHECK(r.flow_end_ps[1] == 0);     // no links: no time
    CHECK(end_of(r, t) == 10_ns);     // last flow 7 ns + work 3 ns
  }
}

TEST_CASE("executor: memory peak and OOM are results, not errors") {
  ProgramBuilder b;
  b.add_gpu("g0", {"s0", "s1"}, /*capacity=*/1000);
  b.add_gpu("g1", {"s0"});  // capacity 0: no limit
  b.program.static_bytes_per_gpu = {200, 0};
  const auto act = b.add_tag("act");
  const auto buf = b.add_tag("buf");
  const TaskId a = b.kernel(0, 0, 100_ns, "A", {}, {MemEffect{500, act, false}, MemEffect{-500, act, true}});
  const TaskId w = b.kernel(1, 0, 50_ns, "W");
  const TaskId bb = b.kernel(0, 1, 20_ns, "B", {w}, {MemEffect{400, buf, false}, MemEffect{-400, buf, true}});
  ExecOptions options;
  options.record_memory_timeline = true;
  ExecResult r;
  REQUIRE_NOTHROW(r = execute(b.machine, b.program, options));
  // A alone [0, 50]: 50 ns of work. B starts at 50 (after W on g1); both at rate 1/2: B's 20 ns
  // take 40 ns -> 90; A does 20 more (70 total), then 30 alone -> 120.
  CHECK(end_of(r, a) == 120_ns);
  CHECK(start_of(r, bb) == 50_ns);
  CHECK(end_of(r, bb) == 90_ns);
  // g0: 200 static; +500 at 0 -> 700; +400 at 50 ns -> 1100 > 1000 (OOM); -400 at 90 -> 700;
  // -500 at 120 -> 200.
  CHECK(r.peak_bytes[0] == 1100);
  CHECK(r.first_oom_ps[0] == 50_ns);
  CHECK(r.peak_bytes[1] == 0);
  CHECK(r.first_oom_ps[1] == -1);
  using Sample = std::pair<TimePs, std::int64_t>;
  const std::vector<Sample> expected{{0, 200}, {0, 700}, {50_ns, 1100}, {90_ns, 700}, {120_ns, 200}};
  CHECK(r.memory_timeline[0] == expected);
  CHECK(r.memory_timeline[1] == std::vector<Sample>{{0, 0}});
}

TEST_CASE("executor: a collective's frees at end happen together for all members") {
  ProgramBuilder b;
  b.add_gpu("g0", {"tp"});
  b.add_gpu("g1", {"tp"});
  const auto buf = b.add_tag("comm_buffer");
  const auto l = b.add_link("l", 1'000'000'000, 0);
  b.add_task(lynx::sim::TaskKind::kComm, 0, 0, 0, "AR0", {}, {{100, {l}}},
             {MemEffect{64, buf, false}, MemEffect{-64, buf, true}}, 1, Category::kTpComm);
  b.add_task(lynx::sim::TaskKind::kComm, 1, 0, 0, "AR1", {}, {{300, {l}}},
             {MemEffect{64, buf, false}, MemEffect{-64, buf, true}}, 1, Category::kTpComm);
  ExecOptions options;
  options.record_memory_timeline = true;
  const ExecResult r = execute(b.machine, b.program, options);
  // Both flows share l at 0.5 B/ns: the 100 B flow is done at 200 ns (the other has 100 B
  // through); the 300 B one has 200 B left alone -> 400 ns. Both members end at 400 ns.
  CHECK(r.flow_end_ps[0] == 200_ns);
  CHECK(r.flow_end_ps[1] == 400_ns);
  CHECK(r.task_end_ps[0] == 400_ns);
  CHECK(r.task_end_ps[1] == 400_ns);
  CHECK(r.memory_timeline[0].back() == std::pair<TimePs, std::int64_t>{400_ns, 0});
  CHECK(r.peak_bytes[0] == 64);
}

TEST_CASE("executor: malformed programs throw lynx::Error") {
  SUBCASE("negative balance on a memory tag") {
    ProgramBuilder b;
    b.add_gpu("g0", {"s0"});
    const auto act = b.add_tag("act/attn_core");
    b.kernel(0, 0, 10_ns, "F", {}, {MemEffect{-100, act, false}});
    const std::string message = error_of(b);
    CHECK(message.find("act/attn_core") != std::string::npos);
    CHECK(message.find("'F'") != std::string::npos);
  }
  SUBCASE("dependency cycle") {
    ProgramBuilder b;
    b.add_gpu("g0", {"s0", "s1"});
    b.kernel(0, 0, 10_ns, "ok");
    b.kernel(0, 0, 10_ns, "X", {3});
    b.kernel(0, 1, 10_ns, "never");  // fine on its own
    b.kernel(0, 1, 10_ns, "Y", {1});
    const std::string message = error_of(b);
    CHECK(message.find("never starts") != std::string::npos);
    const bool names_cycle_task = message.find("'X'") != std::string::npos || message.find("'Y'") != std::string::npos;
    CHECK(names_cycle_task);
  }
  SUBCASE("collective group that can never rendezvous") {
    ProgramBuilder b;
    b.add_gpu("g0", {"tp"});
    // Two members on one stream: the second waits for the first to end, which waits for it.
    b.comm(0, 0, 0, "G1", {}, {}, 3);
    b.comm(0, 0, 0, "G2", {}, {}, 3);
    const std::string message = error_of(b);
    CHECK(message.find("collective group 3") != std::string::npos);
    CHECK(message.find("'G1'") != std::string::npos);
  }
  SUBCASE("bad references") {
    ProgramBuilder b;
    b.add_gpu("g0", {"s0"});
    b.kernel(0, 0, 10_ns, "A", {5});
    CHECK(error_of(b).find("does not exist") != std::string::npos);
    ProgramBuilder c;
    c.add_gpu("g0", {"s0"});
    c.kernel(0, 1, 10_ns, "A");
    CHECK(error_of(c).find("not a stream") != std::string::npos);
    ProgramBuilder d;
    d.add_gpu("g0", {"s0"});
    d.comm(0, 0, 0, "A", {{10, {4}}});
    CHECK(error_of(d).find("not a link") != std::string::npos);
  }
}

TEST_CASE("executor: an empty program") {
  ProgramBuilder b;
  b.add_gpu("g0", {"s0"}, 100);
  b.program.static_bytes_per_gpu = {150};
  const ExecResult r = execute(b.machine, b.program);
  CHECK(r.makespan_ps == 0);
  CHECK(r.peak_bytes == std::vector<std::int64_t>{150});
  CHECK(r.first_oom_ps == std::vector<TimePs>{0});  // static bytes alone exceed capacity
}

TEST_CASE("executor: host issue times gate task starts") {
  ProgramBuilder b;
  b.add_gpu("g0", {"compute", "tp"});
  b.add_gpu("g1", {"compute", "tp"});
  const auto l01 = b.add_link("g0->g1", 1'000'000'000, 10_ns);
  const auto l10 = b.add_link("g1->g0", 1'000'000'000, 10_ns);
  const TaskId a = b.kernel(0, 0, 100_ns, "A");
  const TaskId bb = b.kernel(0, 0, 10_ns, "B");   // ready at 100 ns, issued at 300 ns
  const TaskId c = b.kernel(0, 0, 10_ns, "C");    // issued at 50 ns: starts right after B
  const TaskId c0 = b.comm(0, 1, 0, "C0", {{100, {l01}}}, {}, /*group=*/1);
  const TaskId c1 = b.comm(1, 1, 0, "C1", {{100, {l10}}}, {}, /*group=*/1);
  b.program.issue_ps.assign(b.program.tasks.size(), 0);
  b.program.issue_ps[static_cast<std::size_t>(a)] = 20_ns;
  b.program.issue_ps[static_cast<std::size_t>(bb)] = 300_ns;
  b.program.issue_ps[static_cast<std::size_t>(c)] = 50_ns;
  b.program.issue_ps[static_cast<std::size_t>(c1)] = 500_ns;  // a group waits for its last issue
  const ExecResult r = execute(b.machine, b.program);
  CHECK(start_of(r, a) == 20_ns);
  CHECK(end_of(r, a) == 120_ns);
  CHECK(start_of(r, bb) == 300_ns);
  CHECK(start_of(r, c) == 310_ns);
  CHECK(start_of(r, c0) == 500_ns);
  CHECK(start_of(r, c1) == 500_ns);
  // Without issue times the same program runs from 0.
  b.program.issue_ps.clear();
  const ExecResult free = execute(b.machine, b.program);
  CHECK(start_of(free, bb) == 100_ns);
  CHECK(start_of(free, c0) == 0);

  b.program.issue_ps.assign(3, 0);  // not one per task
  CHECK(error_of(b).find("issue times for 3 tasks") != std::string::npos);
}

TEST_CASE("executor: a host wait blocks the host until the GPU task ends, then it issues on") {
  ProgramBuilder b;
  b.add_gpu("g0", {"compute", "side"});
  const TaskId a = b.kernel(0, 0, 100_ns, "A");  // issued at 10 ns: runs 10-110 ns
  const TaskId bb = b.kernel(0, 0, 10_ns, "B");  // issued at 20 ns: runs after A, 110-120 ns
  const TaskId c = b.kernel(0, 0, 10_ns, "C");   // the host waits for A before issuing C
  const TaskId d = b.kernel(0, 1, 5_ns, "D");    // no deps, another stream: only its issue holds it
  const TaskId e = b.kernel(0, 1, 5_ns, "E");    // the host waits for B, already over by then
  b.program.issue_ps = {10_ns, 20_ns, 30_ns, 40_ns, 1000_ns};
  b.program.host_waits = {{c, a, 20_ns}, {e, bb, 900_ns}};
  const ExecResult r = execute(b.machine, b.program);
  CHECK(start_of(r, a) == 10_ns);
  CHECK(end_of(r, a) == 110_ns);
  CHECK(start_of(r, bb) == 110_ns);
  // The host resumes when A ends (110 ns, its own clock says 20 ns) and takes C's 10 ns to
  // issue it: 120 ns; D another 10 ns later, though nothing else holds it.
  CHECK(start_of(r, c) == 120_ns);
  CHECK(start_of(r, d) == 130_ns);
  // B ended at 120 ns, long before the host gets there (900 + 90 ns of shift = 990 ns): the
  // clock goes on from the first wait's shift, E at 1000 + 90 ns.
  CHECK(start_of(r, e) == 1090_ns);
  // Without the waits, the built issue times alone.
  b.program.host_waits.clear();
  const ExecResult free = execute(b.machine, b.program);
  CHECK(start_of(free, d) == 40_ns);
  CHECK(start_of(free, c) == 125_ns);  // D's 5 ns shared the GPU with A: A and B end 5 ns later
  CHECK(start_of(free, e) == 1000_ns);

  b.program.host_waits = {{a, c, 0}};  // waits for a task it has not issued yet
  CHECK(error_of(b).find("which it issues later") != std::string::npos);
  b.program.host_waits = {{d, a, 30_ns}, {c, a, 20_ns}};
  CHECK(error_of(b).find("out of program order") != std::string::npos);
}

TEST_CASE("executor: a host wait for another GPU's task, and a group behind a blocked host") {
  ProgramBuilder b;
  b.add_gpu("g0", {"compute", "tp"});
  b.add_gpu("g1", {"compute", "tp"});
  const auto l01 = b.add_link("g0->g1", 1'000'000'000, 0);
  const auto l10 = b.add_link("g1->g0", 1'000'000'000, 0);
  const TaskId a = b.kernel(1, 0, 200_ns, "A");  // on g1, 0-200 ns
  const TaskId x = b.kernel(0, 0, 10_ns, "X");   // g0's host waits for A before issuing X
  const TaskId c0 = b.comm(0, 1, 0, "C0", {{100, {l01}}}, {}, /*group=*/1);
  const TaskId c1 = b.comm(1, 1, 0, "C1", {{100, {l10}}}, {}, /*group=*/1);
  b.program.issue_ps = {0, 5_ns, 15_ns, 0};
  b.program.host_waits = {{x, a, 0}};
  const ExecResult r = execute(b.machine, b.program);
  CHECK(start_of(r, x) == 205_ns);
  // The collective's g0 member comes after the wait: issued at 200 + 15 ns, both start then.
  CHECK(start_of(r, c0) == 215_ns);
  CHECK(start_of(r, c1) == 215_ns);
}
