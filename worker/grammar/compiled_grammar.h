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

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTable> tokens);

  const Grammar& grammar() const { return grammar_; }
  const TokenTable& tokens() const { return *tokens_; }
  std::shared_ptr<const TokenTable> shared_tokens() const { return tokens_; }

  std::shared_ptr<const TokenMaskEntry> mask_entry(const MaskContext& context) const;
  // Builds the entries of the grammar's first position, so the first mask is served warm.
  void warm_start() const;
  size_t cached_entries() const;

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenTable> tokens_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<MaskContext, std::shared_ptr<const TokenMaskEntry>, MaskContextHash>
      entries_;
};

}  // namespace flashq::grammar
