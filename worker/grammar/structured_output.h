// A job's structured output (its `structured_output` field, docs/protocol.md) as a grammar
// request: {"type": "json_schema", "schema": {...}}, {"type": "json_object"}, {"type": "regex",
// "pattern": "..."}, {"type": "choice", "choices": ["...", ...]}, {"type": "grammar",
// "grammar": "<GBNF>"} or {"type": "tool_calls", "format", "choice", "tools", ...} (strict function
// tools: tool_call_grammar.h, read into the GBNF it composes). The gateway reads OpenAI's response_format into this form and checks it
// (request_gbnf); the worker compiles it.
#pragma once

#include <string>
#include <string_view>

#include "worker/grammar/grammar_compiler.h"

namespace flashq::grammar {

// kInvalidArgument naming what is wrong: not JSON, an unknown type, a missing or mistyped field.
GrammarRequest read_structured_output(std::string_view json);

// The map's JSON text for a schema (the schema's own JSON text) and for json_object.
std::string json_schema_output(std::string_view schema_json);
std::string json_object_output();

}  // namespace flashq::grammar
