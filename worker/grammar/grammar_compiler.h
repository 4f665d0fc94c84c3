// The entry point for callers: a structured-output request (GBNF, JSON Schema, json_object,
// regex or a list of choices) compiled against one tokenizer's token table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/grammar/compiled_grammar.h"

namespace flashq::grammar {

enum class GrammarFormat { kGbnf, kJsonSchema, kJsonObject, kRegex, kChoice };

struct GrammarRequest {
  GrammarFormat format = GrammarFormat::kGbnf;
  std::string text;                  // the GBNF, schema or regex; unused for the others
  std::vector<std::string> choices;  // kChoice only
  // The grammar spells special tokens (harmony's <|channel|>): it is bound to a token table that
  // gives them their text (TokenTable's kSpecialAsText), where there is one.
  bool spells_special_tokens = false;
};

// The request as GBNF text. Throws kInvalidArgument naming what is wrong or unsupported.
std::string request_gbnf(const GrammarRequest& request);

// Parses, checks and binds the grammar to `tokens`, and builds the mask cache entries of the
// contexts reachable from its start within the budgets of compiled_grammar.h, on the caller's
// thread (the worker's prepare thread). Throws kInvalidArgument as request_gbnf and parse_gbnf do.
std::shared_ptr<const CompiledGrammar> compile_grammar(const GrammarRequest& request,
                                                       std::shared_ptr<const TokenTable> tokens);

}  // namespace flashq::grammar
