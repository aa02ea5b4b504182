#include "scenarios/yaml_document.hpp"

#include "common/error.hpp"
#include "common/text.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <cstddef>
#include <sstream>
#include <vector>

namespace lynx {

namespace {

/// Counts the parser's events and stops it past a bound no real document reaches. yaml-cpp 0.7
/// can loop forever on some malformed input (" : e\n," emits null nodes without reading on,
/// until memory runs out); every real event reads at least one character, so a document has
/// fewer events than about twice its length.
class EventBudget : public YAML::EventHandler {
 public:
  explicit EventBudget(std::size_t max_events) : left_(max_events) {}
  void OnDocumentStart(const YAML::Mark& mark) override { spend(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { spend(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { spend(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override { spend(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override { spend(mark); }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override { spend(mark); }
  void OnMapEnd() override {}

 private:
  void spend(const YAML::Mark& mark) {
    if (left_-- == 0) throw YAML::ParserException(mark, "the YAML parser does not advance here");
  }
  std::size_t left_;
};

/// Runs the parser over `text` once without building nodes, so a parse that would not end
/// is refused before YAML::LoadAll starts it (a YAML::Exception, reported as malformed YAML).
void check_parse_ends(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  EventBudget budget(2 * text.size() + 16);
  while (parser.HandleNextDocument(budget)) {
  }
}

}  // namespace

YAML::Node load_single_document(const std::string& text, const std::string& label) {
  std::vector<YAML::Node> documents;
  try {
    check_parse_ends(text);
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message may quote the offending character, a line break too: one_line
    if (e.mark.is_null()) fail(ErrorCode::kMalformedYaml, "{}:1:1: malformed YAML: {}", label, one_line(e.msg));
    fail(ErrorCode::kMalformedYaml, "{}:{}:{}: malformed YAML: {}", label, e.mark.line + 1, e.mark.column + 1,  // 0-based
         one_line(e.msg));
  }
  for (std::size_t i = 1; i < documents.size(); ++i) {
    if (documents[i].IsNull()) continue;  // a trailing `---` with nothing after it
    const YAML::Mark mark = documents[i].Mark();
    fail(ErrorCode::kExtraDocument, "{}:{}:{}: a second YAML document (after '---') would be ignored: keep one document per "
         "file", label, mark.line + 1, mark.column + 1);
  }
  return documents.empty() ? YAML::Node() : documents.front();
}

std::string yaml_position(const std::string& label, const YAML::Mark& mark) {
  if (mark.is_null()) return label + ":1:1";
  return fmt::format("{}:{}:{}", label, mark.line + 1, mark.column + 1);  // yaml-cpp is 0-based
}

}  // namespace lynx
