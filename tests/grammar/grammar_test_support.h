// Shared by the grammar tests: compiling GBNF against a vocabulary, the brute-force mask that
// fill_mask must equal (every token fed through accept_token and rolled back), and bit helpers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/grammar/compiled_grammar.h"
#include "worker/grammar/gbnf_parser.h"
#include "worker/grammar/grammar_matcher.h"

namespace flashq::grammar::testing {

inline std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf,
                                                      std::shared_ptr<const TokenTable> tokens) {
  return std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf), std::move(tokens));
}

// A matcher over single-byte tokens 0..255 (id == byte) and end token 256.
inline std::shared_ptr<const TokenTable> byte_tokens() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  bytes.emplace_back();
  return std::make_shared<const TokenTable>(std::move(bytes), std::vector<int32_t>{256});
}

inline bool accepts(const std::string& gbnf, const std::string& text) {
  GrammarMatcher matcher(compile(gbnf, byte_tokens()));
  return matcher.accept_bytes(text) && matcher.can_end();
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < mask.size() * 32; ++i) {
    if ((mask[i / 32] >> (i % 32)) & 1) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

// The allowed ids by trying every token: the reference fill_mask is checked against.
inline std::vector<int32_t> brute_force_allowed(GrammarMatcher& matcher, const TokenTable& tokens) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tokens.vocab_size(); ++id) {
    if (matcher.accept_token(id)) {
      ids.push_back(id);
      matcher.rollback(1);
    }
  }
  return ids;
}

inline std::vector<int32_t> mask_allowed(GrammarMatcher& matcher, const TokenTable& tokens) {
  std::vector<uint32_t> mask(tokens.mask_words());
  matcher.fill_mask(mask);
  std::vector<int32_t> ids = allowed_ids(mask);
  while (!ids.empty() && ids.back() >= tokens.vocab_size()) ids.pop_back();
  return ids;
}

}  // namespace flashq::grammar::testing
