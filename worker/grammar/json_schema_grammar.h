// JSON Schema (the OpenAI strict-mode subset, docs/grammar.md) as GBNF. Properties come in their
// declared order; optional ones may be left out. Keywords outside the subset are refused by
// name, never ignored: a grammar that allows what the schema forbids would be a silent bug.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashq::grammar {

// Bounds on what one schema may produce (docs/grammar.md, "Limits").
inline constexpr int kMaxSchemaDepth = 64;
inline constexpr size_t kMaxSchemaRules = 10'000;
inline constexpr size_t kMaxSchemaGbnfBytes = 4 << 20;

// GBNF for `schema_text` (a JSON Schema document). Throws kInvalidArgument naming the keyword
// and where it is (a JSON pointer) for anything unsupported, or the problem with the schema.
std::string json_schema_grammar(std::string_view schema_text);

// Any JSON value whose top is an object (response_format json_object).
std::string json_object_grammar();

// Exactly one of `choices` (each UTF-8 text); kInvalidArgument when there are none.
std::string choice_grammar(const std::vector<std::string>& choices);

}  // namespace flashq::grammar
