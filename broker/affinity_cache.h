// Where the broker last routed something (a session, a block of prompt prefix): key -> worker
// identity, bounded by a count and forgetting the least recently used key first, so that routing
// memory stays small whatever producers send. Entries of a worker that leaves are dropped with it.
#pragma once

#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace flashq {

template <typename Key>
class AffinityCache {
 public:
  explicit AffinityCache(std::size_t capacity) : capacity_(capacity) {}

  // The worker `key` was last routed to, or nullptr; a hit makes the key the most recently used.
  const std::string* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->second;
  }

  // Routes `key` to `worker` (replacing any earlier worker), evicting the least recently used
  // key beyond the capacity.
  void put(const Key& key, const std::string& worker) {
    if (capacity_ == 0) return;
    auto it = index_.find(key);
    if (it != index_.end()) {
      it->second->second = worker;
      entries_.splice(entries_.begin(), entries_, it->second);
      return;
    }
    entries_.emplace_front(key, worker);
    index_.emplace(key, entries_.begin());
    if (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
  }

  void erase(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    entries_.erase(it->second);
    index_.erase(it);
  }

  // Forgets every key routed to `worker` (it left: its caches went with it).
  void erase_worker(const std::string& worker) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second == worker) {
        index_.erase(it->first);
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::size_t size() const { return entries_.size(); }

 private:
  using Entries = std::list<std::pair<Key, std::string>>;
  std::size_t capacity_;
  Entries entries_;  // most recently used first
  std::unordered_map<Key, typename Entries::iterator> index_;
};

}  // namespace flashq
