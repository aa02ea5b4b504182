// The one-document YAML parse shared by scenarios, profiles and plans (scenarios/yaml_document):
// inputs on which yaml-cpp 0.7 itself would never stop are malformed YAML, refused at once.
#include "tests/error_of.hpp"
#include <doctest/doctest.h>

#include <string>

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
