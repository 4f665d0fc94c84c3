// Tool calls as a grammar (docs/grammar.md, "Tool calls"): the output a request with strict
// function tools may take, written in the served model's own tool-call format, each call's
// arguments held to its tool's JSON Schema. Composed as GBNF from the per-tool schema grammars,
// whose rule names are kept apart by a prefix per tool.
//
// With a required or named choice the output is a call from its first token (after the model's
// reasoning block, which the grammar allows, so a reasoning model still thinks first). With
// "auto" the grammar is lazy: any text is allowed until the model opens a call in its format
// (the trigger), and from there the call is constrained; text that never opens one may end.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "worker/grammar/grammar_compiler.h"

namespace flashq::grammar {

enum class ToolCallSyntax {
  kHermes,      // <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call> (Qwen3, Hermes)
  kLlama3Json,  // {"name": "f", "parameters": {...}} as the whole message (Llama 3.x)
  kHarmony,     // <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...} (gpt-oss)
};

enum class ToolCallChoice { kRequired, kNamed, kAuto };

// Where the output starts relative to the model's reasoning.
enum class ReasoningStart {
  kNone,      // no reasoning block (a model without one, or thinking turned off)
  kOptional,  // the output may open one first (<think>...</think>, harmony's analysis channel)
  kInside,    // the prompt opened it: the output starts inside the reasoning
};

struct ToolSchema {
  std::string name;
  std::string parameters_json;  // the arguments' JSON Schema; empty: no parameters (`{}`)
  bool strict = true;           // false: the arguments are any JSON object
};

struct ToolCallRequest {
  ToolCallSyntax syntax = ToolCallSyntax::kHermes;
  ToolCallChoice choice = ToolCallChoice::kRequired;
  std::vector<ToolSchema> tools;  // kNamed: the named tool only
  bool parallel = true;           // several calls in one turn (not in harmony: a call ends the turn)
  ReasoningStart reasoning = ReasoningStart::kNone;
  // kAuto only: the answer's own structured output (response_format), which text that opens no
  // call must then obey.
  std::optional<GrammarRequest> answer;
};

// The GBNF of the whole output. Throws kInvalidArgument naming the tool whose schema the grammar
// engine cannot take, or the problem with the request.
std::string tool_call_grammar(const ToolCallRequest& request);

// Whether the grammar spells special tokens (harmony's <|channel|>, <|message|>, ...), which then
// need a token table that gives them their text.
bool spells_special_tokens(ToolCallSyntax syntax);

// The text that opens a call in `syntax`, after which an "auto" output is constrained (Llama 3
// JSON: a message whose first character is '{').
std::string tool_call_trigger(ToolCallSyntax syntax);

// GBNF rules, the first named `name`, matching any UTF-8 text that does not contain `forbidden`
// (which must not overlap itself: no proper prefix of it is also its suffix).
std::string text_without_rules(const std::string& name, const std::string& forbidden);

}  // namespace flashq::grammar
