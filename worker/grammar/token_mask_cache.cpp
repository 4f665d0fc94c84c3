#include "worker/grammar/token_mask_cache.h"

#include "worker/grammar/stack_set_automaton.h"

namespace flashq::grammar {
namespace {

void store_accepted(const TokenTable& tokens, const std::vector<int32_t>& accepted_sorted,
                    TokenMaskEntry& entry) {
  const auto& sorted = tokens.sorted_ids();
  if (accepted_sorted.size() < tokens.mask_words()) {
    for (int32_t i : accepted_sorted) entry.accepted_ids.push_back(sorted[i]);
    return;
  }
  entry.accepted_bits.assign(tokens.mask_words(), 0);
  for (int32_t i : accepted_sorted) {
    int32_t id = sorted[i];
    entry.accepted_bits[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

}  // namespace

TokenMaskEntry build_token_mask_entry(const Grammar& grammar, const TokenTable& tokens,
                                      const MaskContext& context) {
  StackPool pool;
  ByteStepper stepper(grammar, pool);
  StackSetAutomaton automaton(stepper, kMaxMaskEntryWork);
  StackSet start;
  for (size_t at = 0; at < context.positions.size(); at += kMaskContextFrames) {
    int32_t below = kEmptyStack;
    for (int i = kMaskContextFrames - 1; i >= 0; --i) {
      int32_t position = context.positions[at + static_cast<size_t>(i)];
      if (position >= 0) below = pool.push(position, below);
    }
    start.push_back(below);
  }
  const std::vector<TrieNode>& trie = tokens.trie();
  int32_t max_depth = tokens.max_token_bytes();
  // state[d], bottom[d]: after the first d bytes of the current trie path, and whether some
  // path reached the bottom of the context within them.
  std::vector<int32_t> state(max_depth + 1);
  std::vector<uint8_t> bottom(max_depth + 1);
  if (start.empty()) return {};  // only finished parses: no token continues them
  state[0] = automaton.intern(start);
  bottom[0] = 0;
  std::vector<int32_t> accepted;
  TokenMaskEntry entry;
  for (size_t i = 0; i < trie.size();) {
    const TrieNode& node = trie[i];
    ++entry.trie_nodes_walked;
    int32_t s = automaton.next(state[node.depth - 1], node.byte);
    if (s == StackSetAutomaton::kDead) {
      if (bottom[node.depth - 1]) {
        for (int32_t t = node.tokens_begin; t < node.subtree_tokens_end; ++t) entry.uncertain.push_back(t);
      }
      i += node.subtree_nodes;
      continue;
    }
    state[node.depth] = s;
    bottom[node.depth] = bottom[node.depth - 1] | static_cast<uint8_t>(automaton.reaches_bottom(s));
    for (int32_t t = node.tokens_begin; t < node.tokens_end; ++t) accepted.push_back(t);
    ++i;
  }
  store_accepted(tokens, accepted, entry);
  return entry;
}

}  // namespace flashq::grammar
