// sweep/: grid expansion and ranges, filters, skipped points and their reasons, grid errors
// with file:line:col, the ordered pool, identical output for any thread count, and resume.
#include "sweep/filter.hpp"
#include "sweep/grid.hpp"
#include "sweep/ordered_pool.hpp"
#include "sweep/sweep.hpp"
#include "sweep/sweep_output.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

using namespace lynx;
using namespace lynx::sweep;
using lynx::test::error_of;
namespace fs = std::filesystem;

namespace {

/// A small model: every point simulates in milliseconds.
constexpr const char* kBase = R"(name: tiny
model:
  layers: 8
  hidden: 512
  heads: 8
  seq_len: 512
  vocab: 8192
parallel:
  tp: 2
  pp: 2
  dp: 1
  micro_batch: 1
  global_batch: 4
hardware:
  profile: dgx-a100-80gb
  nodes: 1
recompute:
  strategy: none
)";

/// A fresh folder holding tiny.yaml, removed at the end of the test.
struct Folder {
  fs::path path;
  Folder() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("lynxsim_test_sweep_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
    write("tiny.yaml", kBase);
  }
  ~Folder() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}


bool holds(const std::string& expr, const std::map<std::string, std::string>& values) {
  const Filter f = Filter::parse(expr, "g.yaml:3:8", [](const std::string& k) { return k.find('.') != std::string::npos; });
  return f.holds([&](const std::string& k) { return values.at(k); });
}

SweepSummary sweep_to(const std::string& grid, const std::string& out, int threads) {
  Ranks ranks;
  SweepRequest request;
  request.grid_path = grid;
  request.output_path = out;
  request.threads = threads;
  request.progress = false;
  std::ostringstream table;
  return run_sweep(request, ranks, table);
}

/// A grid over tp, pp and the strategy: 3 x 3 x 2 points, some layouts invalid.
constexpr const char* kGrid = R"(base: tiny.yaml
axes:
  parallel.tp: [1, 2, 4]
  parallel.pp: {from: 1, to: 3, step: 1}
  recompute.strategy: [none, selective]
)";

}  // namespace

TEST_CASE("points are the cartesian product in file order, the last axis fastest") {
  Folder dir;
  const Grid grid = read_grid_file(dir.write("g.yaml", kGrid));
  REQUIRE(grid.point_count() == 18);
  CHECK(grid.values(0) == std::vector<std::string>{"1", "1", "none"});
  CHECK(grid.values(1) == std::vector<std::string>{"1", "1", "selective"});
  CHECK(grid.values(2) == std::vector<std::string>{"1", "2", "none"});
  CHECK(grid.values(17) == std::vector<std::string>{"4", "3", "selective"});
  CHECK(grid.overrides(7) == std::vector<std::string>{"parallel.tp=2", "parallel.pp=1", "recompute.strategy=selective"});
  CHECK(grid.base_label == dir.file("tiny.yaml"));
}

TEST_CASE("ranges: arithmetic, real steps, geometric, values normalised by their field") {
  Folder dir;
  const Grid grid = read_grid_file(dir.write("g.yaml", R"(base: tiny.yaml
axes:
  parallel.micro_batch: {from: 4, to: 1, step: -1}
  hardware.gpu.contention: {from: 0, to: 0.3, step: 0.1}
  parallel.dp: {from: 1, to: 64, times: 2}
  hardware.node.nic.bw: [25GB/s, 100Gb/s]
)"));
  REQUIRE(grid.axes.size() == 4);
  CHECK(grid.axes[0].values == std::vector<std::string>{"4", "3", "2", "1"});
  CHECK(grid.axes[1].values.size() == 4);  // 0, 0.1, 0.2, 0.3: the end is reached despite rounding
  CHECK(grid.axes[1].overrides.back() == "hardware.gpu.contention=0.3");
  CHECK(grid.axes[2].values == std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64"});
  CHECK(grid.axes[3].values == std::vector<std::string>{"25GB/s", "12.5GB/s"});  // 100Gb/s, in bytes
  CHECK(grid.axes[3].overrides[1] == "hardware.node.nic.bw=100Gb/s");  // applied as written
  CHECK(grid.point_count() == 4 * 4 * 7 * 2);
}

TEST_CASE("a grid without axes is its base: one point") {
  Folder dir;
  CHECK(read_grid_file(dir.write("g.yaml", "base: tiny.yaml\n")).point_count() == 1);
}

TEST_CASE("grid errors name file:line:col and the key") {
  Folder dir;
  auto error = [&](const std::string& text) {
    return error_of([&] { read_grid_file(dir.write("g.yaml", text)); });
  };
  const std::string g = dir.file("g.yaml");
  CHECK(error("base: tiny.yaml\naxis:\n  parallel.tp: [1]\n") ==
        g + ":2:1: unknown key 'axis' in the sweep grid (expected base, axes, where)");
  CHECK(error("base: tiny.yaml\naxes:\n  parallel.micro_batches: [1, 2]\n") ==
        g + ":3:3: unknown key 'parallel.micro_batches' in axes; did you mean 'parallel.micro_batch'?");
  CHECK(error("base: tiny.yaml\naxes:\n  parallel.tp: {from: 1, upto: 4, step: 1}\n") ==
        g + ":3:26: axis 'parallel.tp': unknown key 'upto' in a range (expected from, to and step or times)");
  CHECK(error("base: tiny.yaml\naxes:\n  parallel.tp: [1, two]\n").rfind(g + ":3:20: axis 'parallel.tp': value 'two': ", 0) == 0);
  CHECK(error("base: tiny.yaml\naxes:\n  parallel.tp: []\n") == g + ":3:3: axis 'parallel.tp': no values");
  CHECK(error("base: tiny.yaml\naxes:\n  parallel.tp: [2, 2]\n") == g + ":3:20: axis 'parallel.tp': value '2' is given twice");
  CHECK(error("axes:\n  parallel.tp: [1]\n").find("key 'base': missing") != std::string::npos);
  CHECK(error("base: missing.yaml\n").rfind(g + ":1:7: key 'base': ", 0) == 0);
  CHECK(error("base: tiny.yaml\nwhere: parallel.tp > lynx\n").rfind(g + ":2:8: where 'parallel.tp > lynx': 'lynx' is not a scenario key", 0) == 0);
  CHECK(error("base: tiny.yaml\naxes:\n  oom: [1]\n").find("unknown key 'oom' in axes") != std::string::npos);
}

TEST_CASE("an inline base reports its errors at the grid file's lines and columns") {
  Folder dir;
  const std::string g = dir.file("g.yaml");
  const std::string message = error_of([&] {
    read_grid_file(dir.write("g.yaml", "axes:\n  parallel.tp: [1, 2]\nbase:\n  model:\n    preset: gpt-1.3b\n    layerz: 4\n"));
  });
  CHECK(message.rfind(g + ":6:5: unknown key 'model.layerz'", 0) == 0);
  // A valid inline base reads like the file it copies.
  const Grid grid = read_grid_file(dir.write("g.yaml", std::string("axes:\n  parallel.tp: [1, 2]\nbase:\n") + [] {
    std::string indented;
    std::istringstream in(kBase);
    for (std::string line; std::getline(in, line);) indented += "  " + line + "\n";
    return indented;
  }()));
  CHECK(grid.base_label == g);
  CHECK(evaluate_point(grid, RowWriter(grid, OutputFormat::kCsv), 1, true).kind == PointOutcome::Kind::kRow);
}

TEST_CASE("filters: arithmetic, comparisons, logic, text") {
  const std::map<std::string, std::string> v = {{"parallel.tp", "2"}, {"parallel.pp", "4"}, {"parallel.dp", "8"},
                                                {"recompute.strategy", "lynx-heu"}, {"parallel.sequence_parallel", "true"}};
  CHECK(holds("parallel.tp * parallel.pp * parallel.dp == 64", v));
  CHECK_FALSE(holds("parallel.tp * parallel.pp * parallel.dp != 64", v));
  CHECK(holds("parallel.tp <= parallel.pp and not parallel.dp < 8", v));
  CHECK(holds("parallel.tp > 4 || parallel.pp % 2 == 0 && parallel.dp / 4 == 2", v));
  CHECK(holds("-parallel.tp + 3 == 1", v));
  CHECK(holds("(parallel.tp + parallel.pp) * 2 == 12", v));
  CHECK(holds("recompute.strategy == 'lynx-heu' and recompute.strategy != \"full\"", v));
  CHECK(holds("parallel.sequence_parallel == true", v));
  CHECK_FALSE(holds("recompute.strategy == 3", v));  // a text is never equal to a number
  CHECK(error_of([&] { holds("recompute.strategy < 3", v); }) ==
        "g.yaml:3:8: where 'recompute.strategy < 3': cannot order 'lynx-heu' (text) against 3 (a number)");
  CHECK(error_of([&] { holds("parallel.tp", v); }).find("is not true or false") != std::string::npos);
  CHECK(error_of([&] { holds("parallel.tp / (parallel.pp - 4) == 1", v); }).find("division by zero") != std::string::npos);
  CHECK(error_of([&] { holds("parallel.tp == 'two", v); }).find("unterminated text") != std::string::npos);
  CHECK(error_of([&] { holds("parallel.tp == 2)", v); }).find("unexpected ')'") != std::string::npos);
  CHECK(error_of([&] { holds("parallel.tp = 2", v); }).find("unexpected '='") != std::string::npos);
  CHECK(error_of([&] { holds("parallel.tp == strategy", v); }).find("'strategy' is not a scenario key") != std::string::npos);
}

TEST_CASE("points: filtered, skipped with the loader's reason, or a row, never an exception") {
  Folder dir;
  const Grid grid = read_grid_file(dir.write("g.yaml", std::string(kGrid) + "where: parallel.pp != 2 or parallel.tp == 1\n"));
  const RowWriter writer(grid, OutputFormat::kCsv);
  // tp 1, pp 1: a row that starts with the point's number and values.
  const PointOutcome row = evaluate_point(grid, writer, 0, true);
  REQUIRE(row.kind == PointOutcome::Kind::kRow);
  CHECK(row.text.rfind("0,1,1,none,", 0) == 0);
  CHECK(row.text.back() == '\n');
  // tp 2, pp 2: filtered out.
  CHECK(evaluate_point(grid, writer, 8, true).kind == PointOutcome::Kind::kFiltered);
  // tp 1, pp 3: 8 layers are not divisible by 3 stages; the message names the override.
  const PointOutcome bad = evaluate_point(grid, writer, 4, true);
  REQUIRE(bad.kind == PointOutcome::Kind::kSkipped);
  CHECK(bad.text.find("--set parallel.pp=3: key 'parallel.pp': model.layers (8) is not divisible") != std::string::npos);
  CHECK(skip_reason(bad.text) ==
        "key 'parallel.pp': model.layers is not divisible by parallel.pp × parallel.virtual_stages");
  // Checking only (a resume's points before the last row): valid, not simulated.
  CHECK(evaluate_point(grid, writer, 0, false).kind == PointOutcome::Kind::kValid);
}

TEST_CASE("skip reasons group messages that differ only in numbers and advice") {
  CHECK(skip_reason("a.yaml: --set parallel.micro_batch=3: key 'parallel.global_batch': 4 is not divisible by "
                    "micro_batch * dp = 3 * 1 = 3") ==
        "key 'parallel.global_batch': N is not divisible by micro_batch * dp = N * N = N");
  CHECK(skip_reason("a.yaml: --set parallel.tp=16: key 'parallel': tp * pp * dp = 16 * 1 * 1 needs 16 GPUs, the "
                    "cluster has 8 (hardware.nodes 1 x hardware.gpus_per_node 8)") ==
        "key 'parallel': tp * pp * dp = N * N * N needs N GPUs, the cluster has N");
  CHECK(skip_reason("simulation failed: a.yaml: key 'x': 3 too many") == "simulation failed: key 'x': N too many");
  // Names that start with digits stay; numbers with units become N.
  CHECK(skip_reason("a.yaml: key 'parallel.schedule': 1F1B needs 4 micro-batches, got 80GiB") ==
        "key 'parallel.schedule': 1F1B needs N micro-batches, got NGiB");
}

TEST_CASE("skip reasons count per error code and reason, most points first") {
  SkipReasons reasons;
  int values_asked = 0;
  auto values = [&] { return fmt::format("point values {}", ++values_asked); };
  reasons.add(ErrorCode::kTooManyGpus, "a.yaml: --set parallel.tp=16: key 'parallel': needs 16 GPUs", 3, values);
  reasons.add(ErrorCode::kIndivisibleLayout, "a.yaml: key 'parallel.pp': 5 layers", 4, values);
  reasons.add(ErrorCode::kIndivisibleLayout, "a.yaml: key 'parallel.pp': 7 layers", 6, values);
  // The same text from another error is another reason.
  reasons.add(ErrorCode::kOutOfRange, "a.yaml: key 'parallel.pp': 9 layers", 8, values);
  const std::vector<SkipReason> sorted = reasons.sorted();
  REQUIRE(sorted.size() == 3);
  CHECK(values_asked == 3);  // once per reason
  CHECK(sorted[0].code == ErrorCode::kIndivisibleLayout);
  CHECK(sorted[0].count == 2);
  CHECK(sorted[0].first_point == 4);
  CHECK(sorted[0].first_values == "point values 2");
  CHECK(sorted[0].first_message == "a.yaml: key 'parallel.pp': 5 layers");
  CHECK(skip_reason_text(sorted[0]) == "E301 key 'parallel.pp': N layers");
  CHECK(skip_reason_text(sorted[1]) == "E302 key 'parallel': needs N GPUs");
  CHECK(skip_reason_text(sorted[2]) == "E204 key 'parallel.pp': N layers");
}

TEST_CASE("a sweep counts rows, filtered and skipped points, and reasons") {
  Folder dir;
  const std::string grid = dir.write("g.yaml", std::string(kGrid) + "where: parallel.tp != 4\n");
  const SweepSummary s = sweep_to(grid, dir.file("out.csv"), 2);
  CHECK(s.points == 18);
  CHECK(s.filtered == 6);  // tp 4
  CHECK(s.skipped == 4);   // pp 3 with tp 1 and 2, two strategies each
  CHECK(s.rows == 8);
  REQUIRE(s.reasons.size() == 1);
  CHECK(s.reasons[0].count == 4);
  CHECK(s.reasons[0].first_point == 4);
  CHECK(s.reasons[0].first_values == "parallel.tp=1 parallel.pp=3 recompute.strategy=none");
  CHECK(s.reasons[0].code == ErrorCode::kIndivisibleLayout);  // the caught error's code
  const std::string text = summary_text(s);
  CHECK(text.find("18 points: 8 rows (0 out of memory), 6 filtered out by where, 4 skipped") != std::string::npos);
  CHECK(text.find("4 x E301 key 'parallel.pp': model.layers is not divisible") != std::string::npos);
  // The CSV: header comment, column line, one row per valid point; no wall-time columns.
  const std::string csv = read_file(dir.file("out.csv"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 2 + 8);
  CHECK(csv.find("simulate_seconds") == std::string::npos);
  CHECK(csv.find("\npoint,parallel.tp,parallel.pp,recompute.strategy,lynxsim_version,") != std::string::npos);
}

TEST_CASE("an out-of-memory point is a row with oom true") {
  Folder dir;
  const std::string grid = dir.write("g.yaml", "base: tiny.yaml\naxes:\n  hardware.gpu.memory: [80GiB, 4200MiB]\n");
  const SweepSummary s = sweep_to(grid, dir.file("out.jsonl"), 1);
  CHECK(s.rows == 2);
  CHECK(s.oom_rows == 1);
  const std::string rows = read_file(dir.file("out.jsonl"));
  CHECK(rows.find(R"({"point":1,"hardware.gpu.memory":")") != std::string::npos);
  CHECK(rows.find(R"("oom":true)") != std::string::npos);
}

TEST_CASE("the output bytes are the same for 1, 2 and 3 threads") {
  Folder dir;
  const std::string grid = dir.write("g.yaml", kGrid);
  for (const char* extension : {".csv", ".jsonl"}) {
    std::vector<std::string> outputs;
    for (int threads : {1, 2, 3}) {
      const std::string out = dir.file("out" + std::to_string(threads) + extension);
      sweep_to(grid, out, threads);
      outputs.push_back(read_file(out));
    }
    CHECK(outputs[0].size() > 1000);
    CHECK(outputs[0] == outputs[1]);
    CHECK(outputs[0] == outputs[2]);
  }
}

TEST_CASE("resume: a file cut mid-row is completed to exactly the bytes of an uninterrupted run") {
  Folder dir;
  const std::string grid = dir.write("g.yaml", kGrid);
  for (const char* extension : {".csv", ".jsonl"}) {
    const std::string full = dir.file(std::string("full") + extension);
    sweep_to(grid, full, 2);
    const std::string expected = read_file(full);
    // Cut in the middle of the fourth row, and inside the header.
    std::size_t cut = 0;
    for (int line = 0; line < 5; ++line) cut = expected.find('\n', cut) + 1;
    for (const std::size_t at : {cut + 17, std::size_t{20}}) {
      CAPTURE(at);
      const std::string part = dir.file(std::string("part") + extension);
      std::ofstream(part, std::ios::binary) << expected.substr(0, at);
      const SweepSummary s = sweep_to(grid, part, 3);
      CHECK(read_file(part) == expected);
      CHECK(s.rows == 12);
      const std::string kept = expected.substr(0, at);
      const auto header_lines = std::string(extension) == ".csv" ? 2 : 1;
      const auto complete_rows = std::max<long>(0, std::count(kept.begin(), kept.end(), '\n') - header_lines);
      CHECK(s.rows_resumed == static_cast<std::uint64_t>(complete_rows));
      CHECK(s.skipped == 6);  // counted again, from the points before the last row too
    }
    // Complete: nothing to do, nothing changes.
    CHECK(sweep_to(grid, full, 1).rows_resumed == 12);
    CHECK(read_file(full) == expected);
  }
}

TEST_CASE("resume refuses a file of another grid, and rows out of order") {
  Folder dir;
  const std::string grid = dir.write("g.yaml", kGrid);
  const std::string out = dir.file("out.csv");
  sweep_to(grid, out, 1);
  const std::string written = read_file(out);
  const std::string other = dir.write("other.yaml", std::string(kGrid) + "where: parallel.tp != 4\n");
  CHECK(error_of([&] { sweep_to(other, out, 1); }).find("the file holds another sweep") != std::string::npos);
  // The base scenario is part of the grid's identity.
  dir.write("tiny.yaml", std::string(kBase) + "# edited\n");
  CHECK(error_of([&] { sweep_to(grid, out, 1); }).find("the file holds another sweep") != std::string::npos);
  dir.write("tiny.yaml", kBase);
  // Swap two rows.
  std::vector<std::string> lines;
  std::istringstream in(written);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::swap(lines[2], lines[3]);
  std::ofstream(out, std::ios::binary) << [&] {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
  }();
  CHECK(error_of([&] { sweep_to(grid, out, 1); }) == out + ":4: not a row of this sweep in point order; remove the file or choose another -o");
  CHECK(error_of([&] { sweep_to(grid, dir.file("out.txt"), 1); }).find("expected a .csv or .jsonl file") != std::string::npos);
}

TEST_CASE("the ordered pool returns results in item order and rethrows a work's exception") {
  std::vector<std::uint64_t> items;
  for (std::uint64_t i = 0; i < 200; ++i) items.push_back(i * 3);
  OrderedPool<std::uint64_t> pool(items, 4, [](std::uint64_t i) { return i * i; }, 5);
  for (std::uint64_t expected : items) {
    REQUIRE(pool.has_next());
    const auto [item, result] = pool.next();
    CHECK(item == expected);
    CHECK(result == expected * expected);
  }
  CHECK_FALSE(pool.has_next());
  OrderedPool<int> failing({1, 2, 3}, 2, [](std::uint64_t i) -> int {
    if (i == 2) throw std::runtime_error("two");
    return 0;
  });
  CHECK(failing.next().first == 1);
  CHECK_THROWS_WITH(failing.next(), "two");
}

TEST_CASE("wall-clock result fields are exactly the *_seconds ones, and sweep rows leave them out") {
  for (const runner::ResultField& f : runner::result_fields()) {
    const std::string name = f.name;
    const bool seconds = name.size() > 8 && name.compare(name.size() - 8, 8, "_seconds") == 0;
    CAPTURE(name);
    CHECK(f.wall_clock == seconds);
  }
  Folder dir;
  const Grid grid = read_grid_file(dir.write("g.yaml", "base: tiny.yaml\n"));
  const std::string header = RowWriter(grid, OutputFormat::kCsv).header();
  CHECK(header.find("iteration_time_s") != std::string::npos);
  CHECK(header.find("_seconds") == std::string::npos);
}

TEST_CASE("every example grid in scenarios/examples/sweeps reads and has valid points") {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(std::string(LYNXSIM_SOURCE_DIR) + "/scenarios/examples/sweeps")) {
    if (entry.path().extension() != ".yaml") continue;
    CAPTURE(entry.path().string());
    const Grid grid = read_grid_file(entry.path().string());
    CHECK(grid.point_count() > 1);
    const RowWriter writer(grid, OutputFormat::kCsv);
    bool some_valid = false;
    for (std::uint64_t i = 0; i < grid.point_count() && !some_valid; ++i)
      some_valid = evaluate_point(grid, writer, i, false).kind == PointOutcome::Kind::kValid;
    CHECK(some_valid);
    ++count;
  }
  CHECK(count >= 1);
}
