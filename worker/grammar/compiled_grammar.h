// A grammar bound to one tokenizer's vocabulary: what a sequence's matcher needs to compute masks.
// Shared by every sequence that uses the same grammar and tokenizer (grammar_cache.h); its mask
// cache fills in as contexts are first met and is safe to use from several threads.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "worker/grammar/grammar.h"
#include "worker/grammar/token_mask_cache.h"
#include "worker/grammar/token_table.h"

namespace flashq::grammar {

// Contexts kept per compiled grammar; past this, entries are computed and not kept.
inline constexpr size_t kMaxMaskCacheEntries = 4096;
// What compile time spends on mask cache entries (docs/grammar.md): at most this many contexts,
// and at most this many walks of the whole token trie (about 3.5 ms each for Qwen3 here).
inline constexpr size_t kPrecomputeContexts = 1024;
inline constexpr size_t kPrecomputeTrieWalks = 128;

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTable> tokens);

  const Grammar& grammar() const { return grammar_; }
  const TokenTable& tokens() const { return *tokens_; }
  std::shared_ptr<const TokenTable> shared_tokens() const { return tokens_; }

  std::shared_ptr<const TokenMaskEntry> mask_entry(const MaskContext& context) const;
  // The trie nodes walked building entries so far.
  size_t trie_nodes_walked() const;
  // Builds the entries of the contexts reachable from the start (breadth first over bytes), at
  // most `max_contexts` of them and `max_trie_walks` walks of the token trie in all, so that
  // masks computed on the engine's thread find them built; a grammar with more (long counted
  // repetitions, deep recursion) builds the rest when first met.
  void precompute_masks(size_t max_contexts, size_t max_trie_walks) const;
  size_t cached_entries() const;
  // Bytes held by the grammar and its mask cache: what a grammar cache entry costs.
  size_t memory_bytes() const;

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenTable> tokens_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<MaskContext, std::shared_ptr<const TokenMaskEntry>, MaskContextHash>
      entries_;
  mutable size_t trie_nodes_walked_ = 0;
};

}  // namespace flashq::grammar
