#include "worker/grammar/compiled_grammar.h"

#include <algorithm>
#include <deque>
#include <unordered_set>

#include "worker/grammar/byte_stepper.h"
#include "worker/grammar/mask_context.h"

namespace flashq::grammar {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTable> tokens)
    : grammar_(std::move(grammar)), tokens_(std::move(tokens)) {}

std::shared_ptr<const TokenMaskEntry> CompiledGrammar::mask_entry(const MaskContext& context) const {
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(context); it != entries_.end()) return it->second;
  }
  // Built outside the lock: two threads may build the same entry once each, which is harmless.
  auto entry = std::make_shared<const TokenMaskEntry>(
      build_token_mask_entry(grammar_, *tokens_, context));
  std::lock_guard lock(mutex_);
  trie_nodes_walked_ += entry->trie_nodes_walked;
  if (entries_.size() < kMaxMaskCacheEntries) entries_.emplace(context, entry);
  return entry;
}

// Breadth first over ASCII bytes from the start, one set of stacks per context: a set whose
// context was met before is not explored again (its successors are, as a rule, those already
// queued). The contexts inside a multi-byte character are left to be built when met: they
// allow only continuation bytes, so their entries are quick to build, and there are many.
void CompiledGrammar::precompute_masks(size_t max_contexts, size_t max_trie_walks) const {
  const size_t budget = trie_nodes_walked() + max_trie_walks * tokens_->trie().size();
  StackPool pool;
  ByteStepper stepper(grammar_, pool);
  const auto& elements = grammar_.elements();
  const auto& byte_sets = grammar_.byte_sets();
  std::unordered_set<MaskContext, MaskContextHash> seen;
  std::deque<StackSet> queue{stepper.start()};
  seen.insert(mask_context_of(pool, queue.front()));
  StackSet next;
  while (!queue.empty() && cached_entries() < kMaxMaskCacheEntries && trie_nodes_walked() < budget) {
    StackSet stacks = std::move(queue.front());
    queue.pop_front();
    mask_entry(mask_context_of(pool, stacks));
    ByteSet bytes;  // the bytes some stack can take
    for (int32_t s : stacks) {
      if (s < 0) continue;
      const ByteSet& top = byte_sets[elements[pool.node(s).position].index];
      for (size_t w = 0; w < bytes.words.size(); ++w) bytes.words[w] |= top.words[w];
    }
    for (int b = 0; b < 128 && seen.size() < max_contexts; ++b) {
      if (!bytes.contains(static_cast<uint8_t>(b))) continue;
      stepper.advance(stacks, static_cast<uint8_t>(b), next);
      if (!next.empty() && seen.insert(mask_context_of(pool, next)).second) queue.push_back(next);
    }
  }
}

size_t CompiledGrammar::trie_nodes_walked() const {
  std::lock_guard lock(mutex_);
  return trie_nodes_walked_;
}

size_t CompiledGrammar::memory_bytes() const {
  size_t bytes = grammar_.elements().size() * sizeof(Element) + grammar_.byte_sets().size() * sizeof(ByteSet);
  std::lock_guard lock(mutex_);
  for (const auto& [context, entry] : entries_) {
    bytes += context.positions.size() * sizeof(int32_t) + entry->accepted_bits.size() * sizeof(uint32_t) +
             (entry->accepted_ids.size() + entry->uncertain.size()) * sizeof(int32_t);
  }
  return bytes;
}

size_t CompiledGrammar::cached_entries() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace flashq::grammar
