// The one-document YAML parse shared by scenarios, profiles and plans (scenarios/yaml_document):
// inputs on which yaml-cpp 0.7 itself would never stop are malformed YAML, refused at once.
#include "tests/error_of.hpp"
#include <doctest/doctest.h>

#include <string>

#include "common/text.hpp"
#include "scenarios/scenario_loader.hpp"
#include "scenarios/yaml_document.hpp"

using lynx::test::error_of;

TEST_CASE("yaml-cpp's endless loop on a ',' after an empty-key map is refused, with the position") {
  // Found by tests/fuzz (fuzz_scenario): before the event budget, YAML::LoadAll looped here
  // emitting null nodes until memory ran out (`lynxsim show` was killed).
  CHECK(error_of([] { lynx::load_single_document(" : e\n,", "f.yaml"); }) ==
        "f.yaml:2:1: malformed YAML: the YAML parser does not advance here");
  CHECK(error_of([] { lynx::load_single_document("a: 1\n : e\n,\n", "g.yaml"); })
            .rfind("g.yaml:", 0) == 0);
}

TEST_CASE("the event budget admits real documents of every shape") {
  // Dense inputs: many events per character (empty values, flow lists, documents).
  CHECK(lynx::load_single_document("a:\nb:\nc:\n", "f.yaml").size() == 3);
  CHECK(lynx::load_single_document("[[],[],{},[[]]]", "f.yaml").size() == 4);
  CHECK(lynx::load_single_document("{a,b,c,d}", "f.yaml").size() == 4);
  CHECK(lynx::load_single_document("---\n---\n---\n", "f.yaml").IsNull());
  CHECK(lynx::load_single_document("", "f.yaml").IsNull());
}

TEST_CASE("a key or value with a line break is quoted on one line (fuzz_plan finding)") {
  // A multi-line plain scalar as key: before one_line the message broke over lines.
  const std::string key_error = error_of(
      [] { lynx::read_scenario_text("hardware:\n  gpu:\n    \"max\\n  x\": 1\n", "f.yaml"); });
  CHECK(key_error == "f.yaml:3:5: unknown key 'hardware.gpu.max\\n  x'");
  const std::string value_error = error_of(
      [] { lynx::read_scenario_text("hardware:\n  profile: dgx-a100-80gb\nmodel:\n  layers: |\n    4\n    5\n", "f.yaml"); });
  CHECK(value_error.find('\n') == std::string::npos);
  CHECK(value_error.rfind("f.yaml:4:11: key 'model.layers': ", 0) == 0);
}

TEST_CASE("one_line escapes line breaks and control characters, keeps the rest") {
  CHECK(lynx::one_line("a\nb\rc\x01\x7f\td é") == "a\\nb\\rc\\x01\\x7f\td é");
  CHECK(lynx::one_line("") == "");
}
