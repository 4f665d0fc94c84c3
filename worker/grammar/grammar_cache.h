// Compiled grammars kept by (request, token table), least recently used dropped first. Many
// requests share one schema (a tool's arguments, an application's response format), and
// compiling and warming a grammar costs far more than a lookup. Thread-safe; compilation runs
// on the calling thread, outside the lock. Failures are not kept.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "worker/grammar/grammar_compiler.h"

namespace flashq::grammar {

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity) : capacity_(capacity) {}

  std::shared_ptr<const CompiledGrammar> get_or_compile(const GrammarRequest& request,
                                                        const std::shared_ptr<const TokenTable>& tokens);
  size_t size() const;
  size_t hits() const;
  size_t misses() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CompiledGrammar> grammar;
  };

  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t hits_ = 0;
  size_t misses_ = 0;
};

}  // namespace flashq::grammar
