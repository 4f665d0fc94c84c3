// Parse stacks as persistent, hash-consed linked lists. A stack is the id of its top node; a node
// is (grammar position, the stack below). Equal stacks get equal ids, so a set of stacks is a set
// of ints, duplicates collapse as they arise, and a copy of the matcher's state is a vector copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashq::grammar {

// The stack below the bottom frame: at run time the root rule has completed; while a mask cache
// entry is built it stands for the context that entry does not know.
inline constexpr int32_t kEmptyStack = -1;
// What push() answers when the stack would grow past kMaxStackDepth.
inline constexpr int32_t kStackOverflow = -2;
// Nesting bound (an array in an array ... in the output); deeper paths are not allowed.
inline constexpr int32_t kMaxStackDepth = 1024;

struct StackNode {
  int32_t position;
  int32_t below;
  int32_t depth;
};

class StackPool {
 public:
  StackPool();
  int32_t push(int32_t position, int32_t below);
  const StackNode& node(int32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // Forgets nodes from `size` on (scratch work of a mask computation). Table entries that point
  // at them are recognised as stale on lookup.
  void truncate(size_t size) { nodes_.resize(size); }

 private:
  void rehash();

  std::vector<StackNode> nodes_;
  std::vector<int32_t> table_;  // open addressing over node ids, -1 free
  size_t used_slots_ = 0;
};

}  // namespace flashq::grammar
