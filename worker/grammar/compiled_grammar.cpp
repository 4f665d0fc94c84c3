#include "worker/grammar/compiled_grammar.h"

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
  if (entries_.size() < kMaxMaskCacheEntries) entries_.emplace(context, entry);
  return entry;
}

void CompiledGrammar::warm_start() const {
  StackPool pool;
  ByteStepper stepper(grammar_, pool);
  mask_entry(mask_context_of(pool, stepper.start()));
}

size_t CompiledGrammar::cached_entries() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace flashq::grammar
