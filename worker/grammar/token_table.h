// A tokenizer's vocabulary as the grammar engine needs it, built once per tokenizer: each token's
// exact bytes, the tokens sorted by those bytes, and a trie over them in that order, so a mask
// walks a shared prefix once and skips every token under a prefix the grammar refuses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "worker/text/tokenizer.h"

namespace flashq::grammar {

// One trie node, stored in depth-first order: its subtree is the next subtree_nodes entries
// (itself included), and the tokens under it are sorted_ids()[tokens_begin, subtree_tokens_end),
// the first (tokens_end - tokens_begin) of which end exactly here.
struct TrieNode {
  uint8_t byte;
  int32_t depth;  // bytes from the root: 1 for a token's first byte
  int32_t subtree_nodes;
  int32_t tokens_begin;
  int32_t tokens_end;
  int32_t subtree_tokens_end;
};

// What a grammar sees of the tokenizer's special tokens (other than the end tokens).
enum class SpecialTokens {
  kNeverAllowed,  // no bytes: never allowed
  // Their text (`<|channel|>`), for grammars that spell a format made of special tokens
  // (harmony's tool calls). Such a grammar also lets them stand wherever their text may.
  kAsText,
};

class TokenTable {
 public:
  // `end_token_ids`: the ids that end generation (EOS, end of turn); allowed exactly where the
  // grammar may end. Tokens with no bytes (other special tokens) are never allowed.
  // `vocab_size`: the model's logit count when it pads past the tokenizer's (Qwen3: 151,936
  // logits, 151,669 tokens); the padding ids are never allowed.
  TokenTable(const Tokenizer& tokenizer, std::vector<int32_t> end_token_ids, int32_t vocab_size = 0,
             SpecialTokens special = SpecialTokens::kNeverAllowed);
  // From the bytes of each id directly (tests, tools).
  TokenTable(std::vector<std::string> token_bytes, std::vector<int32_t> end_token_ids);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  std::string_view bytes(int32_t id) const { return bytes_[id]; }
  const std::vector<int32_t>& end_token_ids() const { return end_ids_; }
  bool is_end_token(int32_t id) const;
  // Ids with at least one byte, sorted by their bytes.
  const std::vector<int32_t>& sorted_ids() const { return sorted_; }
  const std::vector<TrieNode>& trie() const { return trie_; }
  // Bytes in the longest token.
  int32_t max_token_bytes() const { return max_token_bytes_; }
  // Words of a mask bitset covering the vocabulary.
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }

 private:
  void build();

  std::vector<std::string> bytes_;
  std::vector<int32_t> end_ids_;
  std::vector<int32_t> sorted_;
  std::vector<TrieNode> trie_;
  int32_t max_token_bytes_ = 0;
};

}  // namespace flashq::grammar
