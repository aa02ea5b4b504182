#include "megatron/launch_words.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <cctype>
#include <optional>

namespace lynx::megatron {
namespace {

/// Part of a word as written: literal text, or a variable to substitute.
struct Piece {
  bool is_var = false;
  std::string text;          ///< literal text, or the variable's name
  bool quoted = false;       ///< inside "..." or '...': no word splitting
  bool all_elements = false; ///< ${NAME[@]} / ${NAME[*]}
  bool opaque = false;       ///< $(...), $((...)), `...`, ${#...}: never resolved
  std::optional<std::string> fallback;  ///< ${NAME:-fallback}
};

/// A word as written (or a bash array assignment, NAME=( ... )).
struct RawWord {
  std::vector<Piece> pieces;
  int line = 1;
  int col = 1;
  std::string array_name;          ///< set for NAME=( elements )
  std::vector<RawWord> elements;
};
using RawCommand = std::vector<RawWord>;

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The NAME of a word that starts with an unquoted `NAME=`, else empty.
std::string assignment_name(const RawWord& word) {
  if (word.pieces.empty() || word.pieces[0].is_var || word.pieces[0].quoted) return {};
  const std::string& t = word.pieces[0].text;
  const std::size_t eq = t.find('=');
  if (eq == std::string::npos || eq == 0 || !is_name_start(t[0])) return {};
  for (std::size_t k = 1; k < eq; ++k)
    if (!is_name_char(t[k])) return {};
  return t.substr(0, eq);
}

/// Reads the text into commands of raw words.
class Lexer {
 public:
  Lexer(std::string_view text, const std::string& label) : text_(text), label_(label) {}

  std::vector<RawCommand> commands() {
    std::vector<RawWord> unused;
    lex(false, unused);
    end_command();
    return std::move(commands_);
  }

 private:
  std::string origin() const { return fmt::format("{}:{}:{}", label_, line_, col_); }
  bool eof() const { return pos_ >= text_.size(); }
  char peek(std::size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void start_word() {
    if (in_word_) return;
    in_word_ = true;
    word_ = RawWord{};
    word_.line = line_;
    word_.col = col_;
  }
  void add_literal(std::string_view s, bool quoted) {
    start_word();
    if (!word_.pieces.empty() && !word_.pieces.back().is_var && word_.pieces.back().quoted == quoted) {
      word_.pieces.back().text += s;
    } else {
      Piece p;
      p.text = std::string(s);
      p.quoted = quoted;
      word_.pieces.push_back(std::move(p));
    }
  }
  void end_word(std::vector<RawWord>& sink) {
    if (in_word_) sink.push_back(std::move(word_));
    in_word_ = false;
  }
  void end_command() {
    end_word(command_);
    if (!command_.empty()) commands_.push_back(std::move(command_));
    command_.clear();
  }

  /// Words until the end of the text, or (in_array) until the closing ')'.
  void lex(bool in_array, std::vector<RawWord>& elements) {
    std::vector<RawWord>& sink = in_array ? elements : command_;
    while (!eof()) {
      const char c = peek();
      if (c == '\\' && peek(1) == '\n') {  // continuation
        advance();
        advance();
      } else if (c == '\\' && peek(1) == '\r' && peek(2) == '\n') {
        advance();
        advance();
        advance();
      } else if (c == ' ' || c == '\t' || c == '\r') {
        end_word(sink);
        advance();
      } else if (in_array && c == ')') {
        end_word(sink);
        advance();
        return;
      } else if (c == '\n' || c == ';' || c == '&' || c == '|') {
        if (in_array) {
          end_word(sink);
        } else {
          end_command();
        }
        advance();
      } else if (c == '>' || c == '<') {
        skip_redirection(sink);
      } else if (c == '#' && !in_word_) {
        while (!eof() && peek() != '\n') advance();
      } else if (c == '(' && in_word_ && !in_array && word_.pieces.size() == 1 &&
                 !assignment_name(word_).empty() &&
                 word_.pieces[0].text.size() == assignment_name(word_).size() + 1) {
        RawWord array = std::move(word_);
        in_word_ = false;
        advance();
        lex(true, array.elements);
        array.array_name = assignment_name(array);
        command_.push_back(std::move(array));
      } else if (c == '\'') {
        lex_single_quoted();
      } else if (c == '"') {
        lex_double_quoted();
      } else if (c == '$') {
        start_word();
        lex_dollar(false);
      } else if (c == '`') {
        lex_backticks(false);
      } else if (c == '\\') {
        advance();
        if (!eof()) {
          add_literal(std::string(1, peek()), true);
          advance();
        }
      } else {
        add_literal(std::string(1, c), false);
        advance();
      }
    }
    if (in_array) fail(ErrorCode::kBadLaunchLine, "{}:{}:{}: bash array is not closed with ')'", label_, line_, col_);
  }

  /// `> file`, `2>&1`, `< in`: not arguments; the rest of the command is dropped.
  void skip_redirection(std::vector<RawWord>& sink) {
    if (in_word_ && word_.pieces.size() == 1 && !word_.pieces[0].quoted &&
        word_.pieces[0].text.find_first_not_of("0123456789") == std::string::npos)
      in_word_ = false;  // the file descriptor of 2>&1
    end_word(sink);
    while (!eof() && peek() != '\n' && peek() != ';' && peek() != '|' &&
           !(peek() == '&' && peek(1) != '1' && peek(1) != '2')) {
      if (peek() == '\\' && peek(1) == '\n') advance();
      advance();
    }
  }

  void lex_single_quoted() {
    const std::string where = origin();
    start_word();
    advance();
    std::string s;
    while (!eof() && peek() != '\'') {
      s += peek();
      advance();
    }
    if (eof()) fail(ErrorCode::kBadLaunchLine, "{}: unterminated single quote", where);
    advance();
    add_literal(s, true);
  }

  void lex_double_quoted() {
    const std::string where = origin();
    start_word();
    advance();
    add_literal("", true);  // "" is a word even when empty
    while (!eof() && peek() != '"') {
      const char c = peek();
      if (c == '\\' && (peek(1) == '$' || peek(1) == '`' || peek(1) == '"' || peek(1) == '\\')) {
        advance();
        add_literal(std::string(1, peek()), true);
        advance();
      } else if (c == '\\' && peek(1) == '\n') {
        advance();
        advance();
      } else if (c == '$') {
        lex_dollar(true);
      } else if (c == '`') {
        lex_backticks(true);
      } else {
        add_literal(std::string(1, c), true);
        advance();
      }
    }
    if (eof()) fail(ErrorCode::kBadLaunchLine, "{}: unterminated double quote", where);
    advance();
  }

  void add_opaque(std::string text, bool quoted) {
    Piece p;
    p.is_var = true;
    p.opaque = true;
    p.text = std::move(text);
    p.quoted = quoted;
    word_.pieces.push_back(std::move(p));
  }

  void lex_backticks(bool quoted) {
    start_word();
    advance();
    std::string s = "`";
    while (!eof() && peek() != '`') {
      s += peek();
      advance();
    }
    if (!eof()) advance();
    add_opaque(s + "`", quoted);
  }

  /// `$NAME`, `${...}`, `$(...)`, `$((...))`, `$1`; a lone `$` is literal.
  void lex_dollar(bool quoted) {
    advance();  // '$'
    const char c = peek();
    Piece p;
    p.is_var = true;
    p.quoted = quoted;
    if (c == '(') {
      std::string s = "$";
      int depth = 0;
      do {
        if (peek() == '(') ++depth;
        if (peek() == ')') --depth;
        s += peek();
        advance();
      } while (!eof() && depth > 0);
      add_opaque(s, quoted);
      return;
    }
    if (c == '{') {
      advance();
      std::string inner;
      while (!eof() && peek() != '}') {
        inner += peek();
        advance();
      }
      if (eof()) fail(ErrorCode::kBadLaunchLine, "{}:{}:{}: '${{' is not closed with '}}'", label_, line_, col_);
      advance();
      std::size_t n = 0;
      while (n < inner.size() && is_name_char(inner[n])) ++n;
      p.text = inner.substr(0, n);
      const std::string rest = inner.substr(n);
      if (p.text.empty() || !(is_name_start(p.text[0]) || std::isdigit(static_cast<unsigned char>(p.text[0])))) {
        add_opaque("${" + inner + "}", quoted);
        return;
      }
      if (rest == "[@]" || rest == "[*]") {
        p.all_elements = true;
      } else if (rest.rfind(":-", 0) == 0 || rest.rfind(":=", 0) == 0) {
        p.fallback = rest.substr(2);
      } else if (rest.rfind('-', 0) == 0 || rest.rfind('=', 0) == 0) {
        p.fallback = rest.substr(1);
      } else if (!rest.empty()) {
        add_opaque("${" + inner + "}", quoted);
        return;
      }
      word_.pieces.push_back(std::move(p));
      return;
    }
    if (is_name_start(c)) {
      while (!eof() && is_name_char(peek())) {
        p.text += peek();
        advance();
      }
      word_.pieces.push_back(std::move(p));
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '@' || c == '*' || c == '#' ||
        c == '?' || c == '!' || c == '$' || c == '-') {
      p.text = std::string(1, c);
      advance();
      word_.pieces.push_back(std::move(p));
      return;
    }
    add_literal("$", quoted);
  }

  std::string_view text_;
  std::string label_;
  std::size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
  bool in_word_ = false;
  RawWord word_;
  RawCommand command_;
  std::vector<RawCommand> commands_;
};

/// Splits on spaces, tabs and newlines (the shell's default IFS).
std::vector<std::string> fields_of(const std::string& value) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : value) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

/// Variables as set so far: a scalar is one word, an array its elements.
using Variables = std::map<std::string, std::vector<LaunchWord>>;

/// Expands raw words into words, substituting what `vars` holds.
class Expander {
 public:
  Expander(const std::string& label, Variables& vars) : label_(label), vars_(vars) {}

  std::vector<LaunchWord> expand(const RawWord& raw) {
    std::vector<LaunchWord> out;
    LaunchWord cur{"", origin_of(raw), ""};
    bool have = false;
    for (const Piece& piece : raw.pieces) {
      if (!piece.is_var) {
        cur.text += piece.text;
        have = true;
        continue;
      }
      const auto found = piece.opaque ? vars_.end() : vars_.find(piece.text);
      if (found == vars_.end() || (!piece.all_elements && is_unresolved(found->second))) {
        if (piece.fallback) {
          cur.text += *piece.fallback;
          have = true;
          continue;
        }
        if (cur.unresolved.empty()) cur.unresolved = piece.opaque ? piece.text : "$" + piece.text;
        have = true;
        continue;
      }
      const std::vector<LaunchWord>& value = found->second;
      if (piece.all_elements) {
        // "${A[@]}" and ${A[@]}: one word per element (split again when unquoted); each word
        // keeps where its element was written, and what it could not resolve.
        bool any = false;
        for (const LaunchWord& element : value) {
          std::vector<std::string> parts =
              piece.quoted ? std::vector<std::string>{element.text} : fields_of(element.text);
          if (parts.empty() && !element.unresolved.empty()) parts.emplace_back();
          for (const std::string& part : parts) {
            if (any) {
              out.push_back(std::move(cur));
              cur = LaunchWord{"", element.origin, ""};
            } else if (!have) {
              cur.origin = element.origin;
            }
            any = true;
            cur.text += part;
            if (cur.unresolved.empty()) cur.unresolved = element.unresolved;
            have = true;
          }
        }
        continue;
      }
      const std::string text = value.empty() ? std::string() : value.front().text;
      if (piece.quoted) {
        cur.text += text;
        have = true;
        continue;
      }
      const std::vector<std::string> parts = fields_of(text);
      for (std::size_t f = 0; f < parts.size(); ++f) {
        if (f > 0) {
          out.push_back(std::move(cur));
          cur = LaunchWord{"", origin_of(raw), ""};
        }
        cur.text += parts[f];
        have = true;
      }
    }
    if (have) out.push_back(std::move(cur));
    return out;
  }

  /// NAME=value (no word splitting) or NAME=( elements ).
  void assign(const RawWord& raw) {
    if (!raw.array_name.empty()) {
      std::vector<LaunchWord> elements;
      for (const RawWord& element : raw.elements)
        for (LaunchWord& w : expand(element)) elements.push_back(std::move(w));
      vars_[raw.array_name] = std::move(elements);
      return;
    }
    const std::string name = assignment_name(raw);
    RawWord value = raw;
    value.pieces[0].text.erase(0, name.size() + 1);
    for (Piece& p : value.pieces) p.quoted = true;  // assignments are not split
    std::vector<LaunchWord> words = expand(value);
    if (words.empty()) words.push_back(LaunchWord{"", origin_of(raw), ""});
    vars_[name] = {std::move(words.front())};
  }

 private:
  std::string origin_of(const RawWord& raw) const {
    return fmt::format("{}:{}:{}", label_, raw.line, raw.col);
  }
  /// A scalar whose value could not be resolved.
  static bool is_unresolved(const std::vector<LaunchWord>& value) {
    return value.size() == 1 && !value[0].unresolved.empty();
  }

  const std::string& label_;
  Variables& vars_;
};

bool is_declaration(const RawWord& word) {
  if (word.pieces.size() != 1 || word.pieces[0].is_var || word.pieces[0].quoted) return false;
  const std::string& t = word.pieces[0].text;
  return t == "export" || t == "declare" || t == "local" || t == "readonly" || t == "typeset";
}

bool is_assignment(const RawWord& word) {
  return !word.array_name.empty() || !assignment_name(word).empty();
}

}  // namespace

std::vector<LaunchWord> launch_words(std::string_view text, const std::string& label,
                                     const std::map<std::string, std::string>& env) {
  Variables vars;
  for (const auto& [name, value] : env)
    vars[name] = {LaunchWord{value, fmt::format("--megatron-env {}={}", name, value), ""}};
  Expander expander(label, vars);
  std::vector<LaunchWord> bare;
  for (const RawCommand& command : Lexer(text, label).commands()) {
    std::size_t i = 0;
    if (is_declaration(command[0])) {
      i = 1;
      while (i < command.size() && !command[i].pieces.empty() && !command[i].pieces[0].is_var &&
             command[i].pieces[0].text.rfind('-', 0) == 0)
        ++i;
    }
    for (; i < command.size() && is_assignment(command[i]); ++i) expander.assign(command[i]);
    if (i == command.size()) continue;
    std::vector<LaunchWord> words;
    for (; i < command.size(); ++i)
      for (LaunchWord& w : expander.expand(command[i])) words.push_back(std::move(w));
    for (std::size_t k = 0; k < words.size(); ++k) {
      const std::string& t = words[k].text;
      if (t.size() > 3 && t.compare(t.size() - 3, 3, ".py") == 0) {
        std::vector<LaunchWord> args(words.begin() + static_cast<std::ptrdiff_t>(k) + 1, words.end());
        if (args.empty()) fail(ErrorCode::kBadLaunchLine, "{}: no arguments after the training script {}", words[k].origin, t);
        return args;
      }
    }
    if (!words.empty() && words[0].text.rfind("--", 0) == 0)
      bare.insert(bare.end(), words.begin(), words.end());
  }
  if (bare.empty())
    fail(ErrorCode::kBadLaunchLine, 
        "{}: no Megatron-LM arguments found: expected a command running the training script "
        "(... pretrain_gpt.py --num-layers ...) or a list of arguments starting with --",
        label);
  return bare;
}

}  // namespace lynx::megatron
