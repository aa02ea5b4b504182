// maps/: the map file's checks (coded errors naming file:line:col and the key), a 2 x 2 map run
// (CSV columns, OOM and invalid cells, exact confirmation), the same bytes for any thread count,
// and the committed results/maps/maps.csv against results/maps/maps.yaml.
#include "maps/map_experiment.hpp"
#include "maps/map_file.hpp"
#include "tests/error_of.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace lynx;
using namespace lynx::maps;
using lynx::test::code_of;
using lynx::test::error_of;

namespace {

const std::string kSource = LYNXSIM_SOURCE_DIR;
/// A label in tests/maps/, so that bases resolve as they do for small_map.yaml.
const std::string kLabel = kSource + "/tests/maps/test.yaml";

/// One CSV line's fields (RFC 4180 quotes).
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

/// The CSV's header and rows (comment lines skipped), each row as column → cell.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string cell(std::size_t row, const std::string& column) const {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == column) return rows.at(row).at(i);
    FAIL("no column " << column);
    return {};
  }
};

Csv parse(const std::string& text) {
  Csv csv;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (csv.header.empty()) {
      csv.header = fields(line);
    } else {
      csv.rows.push_back(fields(line));
    }
  }
  return csv;
}

std::string map_text(const std::string& axes) {
  return "maps:\n  - name: m\n    base: ../../scenarios/paper/nvlink-gpt-1.3b.yaml\n" + axes;
}

std::string run_csv(const MapFile& file, int threads) {
  MapRequest request;
  request.threads = threads;
  std::ostringstream out;
  write_map_csv(out, file, run_maps(file, request));
  return out.str();
}

}  // namespace

TEST_CASE("map file: keys, axes and values are checked with file:line:col") {
  const std::string good_axes =
      "    x: {keys: hardware.gpu.memory, values: [40GiB, 80GiB]}\n    y: {keys: parallel.tp, values: [1, 2]}\n";
  const MapFile file = read_map_text(map_text(good_axes), kLabel);
  REQUIRE(file.maps.size() == 1);
  REQUIRE(file.variants.size() == 1);
  CHECK(file.variants[0].name == "megatron");
  CHECK(file.maps[0].x.values == std::vector<std::string>{"40GiB", "80GiB"});
  CHECK(file.maps[0].y.overrides[1] == std::vector<std::string>{"parallel.tp=2"});
  CHECK(file.maps[0].x.label == "hardware.gpu.memory");

  SUBCASE("an unknown key in a map") {
    const std::string text = map_text(good_axes + "    colour: red\n");
    CHECK(code_of([&] { read_map_text(text, kLabel); }) == ErrorCode::kUnknownKey);
    const std::string message = error_of([&] { read_map_text(text, kLabel); });
    CHECK(message.find("test.yaml:6:5: unknown key 'colour' in map") != std::string::npos);
  }
  SUBCASE("an unknown top-level key") {
    const std::string message = error_of([&] { read_map_text("mpas: []\n", kLabel); });
    CHECK(message.find("test.yaml:1:1: unknown key 'mpas'") != std::string::npos);
  }
  SUBCASE("an unknown scenario key on an axis, with the loader's suggestion") {
    const std::string text = map_text("    x: {keys: hardware.gpu.memroy, values: [40GiB]}\n" +
                                      good_axes.substr(good_axes.find("    y:")));
    CHECK(code_of([&] { read_map_text(text, kLabel); }) == ErrorCode::kUnknownKey);
    CHECK(error_of([&] { read_map_text(text, kLabel); }).find("test.yaml:4:") != std::string::npos);
  }
  SUBCASE("an unknown scenario key in set, and a value its field refuses") {
    const std::string unknown = map_text(good_axes + "    set: {parallel.tpp: 2}\n");
    const std::string message = error_of([&] { read_map_text(unknown, kLabel); });
    CHECK(message.find("test.yaml:6:11") != std::string::npos);
    CHECK(message.find("unknown key 'parallel.tpp' in set") != std::string::npos);
    const std::string bad = map_text(good_axes + "    set: {parallel.tp: two}\n");
    CHECK(code_of([&] { read_map_text(bad, kLabel); }) == ErrorCode::kWrongType);
    CHECK(error_of([&] { read_map_text(bad, kLabel); }).find("test.yaml:6:") != std::string::npos);
  }
  SUBCASE("a bad memory value on an axis") {
    const std::string text = map_text("    x: {keys: hardware.gpu.memory, values: [40GiB, lots]}\n" +
                                      good_axes.substr(good_axes.find("    y:")));
    const std::string message = error_of([&] { read_map_text(text, kLabel); });
    CHECK(message.find("test.yaml:4:") != std::string::npos);
    CHECK(message.find("'lots'") != std::string::npos);
  }
  SUBCASE("micro_batches takes positive integers and no other key") {
    const std::string zero = map_text("    x: {keys: micro_batches, values: [4, 0]}\n" +
                                      good_axes.substr(good_axes.find("    y:")));
    CHECK(code_of([&] { read_map_text(zero, kLabel); }) == ErrorCode::kOutOfRange);
    CHECK(error_of([&] { read_map_text(zero, kLabel); }).find("test.yaml:4:42") != std::string::npos);
    const std::string mixed = map_text("    x: {keys: [micro_batches, parallel.dp], values: [4]}\n" +
                                       good_axes.substr(good_axes.find("    y:")));
    CHECK(code_of([&] { read_map_text(mixed, kLabel); }) == ErrorCode::kIncompatibleSettings);
  }
  SUBCASE("missing axes, a key on both axes, duplicate names") {
    CHECK(code_of([&] { read_map_text(map_text("    x: {keys: parallel.tp, values: [1]}\n"), kLabel); }) ==
          ErrorCode::kMissingKey);
    const std::string both = map_text("    x: {keys: parallel.tp, values: [1]}\n    y: {keys: parallel.tp, values: [2]}\n");
    CHECK(code_of([&] { read_map_text(both, kLabel); }) == ErrorCode::kDuplicateKey);
    const std::string one = map_text(good_axes);
    const std::string twice = one + one.substr(std::string("maps:\n").size());
    CHECK(error_of([&] { read_map_text(twice, kLabel); }).find("map name 'm' is given twice") != std::string::npos);
  }
  SUBCASE("a base that does not exist") {
    const std::string text = "maps:\n  - name: m\n    base: nowhere.yaml\n" + good_axes;
    CHECK(error_of([&] { read_map_text(text, kLabel); }).find("test.yaml:3:11: key 'base'") != std::string::npos);
  }
  SUBCASE("variants: names, titles and their set") {
    const std::string text = "variants:\n  - {name: a, set: {parallel.sequence_parallel: true}}\n  - {name: b}\n" +
                             map_text(good_axes);
    const MapFile two = read_map_text(text, kLabel);
    REQUIRE(two.variants.size() == 2);
    CHECK(two.variants[0].overrides == std::vector<std::string>{"parallel.sequence_parallel=true"});
    CHECK(two.variants[1].title == "b");
  }
  SUBCASE("selecting maps by name") {
    CHECK(select_maps(file, {"m"}).maps.size() == 1);
    CHECK(error_of([&] { select_maps(file, {"n"}); }).find("--map-names: 'n' matches no map") != std::string::npos);
  }
}

TEST_CASE("a 2 x 2 map: columns, OOM and invalid cells, exact confirmation, any thread count") {
  const MapFile file = read_map_file(kSource + "/tests/maps/small_map.yaml");
  const std::string one = run_csv(file, 1);
  const Csv csv = parse(one);
  CHECK(csv.header == map_csv_columns());
  REQUIRE(csv.rows.size() == 4);
  for (const auto& row : csv.rows) CHECK(row.size() == csv.header.size());
  // Row order: y (tp) slowest, then x (memory).
  CHECK(csv.cell(0, "x") == "8GiB");
  CHECK(csv.cell(0, "y") == "2");
  CHECK(csv.cell(0, "status") == "oom");
  CHECK(csv.cell(0, "tokens_per_s_lynx_heu").empty());
  CHECK(csv.cell(0, "speedup_vs_megatron").empty());
  CHECK(csv.cell(1, "status") == "ok");
  CHECK_FALSE(csv.cell(1, "tokens_per_s_full").empty());
  CHECK(std::stod(csv.cell(1, "speedup_vs_megatron")) > 0.5);
  CHECK(csv.cell(1, "gpus") == "8");
  CHECK(csv.cell(1, "micro_batches") == "2");  // 32 / (8 × 2)
  // The one cell with speedups is each map's best and worst: confirmed in exact mode.
  CHECK(csv.cell(1, "confirmed_as") == "best-vs-megatron worst-vs-megatron best-vs-checkmate worst-vs-checkmate");
  CHECK_FALSE(csv.cell(1, "exact_speedup_vs_megatron").empty());
  for (std::size_t r : {2, 3}) {
    CHECK(csv.cell(r, "status") == "invalid");
    CHECK(csv.cell(r, "reason").find("tp * pp * dp") != std::string::npos);
    CHECK(csv.cell(r, "tokens_per_s_none").empty());
    CHECK(csv.cell(r, "gpus").empty());
  }
  CHECK(csv.cell(3, "x") == "80GiB");
  CHECK(one.find("simulated, not measured") != std::string::npos);
  // The same bytes on two threads: results are taken in cell order.
  CHECK(run_csv(file, 2) == one);
}

TEST_CASE("a map's variants: it is drawn only for the variants it names, and an unknown name is an error") {
  const std::string variants =
      "variants:\n  - {name: a}\n  - {name: b, set: {parallel.sequence_parallel: true}}\n";
  const std::string map = "maps:\n  - name: m\n    base: ../../scenarios/paper/nvlink-gpt-1.3b.yaml\n"
                          "    x: {keys: parallel.micro_batch, values: [1, 2]}\n    y: {keys: parallel.dp, values: [1]}\n";
  const MapFile all = read_map_text(variants + map, kLabel);
  const MapFile only_b = read_map_text(variants + map + "    variants: [b]\n", kLabel);
  REQUIRE(only_b.maps[0].variants == std::vector<std::string>{"b"});
  CHECK(only_b.maps[0].drawn_for(only_b.variants[1]));
  CHECK_FALSE(only_b.maps[0].drawn_for(only_b.variants[0]));
  MapRequest request;
  request.confirm = false;
  CHECK(run_maps(all, request).size() == 4);
  const std::vector<MapCell> cells = run_maps(only_b, request);
  REQUIRE(cells.size() == 2);
  for (const MapCell& cell : cells) CHECK(cell.variant == 1);
  const std::string unknown = variants + map + "    variants: [c]\n";
  CHECK(code_of([&] { read_map_text(unknown, kLabel); }) == ErrorCode::kUnknownKey);
  CHECK(error_of([&] { read_map_text(unknown, kLabel); }).find("no variant is named 'c' (there are: a, b)") != std::string::npos);
  CHECK(code_of([&] { read_map_text(variants + map + "    variants: b\n", kLabel); }) == ErrorCode::kWrongShape);
}

TEST_CASE("micro_batches sets the global batch from the cell's micro-batch and dp") {
  const MapFile file = read_map_text(
      "maps:\n  - name: m\n    base: ../../scenarios/paper/nvlink-gpt-1.3b.yaml\n"
      "    x: {keys: micro_batches, values: [2, 4]}\n    y: {keys: parallel.dp, values: [1, 2]}\n",
      kLabel);
  MapRequest request;
  request.confirm = false;
  const std::vector<MapCell> cells = run_maps(file, request);
  REQUIRE(cells.size() == 4);
  for (const MapCell& cell : cells) {
    REQUIRE(cell.invalid_reason.empty());
    const int m = cell.x == 0 ? 2 : 4, dp = cell.y == 0 ? 1 : 2;
    CHECK(cell.micro_batches == m);
    CHECK(cell.global_batch == m * 8 * dp);  // the base's micro-batch is 8
    CHECK_FALSE(cell.exact.has_value());
  }
}

TEST_CASE("the committed results/maps/maps.csv is current with results/maps/maps.yaml") {
  // `lynxsim figures --maps --update-committed` regenerates it; a map, axis value or column
  // changed without regenerating leaves the committed maps behind, and this fails.
  const MapFile file = read_map_file(kSource + "/results/maps/maps.yaml");
  std::ifstream in(kSource + "/results/maps/maps.csv");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const Csv csv = parse(text.str());
  const std::string hint = "results/maps/ is out of date: run `build/lynxsim figures --maps --update-committed`";
  CHECK_MESSAGE(csv.header == map_csv_columns(), hint);
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> expected, committed;
  for (const MapDefinition& map : file.maps)
    for (const MapVariant& variant : file.variants) {
      if (!map.drawn_for(variant)) continue;
      for (const std::string& y : map.y.values)
        for (const std::string& x : map.x.values) expected.emplace_back(map.name, variant.name, x, y);
    }
  for (std::size_t r = 0; r < csv.rows.size(); ++r)
    committed.emplace_back(csv.cell(r, "map"), csv.cell(r, "variant"), csv.cell(r, "x"), csv.cell(r, "y"));
  CHECK_MESSAGE(committed == expected, hint);
}
