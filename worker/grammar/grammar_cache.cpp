#include "worker/grammar/grammar_cache.h"

namespace flashq::grammar {
namespace {

// The whole request and the table's identity: equal keys mean equal grammars, with no hash
// collisions to worry about. Each part is length-prefixed so no two requests share a key.
std::string cache_key(const GrammarRequest& request, const TokenTable* tokens) {
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(tokens)) + ":" +
                    std::to_string(static_cast<int>(request.format)) + ":" +
                    std::to_string(request.text.size()) + ":" + request.text;
  for (const std::string& choice : request.choices) {
    key += ":" + std::to_string(choice.size()) + ":" + choice;
  }
  return key;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> GrammarCache::get_or_compile(
    const GrammarRequest& request, const std::shared_ptr<const TokenTable>& tokens) {
  std::string key = cache_key(request, tokens.get());
  {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second);
      ++hits_;
      return it->second->grammar;
    }
    ++misses_;
  }
  // A compiled grammar holds its token table, so the table's address in the key cannot be
  // reused by another table while the entry lives.
  std::shared_ptr<const CompiledGrammar> grammar = compile_grammar(request, tokens);
  std::lock_guard lock(mutex_);
  if (index_.count(key) > 0 || capacity_ == 0) return grammar;
  recent_.push_front(Entry{key, grammar});
  index_[key] = recent_.begin();
  while (recent_.size() > capacity_) {
    index_.erase(recent_.back().key);
    recent_.pop_back();
  }
  return grammar;
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mutex_);
  return recent_.size();
}

size_t GrammarCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

size_t GrammarCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

}  // namespace flashq::grammar
