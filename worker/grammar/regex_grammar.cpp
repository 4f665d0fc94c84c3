#include "worker/grammar/regex_grammar.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "shared/error.h"
#include "worker/grammar/gbnf_text.h"
#include "worker/grammar/json_text.h"
#include "worker/text/utf8.h"

namespace flashq::grammar {
namespace {

constexpr int kMaxRegexNesting = 64;
constexpr int kMaxRegexRepetition = 1000;

using Ranges = std::vector<CodePointRange>;

const Ranges kDigit{{'0', '9'}};
const Ranges kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace{{'\t', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  RegexParser(std::string_view pattern, bool json) : pattern_(pattern), json_(json) {}

  RegexGbnf parse() {
    if (!is_valid_utf8(pattern_)) fail("pattern is not valid UTF-8");
    RegexGbnf out;
    if (peek() == '^') {
      out.anchored_start = true;
      ++pos_;
    }
    out.expression = parse_alternation(0);
    if (pos_ < pattern_.size()) fail("unbalanced ')'");
    out.anchored_end = anchored_end_;
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kInvalidArgument, "regex /" + std::string(pattern_) + "/ at offset " +
                                                 std::to_string(pos_) + ": " + what);
  }
  char peek() const { return pos_ < pattern_.size() ? pattern_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= pattern_.size(); }

  std::string parse_alternation(int depth);
  std::string parse_sequence(int depth);
  std::string parse_atom(int depth);
  std::string parse_quantifier(const std::string& atom);
  int parse_number();
  char32_t parse_escape_code_point(char c);
  bool parse_class_escape(Ranges& ranges);
  std::string parse_class();
  std::string emit_ranges(const Ranges& ranges) const;
  std::string emit_code_point(char32_t cp) const;

  std::string_view pattern_;
  bool json_;
  size_t pos_ = 0;
  bool anchored_end_ = false;
};

std::string RegexParser::parse_alternation(int depth) {
  if (depth > kMaxRegexNesting) fail("groups nested deeper than " + std::to_string(kMaxRegexNesting));
  std::vector<std::string> alternatives{parse_sequence(depth)};
  while (peek() == '|') {
    ++pos_;
    alternatives.push_back(parse_sequence(depth));
  }
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

std::string RegexParser::parse_sequence(int depth) {
  std::string out;
  while (!at_end() && peek() != '|' && peek() != ')') {
    if (anchored_end_) fail("'$' is supported only at the end of the pattern");
    if (peek() == '$') {
      ++pos_;
      anchored_end_ = true;
      continue;
    }
    std::string atom = parse_atom(depth);
    out += (out.empty() ? "" : " ") + parse_quantifier(atom);
  }
  return out.empty() ? "\"\"" : out;
}

std::string RegexParser::parse_atom(int depth) {
  char c = peek();
  switch (c) {
    case '(': {
      ++pos_;
      if (peek() == '?') {
        if (pattern_.substr(pos_, 2) != "?:") fail("lookaround and named groups are not supported");
        pos_ += 2;
      }
      std::string inner = parse_alternation(depth + 1);
      if (peek() != ')') fail("missing ')'");
      ++pos_;
      return "(" + inner + ")";
    }
    case '[': return parse_class();
    case '.': ++pos_; return emit_ranges({{0, '\n' - 1}, {'\n' + 1, 0x10FFFF}});
    case '*': case '+': case '?': case '{': fail(std::string("nothing to repeat before '") + c + "'");
    case '^': fail("'^' is supported only at the start of the pattern");
    case '\\': {
      Ranges ranges;
      if (parse_class_escape(ranges)) return emit_ranges(ranges);
      return emit_code_point(ranges[0].first);
    }
    default: return emit_code_point(next_code_point(pattern_, pos_));
  }
}

int RegexParser::parse_number() {
  size_t start = pos_;
  int value = 0;
  while (peek() >= '0' && peek() <= '9') {
    value = value * 10 + (pattern_[pos_++] - '0');
    if (value > kMaxRegexRepetition) fail("repetition count above " + std::to_string(kMaxRegexRepetition));
  }
  if (pos_ == start) fail("expected a number in '{}'");
  return value;
}

std::string RegexParser::parse_quantifier(const std::string& atom) {
  std::string q;
  char c = peek();
  if (c == '*' || c == '+' || c == '?') {
    ++pos_;
    q = std::string(1, c);
  } else if (c == '{') {
    ++pos_;
    int min = parse_number();
    q = "{" + std::to_string(min);
    if (peek() == ',') {
      ++pos_;
      q += ",";
      if (peek() != '}') {
        int max = parse_number();
        if (max < min) fail("repetition with max below min");
        q += std::to_string(max);
      }
    }
    if (peek() != '}') fail("missing '}'");
    ++pos_;
    q += "}";
  } else {
    return atom;
  }
  if (peek() == '?') ++pos_;  // lazy: the same language
  if (peek() == '+') fail("possessive quantifiers are not supported");
  if (peek() == '*' || peek() == '+' || peek() == '{') fail("a quantifier on a quantifier");
  return "(" + atom + ")" + q;
}

}  // namespace
}  // namespace flashq::grammar

namespace flashq::grammar {
namespace {

char32_t RegexParser::parse_escape_code_point(char c) {
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    default: break;
  }
  int digits = c == 'x' ? 2 : c == 'u' ? 4 : 0;
  if (digits == 0) {
    bool punctuation = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                       (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    if (punctuation) return static_cast<char32_t>(c);
    if (c >= '1' && c <= '9') fail("backreferences are not supported");
    if (c == 'b' || c == 'B') fail("word boundaries (\\b, \\B) are not supported");
    if (c == 'p' || c == 'P') fail("Unicode property classes (\\p) are not supported");
    fail(std::string("escape '\\") + c + "' is not supported");
  }
  char32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    char h = peek();
    if (!std::isxdigit(static_cast<unsigned char>(h))) fail("expected hex digits");
    ++pos_;
    value = value * 16 + static_cast<char32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
  }
  if (value >= 0xD800 && value <= 0xDFFF) fail("surrogate code points are not supported");
  return value;
}

// Consumes an escape; true with `ranges` filled for a class escape (\d \w \s and negations),
// false with the one code point in `ranges` otherwise.
bool RegexParser::parse_class_escape(Ranges& ranges) {
  ++pos_;
  if (at_end()) fail("escape at the end of the pattern");
  char c = pattern_[pos_++];
  const Ranges* named = nullptr;
  switch (c) {
    case 'd': case 'D': named = &kDigit; break;
    case 'w': case 'W': named = &kWord; break;
    case 's': case 'S': named = &kSpace; break;
    default: break;
  }
  if (named != nullptr) {
    Ranges set = normalize_ranges(*named, /*negate=*/c >= 'A' && c <= 'Z');
    ranges.insert(ranges.end(), set.begin(), set.end());
    return true;
  }
  char32_t cp = parse_escape_code_point(c);
  ranges.emplace_back(cp, cp);
  return false;
}

std::string RegexParser::parse_class() {
  ++pos_;  // [
  bool negate = false;
  if (peek() == '^') {
    negate = true;
    ++pos_;
  }
  Ranges ranges;
  bool first = true;
  while (true) {
    if (at_end()) fail("unterminated character class");
    if (peek() == ']' && !first) break;
    first = false;
    char32_t lo;
    if (peek() == '\\') {
      Ranges one;
      if (parse_class_escape(one)) {
        ranges.insert(ranges.end(), one.begin(), one.end());
        continue;
      }
      lo = one[0].first;
    } else {
      lo = next_code_point(pattern_, pos_);
    }
    char32_t hi = lo;
    if (peek() == '-' && pos_ + 1 < pattern_.size() && pattern_[pos_ + 1] != ']') {
      ++pos_;
      Ranges one;
      if (peek() == '\\') {
        if (parse_class_escape(one)) fail("a class escape cannot end a range");
        hi = one[0].first;
      } else {
        hi = next_code_point(pattern_, pos_);
      }
      if (hi < lo) fail("character class range goes backwards");
    }
    ranges.emplace_back(lo, hi);
  }
  ++pos_;
  Ranges set = normalize_ranges(std::move(ranges), negate);
  if (set.empty()) fail("character class matches nothing");
  return emit_ranges(set);
}

std::string RegexParser::emit_code_point(char32_t cp) const {
  if (json_) return gbnf_literal(json_escaped(cp));
  std::string utf8;
  append_utf8(utf8, cp);
  return gbnf_literal(utf8);
}

// In a JSON string a class's quote, backslash and control characters appear escaped, so they
// leave the class and come back as alternatives of their escaped forms.
std::string RegexParser::emit_ranges(const Ranges& ranges) const {
  if (!json_) return gbnf_class(ranges);
  Ranges plain;
  std::vector<char32_t> escaped;
  for (const auto& [lo, hi] : ranges) {
    for (char32_t cp = lo; cp <= hi && cp < 0x20; ++cp) escaped.push_back(cp);
    if (lo <= '"' && '"' <= hi) escaped.push_back('"');
    if (lo <= '\\' && '\\' <= hi) escaped.push_back('\\');
  }
  Ranges remove{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  Ranges keep = normalize_ranges(normalize_ranges(remove, true), false);
  for (const auto& [lo, hi] : ranges) {
    for (const auto& [klo, khi] : keep) {
      char32_t a = std::max(lo, klo), b = std::min(hi, khi);
      if (a <= b) plain.emplace_back(a, b);
    }
  }
  std::vector<std::string> parts;
  if (!plain.empty()) parts.push_back(gbnf_class(plain));
  for (char32_t cp : escaped) parts.push_back(gbnf_literal(json_escaped(cp)));
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

}  // namespace

RegexGbnf regex_to_gbnf(std::string_view pattern, bool inside_json_string) {
  return RegexParser(pattern, inside_json_string).parse();
}

std::string regex_grammar(std::string_view pattern) {
  return "root ::= " + regex_to_gbnf(pattern, /*inside_json_string=*/false).expression + "\n";
}

}  // namespace flashq::grammar
