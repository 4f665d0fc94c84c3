#include "worker/grammar/stack_pool.h"

#include <cstdint>

namespace flashq::grammar {
namespace {

size_t hash_node(int32_t position, int32_t below) {
  uint64_t x = (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
               static_cast<uint32_t>(below);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<size_t>(x);
}

}  // namespace

StackPool::StackPool() : table_(1024, -1) {}

int32_t StackPool::push(int32_t position, int32_t below) {
  int32_t depth = below >= 0 ? nodes_[below].depth + 1 : 1;
  if (depth > kMaxStackDepth) return kStackOverflow;
  size_t mask = table_.size() - 1;
  size_t slot = hash_node(position, below) & mask;
  size_t reusable = SIZE_MAX;
  for (;; slot = (slot + 1) & mask) {
    int32_t id = table_[slot];
    if (id < 0) break;
    if (static_cast<size_t>(id) >= nodes_.size()) {
      if (reusable == SIZE_MAX) reusable = slot;
      continue;
    }
    const StackNode& n = nodes_[id];
    if (n.position == position && n.below == below) return id;
  }
  int32_t id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back({position, below, depth});
  if (reusable != SIZE_MAX) {
    table_[reusable] = id;
  } else {
    table_[slot] = id;
    if (++used_slots_ * 2 > table_.size()) rehash();
  }
  return id;
}

void StackPool::rehash() {
  size_t capacity = table_.size();
  while (nodes_.size() * 4 > capacity) capacity *= 2;
  table_.assign(capacity, -1);
  size_t mask = capacity - 1;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    size_t slot = hash_node(nodes_[id].position, nodes_[id].below) & mask;
    while (table_[slot] >= 0) slot = (slot + 1) & mask;
    table_[slot] = static_cast<int32_t>(id);
  }
  used_slots_ = nodes_.size();
}

}  // namespace flashq::grammar
