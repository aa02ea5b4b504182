#include "sweep/filter.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace lynx::sweep {

FilterValue FilterValue::of_field_text(std::string_view text) {
  FilterValue v;
  if (text == "true" || text == "false") {
    v.kind = Kind::kBool;
    v.flag = text == "true";
    return v;
  }
  double number = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, number);
  if (!text.empty() && ec == std::errc() && ptr == end) {
    v.number = number;
    return v;
  }
  v.kind = Kind::kText;
  v.text = std::string(text);
  return v;
}

enum class Op : std::uint8_t {
  kLiteral, kKey, kOr, kAnd, kNot, kNeg,
  kEq, kNe, kLt, kLe, kGt, kGe, kAdd, kSub, kMul, kDiv, kMod,
};

struct Filter::Node {
  Op op = Op::kLiteral;
  FilterValue literal;
  std::string key;
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using NodePtr = std::shared_ptr<const Filter::Node>;

struct Token {
  enum class Kind : std::uint8_t { kEnd, kNumber, kText, kWord, kSymbol };
  Kind kind = Kind::kEnd;
  std::string text;
  std::size_t column = 0;  ///< 0-based offset in the expression
};

/// Splits an expression into tokens (words may hold dots and underscores: keys) and parses them
/// by recursive descent.
class Parser {
 public:
  Parser(const std::string& text, const std::string& origin,
         const std::function<bool(const std::string&)>& is_key, std::vector<std::string>& keys)
      : text_(text), origin_(origin), is_key_(is_key), keys_(keys) {
    tokenize();
  }

  NodePtr parse() {
    NodePtr root = parse_or();
    if (peek().kind != Token::Kind::kEnd) error(peek(), "unexpected '{}'", peek().text);
    return root;
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(const Token& at, fmt::format_string<Args...> format, Args&&... args) {
    fail(ErrorCode::kBadExpression, "{}: where '{}': {} (at character {})", origin_, text_,
         fmt::format(format, std::forward<Args>(args)...), at.column + 1);
  }

  void tokenize() {
    std::size_t i = 0;
    while (i < text_.size()) {
      const char c = text_[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      Token t;
      t.column = i;
      if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i + 1 < text_.size() &&
                                                          std::isdigit(static_cast<unsigned char>(text_[i + 1])))) {
        std::size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '.' ||
                                    ((text_[j] == '+' || text_[j] == '-') && (text_[j - 1] == 'e' || text_[j - 1] == 'E'))))
          ++j;
        t.kind = Token::Kind::kNumber;
        t.text = text_.substr(i, j - i);
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t j = i;
        while (j < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[j])) || text_[j] == '_' ||
                                    text_[j] == '.'))
          ++j;
        t.kind = Token::Kind::kWord;
        t.text = text_.substr(i, j - i);
        i = j;
      } else if (c == '\'' || c == '"') {
        const std::size_t close = text_.find(c, i + 1);
        if (close == std::string::npos) {
          t.text = std::string(1, c);
          error(t, "unterminated text");
        }
        t.kind = Token::Kind::kText;
        t.text = text_.substr(i + 1, close - i - 1);
        i = close + 1;
      } else {
        static constexpr std::string_view kTwo[] = {"==", "!=", "<=", ">=", "&&", "||"};
        t.kind = Token::Kind::kSymbol;
        const std::string_view rest(text_.data() + i, text_.size() - i);
        const auto two = std::find_if(std::begin(kTwo), std::end(kTwo),
                                      [&](std::string_view s) { return rest.substr(0, 2) == s; });
        t.text = two != std::end(kTwo) ? std::string(*two) : std::string(1, c);
        if (t.text.size() == 1 && std::string_view("<>+-*/%()!").find(c) == std::string_view::npos)
          error(t, "unexpected '{}'", t.text);
        i += t.text.size();
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.column = text_.size();
    end.text = "end of expression";
    tokens_.push_back(end);
  }

  const Token& peek() const { return tokens_[pos_]; }
  bool accept_symbol(std::initializer_list<std::string_view> symbols, std::string* which = nullptr) {
    const Token& t = peek();
    const bool is_word_op = t.kind == Token::Kind::kWord;
    if (t.kind != Token::Kind::kSymbol && !is_word_op) return false;
    for (std::string_view s : symbols) {
      if (t.text == s && is_word_op == (std::isalpha(static_cast<unsigned char>(s[0])) != 0)) {
        if (which != nullptr) *which = t.text;
        ++pos_;
        return true;
      }
    }
    return false;
  }

  static NodePtr node(Op op, std::vector<NodePtr> args) {
    auto n = std::make_shared<Filter::Node>();
    n->op = op;
    n->args = std::move(args);
    return n;
  }

  NodePtr parse_or() {
    NodePtr left = parse_and();
    while (accept_symbol({"or", "||"})) left = node(Op::kOr, {left, parse_and()});
    return left;
  }
  NodePtr parse_and() {
    NodePtr left = parse_unary();
    while (accept_symbol({"and", "&&"})) left = node(Op::kAnd, {left, parse_unary()});
    return left;
  }
  NodePtr parse_unary() {
    if (accept_symbol({"not", "!"})) return node(Op::kNot, {parse_unary()});
    return parse_compare();
  }
  NodePtr parse_compare() {
    NodePtr left = parse_sum();
    std::string which;
    if (accept_symbol({"==", "!=", "<=", ">=", "<", ">"}, &which)) {
      const Op op = which == "==" ? Op::kEq : which == "!=" ? Op::kNe : which == "<=" ? Op::kLe
                    : which == ">=" ? Op::kGe : which == "<" ? Op::kLt : Op::kGt;
      return node(op, {left, parse_sum()});
    }
    return left;
  }
  NodePtr parse_sum() {
    NodePtr left = parse_product();
    std::string which;
    while (accept_symbol({"+", "-"}, &which))
      left = node(which == "+" ? Op::kAdd : Op::kSub, {left, parse_product()});
    return left;
  }
  NodePtr parse_product() {
    NodePtr left = parse_atom();
    std::string which;
    while (accept_symbol({"*", "/", "%"}, &which))
      left = node(which == "*" ? Op::kMul : which == "/" ? Op::kDiv : Op::kMod, {left, parse_atom()});
    return left;
  }
  NodePtr parse_atom() {
    const Token t = peek();
    if (accept_symbol({"("})) {
      NodePtr inner = parse_or();
      if (!accept_symbol({")"})) error(peek(), "expected ')', got '{}'", peek().text);
      return inner;
    }
    if (accept_symbol({"-"})) return node(Op::kNeg, {parse_atom()});
    auto n = std::make_shared<Filter::Node>();
    switch (t.kind) {
      case Token::Kind::kNumber:
        n->literal = FilterValue::of_field_text(t.text);
        if (n->literal.kind != FilterValue::Kind::kNumber) error(t, "'{}' is not a number", t.text);
        break;
      case Token::Kind::kText:
        n->literal.kind = FilterValue::Kind::kText;
        n->literal.text = t.text;
        break;
      case Token::Kind::kWord:
        if (t.text == "true" || t.text == "false") {
          n->literal = FilterValue::of_field_text(t.text);
        } else if (is_key_(t.text)) {
          n->op = Op::kKey;
          n->key = t.text;
          if (std::find(keys_.begin(), keys_.end(), t.text) == keys_.end()) keys_.push_back(t.text);
        } else {
          error(t, "'{}' is not a scenario key (quote text: '{}')", t.text, t.text);
        }
        break;
      default:
        error(t, "expected a value, got '{}'", t.text);
    }
    ++pos_;
    return n;
  }

  const std::string& text_;
  const std::string& origin_;
  const std::function<bool(const std::string&)>& is_key_;
  std::vector<std::string>& keys_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
};

std::string describe(const FilterValue& v) {
  switch (v.kind) {
    case FilterValue::Kind::kNumber: return fmt::format("{} (a number)", v.number);
    case FilterValue::Kind::kBool: return fmt::format("{} (true/false)", v.flag);
    case FilterValue::Kind::kText: return fmt::format("'{}' (text)", v.text);
  }
  return {};
}

struct Evaluator {
  const Filter& filter;
  const std::function<std::string(const std::string&)>& value_of;

  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail(ErrorCode::kBadExpression, "{}: where '{}': {}", filter.origin(), filter.text(), fmt::format(format, std::forward<Args>(args)...));
  }

  bool truth(const Filter::Node& n) const {
    const FilterValue v = eval(n);
    if (v.kind != FilterValue::Kind::kBool) error("{} is not true or false", describe(v));
    return v.flag;
  }
  double number(const Filter::Node& n) const {
    const FilterValue v = eval(n);
    if (v.kind != FilterValue::Kind::kNumber) error("arithmetic needs numbers, got {}", describe(v));
    return v.number;
  }
  static FilterValue boolean(bool b) {
    FilterValue v;
    v.kind = FilterValue::Kind::kBool;
    v.flag = b;
    return v;
  }
  static FilterValue num(double x) {
    FilterValue v;
    v.number = x;
    return v;
  }

  FilterValue eval(const Filter::Node& n) const {
    const auto& a = n.args;
    switch (n.op) {
      case Op::kLiteral: return n.literal;
      case Op::kKey: return FilterValue::of_field_text(value_of(n.key));
      case Op::kOr: return boolean(truth(*a[0]) || truth(*a[1]));
      case Op::kAnd: return boolean(truth(*a[0]) && truth(*a[1]));
      case Op::kNot: return boolean(!truth(*a[0]));
      case Op::kNeg: return num(-number(*a[0]));
      case Op::kAdd: return num(number(*a[0]) + number(*a[1]));
      case Op::kSub: return num(number(*a[0]) - number(*a[1]));
      case Op::kMul: return num(number(*a[0]) * number(*a[1]));
      case Op::kDiv:
      case Op::kMod: {
        const double x = number(*a[0]);
        const double y = number(*a[1]);
        if (y == 0) error("division by zero");
        return num(n.op == Op::kDiv ? x / y : std::fmod(x, y));
      }
      default: break;
    }
    const FilterValue x = eval(*a[0]);
    const FilterValue y = eval(*a[1]);
    if (x.kind != y.kind) {
      if (n.op == Op::kEq) return boolean(false);
      if (n.op == Op::kNe) return boolean(true);
      error("cannot order {} against {}", describe(x), describe(y));
    }
    int order = 0;  // x <=> y
    if (x.kind == FilterValue::Kind::kNumber) order = x.number < y.number ? -1 : x.number > y.number ? 1 : 0;
    else if (x.kind == FilterValue::Kind::kText) order = x.text.compare(y.text) < 0 ? -1 : x.text == y.text ? 0 : 1;
    else if (n.op == Op::kEq || n.op == Op::kNe) order = x.flag == y.flag ? 0 : 1;
    else error("cannot order true/false values");
    switch (n.op) {
      case Op::kEq: return boolean(order == 0);
      case Op::kNe: return boolean(order != 0);
      case Op::kLt: return boolean(order < 0);
      case Op::kLe: return boolean(order <= 0);
      case Op::kGt: return boolean(order > 0);
      default: return boolean(order >= 0);
    }
  }
};

}  // namespace

Filter Filter::parse(const std::string& text, const std::string& origin,
                     const std::function<bool(const std::string&)>& is_key) {
  Filter f;
  f.text_ = text;
  f.origin_ = origin;
  if (text.find_first_not_of(" \t") == std::string::npos) fail(ErrorCode::kBadExpression, "{}: where: empty expression", origin);
  Parser parser(f.text_, f.origin_, is_key, f.keys_);
  f.root_ = parser.parse();
  return f;
}

bool Filter::holds(const std::function<std::string(const std::string&)>& value_of) const {
  return Evaluator{*this, value_of}.truth(*root_);
}

}  // namespace lynx::sweep
