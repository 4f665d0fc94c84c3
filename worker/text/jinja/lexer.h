// Template source to tokens, as the reference engine's lexer does it: the source is first
// preprocessed (one trailing newline dropped, lstrip_blocks and trim_blocks applied, the
// transformers-specific {% generation %} tags removed), then split into text, comments and the
// tokens inside {{ }} and {% %}, honouring the whitespace control of {%- -%} {{- -}} {#- -#}.
// Every token keeps the line of the original source it came from, for error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashq::jinja {

enum class TokenType {
  kText,
  kNumber,  // integer or decimal literal, possibly with a leading sign
  kString,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenBracket,
  kCloseBracket,
  kOpenBrace,
  kCloseBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a sign not followed by digits
  kComment,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

// Throws kInvalidArgument ("chat template line N: ...") on a lexical error.
std::vector<Token> tokenize(std::string_view source);

}  // namespace flashq::jinja
