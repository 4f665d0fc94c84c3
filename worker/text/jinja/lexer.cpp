#include "worker/text/jinja/lexer.h"

#include <array>
#include <utility>

#include "shared/error.h"
#include "worker/text/jinja/js_text.h"

namespace flashq::jinja {
namespace {

// Preprocessed text with, for every byte, the line of the source byte it came from.
struct Source {
  std::string text;
  std::vector<int> lines;

  void append(const Source& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    lines.insert(lines.end(), from.lines.begin() + static_cast<long>(begin),
                 from.lines.begin() + static_cast<long>(end));
  }
  void append_rest(const Source& from, size_t begin) { append(from, begin, from.text.size()); }
  int line_at(size_t pos) const { return lines.empty() ? 1 : lines[std::min(pos, lines.size() - 1)]; }
};

[[noreturn]] void syntax_error(int line, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "chat template line " + std::to_string(line) + ": " + message);
}

bool starts_line(const std::string& s, size_t pos) {
  if (pos == 0) return true;
  const char c = s[pos - 1];
  if (c == '\n' || c == '\r') return true;
  // U+2028 and U+2029 end lines too (JavaScript's multiline ^).
  return pos >= 3 && s.compare(pos - 3, 2, "\xe2\x80") == 0 && (s[pos - 1] == '\xa8' || s[pos - 1] == '\xa9');
}

// lstrip_blocks: spaces and tabs between a line start and {% {# {- are dropped.
Source strip_block_indent(const Source& in) {
  Source out;
  size_t copied = 0;
  for (size_t pos = 0; pos < in.text.size(); ++pos) {
    if (!starts_line(in.text, pos)) continue;
    size_t q = pos;
    while (q < in.text.size() && (in.text[q] == ' ' || in.text[q] == '\t')) ++q;
    if (q > pos && q + 1 < in.text.size() && in.text[q] == '{' &&
        (in.text[q + 1] == '#' || in.text[q + 1] == '%' || in.text[q + 1] == '-')) {
      out.append(in, copied, pos);
      copied = q;
    }
  }
  out.append_rest(in, copied);
  return out;
}

// trim_blocks: the newline right after %} #} -} is dropped.
Source trim_block_newline(const Source& in) {
  Source out;
  size_t copied = 0;
  const std::string& s = in.text;
  for (size_t i = 0; i + 2 < s.size(); ++i) {
    if ((s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.append(in, copied, i + 2);
      copied = i + 3;
      i += 2;
    }
  }
  out.append_rest(in, copied);
  return out;
}

// Length of a {% generation %} / {% endgeneration %} tag at `pos` (0 if none); sets its - marks.
size_t generation_tag(const std::string& s, size_t pos, bool& lstrip, bool& rstrip) {
  if (s.compare(pos, 2, "{%") != 0) return 0;
  size_t i = pos + 2;
  lstrip = i < s.size() && s[i] == '-';
  if (lstrip) ++i;
  while (size_t n = js_space_length(s, i)) i += n;
  if (s.compare(i, 3, "end") == 0 && s.compare(i + 3, 10, "generation") == 0) i += 3;
  if (s.compare(i, 10, "generation") != 0) return 0;
  i += 10;
  while (size_t n = js_space_length(s, i)) i += n;
  rstrip = i < s.size() && s[i] == '-';
  if (rstrip) ++i;
  if (s.compare(i, 2, "%}") != 0) return 0;
  return i + 2 - pos;
}

// transformers' {% generation %} markers are removed with their whitespace control applied.
Source remove_generation_tags(const Source& in) {
  Source out;
  const std::string& s = in.text;
  size_t copied = 0;
  for (size_t pos = 0; pos < s.size(); ++pos) {
    bool lstrip = false;
    bool rstrip = false;
    const size_t length = generation_tag(s, pos, lstrip, rstrip);
    if (length == 0) continue;
    size_t before = pos;
    while (before > copied) {
      const size_t n = js_space_length_before(s, before);
      if (n == 0 || before - n < copied) break;
      before -= n;
    }
    size_t after = pos + length;
    while (size_t n = js_space_length(s, after)) after += n;
    out.append(in, copied, lstrip ? before : pos);
    if (!rstrip) out.append(in, pos + length, after);
    copied = after;
    pos = after == 0 ? 0 : after - 1;
  }
  out.append_rest(in, copied);
  return out;
}

Source preprocess(std::string_view source) {
  Source src;
  src.text.assign(source);
  int line = 1;
  for (char c : source) {
    src.lines.push_back(line);
    if (c == '\n') ++line;
  }
  if (!src.text.empty() && src.text.back() == '\n') {
    src.text.pop_back();
    src.lines.pop_back();
  }
  return remove_generation_tags(trim_block_newline(strip_block_indent(src)));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

const std::array<std::pair<const char*, TokenType>, 29> kSymbols = {{
    {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
    {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
    {",", TokenType::kComma},           {".", TokenType::kDot},
    {":", TokenType::kColon},           {"|", TokenType::kPipe},
    {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
    {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
    {"<", TokenType::kComparison},      {">", TokenType::kComparison},
    {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
    {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
    {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
}};

class Lexer {
 public:
  explicit Lexer(Source src) : src_(std::move(src)), s_(src_.text) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) step();
    return std::move(tokens_);
  }

 private:
  int line() const { return src_.line_at(pos_); }
  bool at(const char* seq) const { return s_.compare(pos_, std::char_traits<char>::length(seq), seq) == 0; }
  void push(TokenType type, std::string value, int line) { tokens_.push_back(Token{type, std::move(value), line}); }
  bool last_is(std::initializer_list<TokenType> types) const {
    if (tokens_.empty()) return false;
    for (TokenType t : types) {
      if (tokens_.back().type == t) return true;
    }
    return false;
  }

  void strip_trailing_whitespace() {
    if (tokens_.empty() || tokens_.back().type != TokenType::kText) return;
    tokens_.back().value = std::string(js_trim_end(tokens_.back().value));
    if (tokens_.back().value.empty()) tokens_.pop_back();
  }
  void skip_leading_whitespace() {
    while (size_t n = js_space_length(s_, pos_)) pos_ += n;
  }
  // Whitespace inside a tag; running into the end of the source is an error, as in the reference.
  void skip_tag_whitespace() {
    while (size_t n = js_space_length(s_, pos_)) {
      pos_ += n;
      if (pos_ >= s_.size()) syntax_error(line(), "unexpected end of input");
    }
  }

  std::string digits() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }
  std::string number_tail(std::string num) {
    if (!num.empty() && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
      ++pos_;
      num += "." + digits();
    }
    return num;
  }

  void string_literal(char quote) {
    const int start_line = line();
    ++pos_;
    std::string value;
    char16_t pending_high = 0;  // a \u escape of a high surrogate waiting for its low half
    while (true) {
      if (pos_ >= s_.size()) syntax_error(start_line, "unterminated string literal");
      const char c = s_[pos_];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size()) syntax_error(start_line, "unexpected end of input");
      const char e = s_[pos_++];
      if (e == 'x' || e == 'u') {
        const size_t n = e == 'x' ? 2 : 4;
        const std::string hex = s_.substr(pos_, n);
        if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
          syntax_error(start_line, "invalid hexadecimal escape sequence \\" + std::string(1, e) + hex);
        }
        pos_ += n;
        const auto unit = static_cast<char16_t>(std::stoul(hex, nullptr, 16));
        if (unit >= 0xd800 && unit < 0xdc00) {
          pending_high = unit;
          continue;
        }
        if (unit >= 0xdc00 && unit < 0xe000 && pending_high != 0) {
          append_utf8(value, 0x10000 + ((pending_high - 0xd800) << 10) + (unit - 0xdc00));
        } else {
          append_utf8(value, unit >= 0xd800 && unit < 0xe000 ? 0xfffd : unit);
        }
        pending_high = 0;
        continue;
      }
      const char* escapes = "n\nt\tr\rb\bf\fv\v''\"\"\\\\";
      bool known = false;
      for (const char* p = escapes; *p != '\0'; p += 2) {
        if (*p == e) {
          value.push_back(p[1]);
          known = true;
          break;
        }
      }
      if (!known) syntax_error(start_line, std::string("unexpected escaped character: ") + e);
    }
    ++pos_;
    push(TokenType::kString, std::move(value), start_line);
  }

  // One token (or a run of text between tags) from pos_.
  void step() {
    if (text()) return;
    if (at("{#")) {
      comment();
      return;
    }
    if (tag_with_whitespace_control()) return;
    const char c = s_[pos_];
    if ((c == '-' || c == '+') && !last_is({TokenType::kIdentifier, TokenType::kNumber, TokenType::kString,
                                            TokenType::kCloseParen, TokenType::kCloseBracket})) {
      signed_number_or_unary(c);
      return;
    }
    if (symbol()) return;
    if (c == '\'' || c == '"') {
      string_literal(c);
      return;
    }
    if (is_digit(c)) {
      number();
      return;
    }
    if (is_word(c)) {
      identifier();
      return;
    }
    syntax_error(line(), "unexpected character '" + std::string(1, c) + "'");
  }

  // Outside a tag: the text up to the next {% {{ {#, if there is any.
  bool text() {
    if (!tokens_.empty() && !last_is({TokenType::kCloseStatement, TokenType::kCloseExpression, TokenType::kComment})) {
      return false;
    }
    const size_t start = pos_;
    const int start_line = line();
    while (pos_ < s_.size() && !(s_[pos_] == '{' && pos_ + 1 < s_.size() &&
                                 (s_[pos_ + 1] == '%' || s_[pos_ + 1] == '{' || s_[pos_ + 1] == '#'))) {
      ++pos_;
    }
    if (pos_ == start) return false;
    push(TokenType::kText, s_.substr(start, pos_ - start), start_line);
    return true;
  }

  // {%- {{- (stripping the whitespace before) and -%} -}} (stripping the whitespace after); the
  // whitespace inside a tag is skipped on the way.
  bool tag_with_whitespace_control() {
    if (at("{%-") || at("{{-")) {
      strip_trailing_whitespace();
      const bool statement = at("{%-");
      push(statement ? TokenType::kOpenStatement : TokenType::kOpenExpression, statement ? "{%" : "{{", line());
      if (!statement) brace_depth_ = 0;
      pos_ += 3;
      return true;
    }
    skip_tag_whitespace();
    if (at("-%}") || at("-}}")) {
      const bool statement = at("-%}");
      push(statement ? TokenType::kCloseStatement : TokenType::kCloseExpression, statement ? "%}" : "}}", line());
      pos_ += 3;
      skip_leading_whitespace();
      return true;
    }
    return false;
  }

  // A sign where no operand precedes it: a signed number, or a unary operator.
  void signed_number_or_unary(char sign) {
    if (tokens_.empty() || last_is({TokenType::kText})) {
      syntax_error(line(), std::string("unexpected character: ") + sign);
    }
    const int start_line = line();
    ++pos_;
    const std::string num = number_tail(digits());
    push(num.empty() ? TokenType::kUnary : TokenType::kNumber, std::string(1, sign) + num, start_line);
  }

  // A tag delimiter, operator or punctuation (kSymbols, in order); inside a {...} literal `}}` is
  // two closing braces, not the end of the expression.
  bool symbol() {
    for (const auto& [seq, type] : kSymbols) {
      if (type == TokenType::kCloseExpression && brace_depth_ > 0) continue;
      if (!at(seq)) continue;
      push(type, seq, line());
      if (type == TokenType::kOpenExpression) brace_depth_ = 0;
      if (type == TokenType::kOpenBrace) ++brace_depth_;
      if (type == TokenType::kCloseBrace) --brace_depth_;
      pos_ += std::char_traits<char>::length(seq);
      return true;
    }
    return false;
  }

  // Digits, with a fraction unless they follow a dot (an index: `a.0.1`).
  void number() {
    const int start_line = line();
    std::string num = digits();
    if (!last_is({TokenType::kDot})) num = number_tail(num);
    push(TokenType::kNumber, num, start_line);
  }

  void identifier() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_word(s_[pos_])) ++pos_;
    push(TokenType::kIdentifier, s_.substr(start, pos_ - start), src_.line_at(start));
  }

  void comment() {
    const int start_line = line();
    pos_ += 2;
    const bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
    if (strip_before) ++pos_;
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) syntax_error(start_line, "missing end of comment tag");
    std::string body = s_.substr(pos_, end - pos_);
    const bool strip_after = !body.empty() && body.back() == '-';
    if (strip_after) body.pop_back();
    if (strip_before) strip_trailing_whitespace();
    push(TokenType::kComment, std::move(body), start_line);
    pos_ = end + 2;
    if (strip_after) skip_leading_whitespace();
  }

  Source src_;
  const std::string& s_;
  size_t pos_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(preprocess(source)).run(); }

}  // namespace flashq::jinja
