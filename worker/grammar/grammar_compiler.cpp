#include "worker/grammar/grammar_compiler.h"

#include "worker/grammar/gbnf_parser.h"
#include "worker/grammar/json_schema_grammar.h"
#include "worker/grammar/regex_grammar.h"

namespace flashq::grammar {

std::string request_gbnf(const GrammarRequest& request) {
  switch (request.format) {
    case GrammarFormat::kGbnf: return request.text;
    case GrammarFormat::kJsonSchema: return json_schema_grammar(request.text);
    case GrammarFormat::kJsonObject: return json_object_grammar();
    case GrammarFormat::kRegex: return regex_grammar(request.text);
    case GrammarFormat::kChoice: return choice_grammar(request.choices);
  }
  return request.text;
}

std::shared_ptr<const CompiledGrammar> compile_grammar(const GrammarRequest& request,
                                                       std::shared_ptr<const TokenTable> tokens) {
  auto compiled = std::make_shared<const CompiledGrammar>(parse_gbnf(request_gbnf(request)),
                                                          std::move(tokens));
  compiled->precompute_masks(kPrecomputeContexts, kPrecomputeTrieWalks);
  return compiled;
}

}  // namespace flashq::grammar
