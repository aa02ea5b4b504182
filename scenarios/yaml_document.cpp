#include "scenarios/yaml_document.hpp"

#include "common/error.hpp"

#include <vector>

namespace lynx {

YAML::Node load_single_document(const std::string& text, const std::string& label) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) fail("{}:1:1: malformed YAML: {}", label, e.msg);
    fail("{}:{}:{}: malformed YAML: {}", label, e.mark.line + 1, e.mark.column + 1, e.msg);  // 0-based
  }
  for (std::size_t i = 1; i < documents.size(); ++i) {
    if (documents[i].IsNull()) continue;  // a trailing `---` with nothing after it
    const YAML::Mark mark = documents[i].Mark();
    fail("{}:{}:{}: a second YAML document (after '---') would be ignored: keep one document per "
         "file", label, mark.line + 1, mark.column + 1);
  }
  return documents.empty() ? YAML::Node() : documents.front();
}

}  // namespace lynx
