#include "worker/grammar/gbnf_parser.h"

#include <cctype>
#include <string>
#include <tuple>
#include <vector>

#include "shared/error.h"
#include "worker/grammar/utf8_ranges.h"
#include "worker/text/utf8.h"

namespace flashq::grammar {
namespace {

constexpr int kMaxNesting = 128;  // groups inside groups: the parser recurses on them

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Grammar parse(std::string_view root_rule) {
    skip_space();
    while (pos_ < text_.size()) {
      std::string name = parse_name();
      skip_space();
      expect("::=");
      int32_t rule = builder_.rule_id(name);
      if (builder_.is_defined(rule)) fail("rule '" + name + "' is defined twice");
      builder_.define(rule);
      parse_alternatives(rule, 0);
      skip_space();
      if (pos_ < text_.size() && !is_name_char(text_[pos_])) {
        fail(std::string("unexpected character '") + text_[pos_] + "'");
      }
    }
    return builder_.finish(root_rule);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw Error(ErrorCode::kInvalidArgument, "grammar line " + std::to_string(line) + " column " +
                                                 std::to_string(column) + ": " + what);
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  bool at(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  void expect(std::string_view s) {
    if (!at(s)) fail("expected '" + std::string(s) + "'");
    pos_ += s.size();
  }

  std::string parse_name() {
    size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  // True when the text ahead starts the next rule (`name ::=`), which ends the current one.
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  void parse_alternatives(int32_t rule, int depth) {
    if (depth > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting));
    builder_.add_alternative(rule, parse_sequence(rule, depth));
    skip_space();
    while (at("|")) {
      ++pos_;
      builder_.add_alternative(rule, parse_sequence(rule, depth));
      skip_space();
    }
  }

  std::string rule_name(int32_t rule) { return builder_.name(rule); }
  std::vector<Element> parse_sequence(int32_t rule, int depth);
  std::vector<Element> parse_item(int32_t rule, int depth);
  void apply_quantifier(std::vector<Element>& item, std::vector<Element>& sequence, int32_t rule);
  char32_t parse_escape();
  char32_t parse_code_point();
  std::vector<Element> parse_literal();
  std::vector<Element> class_elements(const std::vector<CodePointRange>& ranges);
  std::vector<Element> parse_class();
  std::pair<int, int> parse_braces();
  int parse_count();

  std::string_view text_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
};

std::vector<Element> GbnfParser::parse_sequence(int32_t rule, int depth) {
  std::vector<Element> sequence;
  while (true) {
    skip_space();
    if (pos_ >= text_.size() || at("|") || at(")") || at_rule_start()) return sequence;
    std::vector<Element> item = parse_item(rule, depth);
    skip_space();
    apply_quantifier(item, sequence, rule);
  }
}

std::vector<Element> GbnfParser::parse_item(int32_t rule, int depth) {
  char c = text_[pos_];
  if (c == '"') return parse_literal();
  if (c == '[') return parse_class();
  if (c == '.') {
    ++pos_;
    return class_elements({{0, 0x10FFFF}});
  }
  if (c == '(') {
    ++pos_;
    int32_t group = builder_.add_helper_rule(rule_name(rule) + ".group");
    parse_alternatives(group, depth + 1);
    skip_space();
    expect(")");
    return {GrammarBuilder::rule_element(group)};
  }
  if (is_name_char(c)) return {GrammarBuilder::rule_element(builder_.rule_id(parse_name()))};
  fail(std::string("unexpected character '") + c + "'");
}

int GbnfParser::parse_count() {
  size_t start = pos_;
  long value = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    value = value * 10 + (text_[pos_++] - '0');
    if (value > kMaxRepetition) fail("repetition count above " + std::to_string(kMaxRepetition));
  }
  if (pos_ == start) fail("expected a repetition count");
  return static_cast<int>(value);
}

// {m}, {m,}, {m,n}: max -1 when unbounded.
std::pair<int, int> GbnfParser::parse_braces() {
  ++pos_;
  skip_space();
  int min = parse_count(), max = min;
  skip_space();
  if (at(",")) {
    ++pos_;
    skip_space();
    max = at("}") ? -1 : parse_count();
    skip_space();
  }
  expect("}");
  if (max >= 0 && max < min) fail("repetition {" + std::to_string(min) + "," + std::to_string(max) + "} has max below min");
  return {min, max};
}

void GbnfParser::apply_quantifier(std::vector<Element>& item, std::vector<Element>& sequence,
                                  int32_t rule) {
  int min = 1, max = 1;
  if (at("*")) min = 0, max = -1, ++pos_;
  else if (at("+")) min = 1, max = -1, ++pos_;
  else if (at("?")) min = 0, max = 1, ++pos_;
  else if (at("{")) std::tie(min, max) = parse_braces();
  if (min == 1 && max == 1) {
    sequence.insert(sequence.end(), item.begin(), item.end());
    return;
  }
  Element x = item.size() == 1 ? item[0] : Element{};
  if (item.size() != 1) {
    int32_t wrapped = builder_.add_helper_rule(rule_name(rule) + ".item");
    builder_.add_alternative(wrapped, item);
    x = GrammarBuilder::rule_element(wrapped);
  }
  for (int i = 0; i < min; ++i) sequence.push_back(x);
  if (max < 0) {  // x* as R ::= x R | "": right recursion, which the matcher runs in constant stack
    int32_t star = builder_.add_helper_rule(rule_name(rule) + ".star");
    builder_.add_alternative(star, {x, GrammarBuilder::rule_element(star)});
    builder_.add_alternative(star, {});
    sequence.push_back(GrammarBuilder::rule_element(star));
    return;
  }
  // Up to max-min more: O_1 ::= x | "", O_k ::= x O_{k-1} | "".
  int32_t previous = -1;
  for (int k = 1; k <= max - min; ++k) {
    int32_t optional = builder_.add_helper_rule(rule_name(rule) + ".opt");
    std::vector<Element> body{x};
    if (previous >= 0) body.push_back(GrammarBuilder::rule_element(previous));
    builder_.add_alternative(optional, body);
    builder_.add_alternative(optional, {});
    previous = optional;
  }
  if (previous >= 0) sequence.push_back(GrammarBuilder::rule_element(previous));
}


char32_t GbnfParser::parse_escape() {
  ++pos_;  // the backslash
  if (pos_ >= text_.size()) fail("escape at the end of the grammar");
  char c = text_[pos_++];
  int digits = 0;
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<char32_t>(c);
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default: fail(std::string("unknown escape '\\") + c + "'");
  }
  char32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    if (pos_ >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
      fail("expected " + std::to_string(digits) + " hex digits after '\\" + c + "'");
    }
    char h = text_[pos_++];
    value = value * 16 + static_cast<char32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
  }
  if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) fail("escape names no code point");
  return value;
}

// One code point of a literal or class: an escape or one UTF-8 sequence of the text.
char32_t GbnfParser::parse_code_point() {
  if (text_[pos_] == '\\') return parse_escape();
  size_t length = utf8_sequence_length(text_, pos_);
  if (length == 0) fail("invalid UTF-8 in the grammar");
  return next_code_point(text_, pos_);
}

std::vector<Element> GbnfParser::parse_literal() {
  ++pos_;  // the opening quote
  std::vector<Element> sequence;
  std::string bytes;
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n') fail("unterminated string literal");
    if (text_[pos_] == '"') break;
    bytes.clear();
    append_utf8(bytes, parse_code_point());
    for (char byte : bytes) {
      ByteSet set;
      set.add(static_cast<uint8_t>(byte));
      sequence.push_back(builder_.bytes_element(set));
    }
  }
  ++pos_;
  return sequence;
}

// A class as one byte-set element when every code point is ASCII, else a rule whose
// alternatives are the UTF-8 byte-range sequences.
std::vector<Element> GbnfParser::class_elements(const std::vector<CodePointRange>& ranges) {
  if (ranges.empty()) fail("character class matches nothing");
  std::vector<ByteRangeSequence> sequences;
  for (const auto& [lo, hi] : ranges) {
    for (ByteRangeSequence& sequence : utf8_sequences(lo, hi)) sequences.push_back(std::move(sequence));
  }
  ByteSet single;
  std::vector<std::vector<Element>> alternatives;
  for (const ByteRangeSequence& sequence : sequences) {
    if (sequence.size() == 1) {
      single.add_range(sequence[0].first, sequence[0].second);
      continue;
    }
    std::vector<Element> elements;
    for (const auto& [lo, hi] : sequence) {
      ByteSet set;
      set.add_range(lo, hi);
      elements.push_back(builder_.bytes_element(set));
    }
    alternatives.push_back(std::move(elements));
  }
  if (alternatives.empty()) return {builder_.bytes_element(single)};
  int32_t rule = builder_.add_helper_rule("class");
  if (!single.empty()) builder_.add_alternative(rule, {builder_.bytes_element(single)});
  for (const auto& elements : alternatives) builder_.add_alternative(rule, elements);
  return {GrammarBuilder::rule_element(rule)};
}

std::vector<Element> GbnfParser::parse_class() {
  ++pos_;  // the opening bracket
  bool negate = false;
  if (at("^")) {
    negate = true;
    ++pos_;
  }
  std::vector<CodePointRange> ranges;
  while (true) {
    if (pos_ >= text_.size()) fail("unterminated character class");
    if (text_[pos_] == ']') break;
    char32_t lo = parse_code_point(), hi = lo;
    if (at("-") && text_.substr(pos_ + 1, 1) != "]" && pos_ + 1 < text_.size()) {
      ++pos_;
      hi = parse_code_point();
      if (hi < lo) fail("character class range goes backwards");
    }
    ranges.emplace_back(lo, hi);
  }
  ++pos_;
  return class_elements(normalize_ranges(std::move(ranges), negate));
}

}  // namespace
}  // namespace flashq::grammar

namespace flashq::grammar {

Grammar parse_gbnf(std::string_view text, std::string_view root_rule) {
  return GbnfParser(text).parse(root_rule);
}

}  // namespace flashq::grammar
