#pragma once
/// The `where:` filters of a sweep grid: a small expression language over scenario keys,
/// parsed once and evaluated per point. Grammar (docs/sweep.md):
///   expr   := and ('or' and)*          and := unary ('and' unary)*
///   unary  := 'not' unary | compare    compare := sum (('=='|'!='|'<'|'<='|'>'|'>=') sum)?
///   sum    := product (('+'|'-') product)*    product := atom (('*'|'/'|'%') atom)*
///   atom   := number | 'text' | "text" | true | false | KEY | '(' expr ')' | '-' atom
/// `&&`, `||`, `!` are accepted for and, or, not. A KEY is a scenario key (parallel.tp); its
/// value is the point's, after the model preset is filled in.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lynx::sweep {

/// One value inside a filter: a number, a text or a truth value.
struct FilterValue {
  enum class Kind : std::uint8_t { kNumber, kText, kBool };
  Kind kind = Kind::kNumber;
  double number = 0;
  std::string text;
  bool flag = false;

  /// The value a scenario field's text stands for: true/false, a number when the whole text
  /// is one, else the text.
  static FilterValue of_field_text(std::string_view text);
};

/// One parsed `where:` expression.
class Filter {
 public:
  /// Parses `text`; throws lynx::Error "ORIGIN: where 'TEXT': what is wrong" (ORIGIN is the
  /// expression's file:line:col). `is_key` says whether a dotted word is a scenario key.
  static Filter parse(const std::string& text, const std::string& origin,
                      const std::function<bool(const std::string&)>& is_key);

  /// Whether the expression holds, with `value_of(key)` giving each key's text. Throws
  /// lynx::Error at the expression's origin for a type mismatch (ordering text against a
  /// number, arithmetic on text) or a division by zero.
  bool holds(const std::function<std::string(const std::string&)>& value_of) const;

  const std::string& text() const { return text_; }
  const std::string& origin() const { return origin_; }
  /// The scenario keys the expression reads, each once, in order of appearance.
  const std::vector<std::string>& keys() const { return keys_; }

  struct Node;

 private:
  std::string text_;
  std::string origin_;
  std::vector<std::string> keys_;
  std::shared_ptr<const Node> root_;
};

}  // namespace lynx::sweep
