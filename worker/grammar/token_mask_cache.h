// The adaptive token mask cache (the idea of XGrammar, Dong et al. 2024): for a grammar context,
// the tokens accepted or refused whatever lies below it are computed once; only the tokens that
// run past the context's bottom ("uncertain") are checked against the real stacks at mask time.
// A context is the top kMaskContextFrames frames of every stack the matcher holds: the top frame
// alone is often a tiny rule (one character of a class) that every longer token leaves, and one
// entry for the whole set (inside a string: the ASCII character, each UTF-8 lead byte, the
// escape, the closing quote) costs one bitset and one walk instead of one per stack.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "worker/grammar/grammar.h"
#include "worker/grammar/token_table.h"

namespace flashq::grammar {

inline constexpr int kMaskContextFrames = 4;
// Expansion steps one cache entry may take (about a second); a JSON schema's entries take well
// under a million.
inline constexpr uint64_t kMaxMaskEntryWork = 50'000'000;

// Per stack, its top kMaskContextFrames positions (top first, -1 past the stack's bottom), the
// stacks in ascending order of those, without repeats.
struct MaskContext {
  std::vector<int32_t> positions;
  bool operator==(const MaskContext&) const = default;
};

struct MaskContextHash {
  size_t operator()(const MaskContext& c) const {
    size_t h = c.positions.size();
    for (int32_t p : c.positions) h = h * 1000003u ^ static_cast<uint32_t>(p);
    return h;
  }
};

struct TokenMaskEntry {
  // Accepted tokens: a bitset over ids when many, else a list of ids.
  std::vector<uint32_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  // Indices into TokenTable::sorted_ids(), ascending: decided only by the stack below.
  std::vector<int32_t> uncertain;
  // Trie nodes the build walked: its cost, for compile-time budgets.
  size_t trie_nodes_walked = 0;
};

// Builds the entry for `context` by walking the token trie once.
TokenMaskEntry build_token_mask_entry(const Grammar& grammar, const TokenTable& tokens,
                                      const MaskContext& context);

}  // namespace flashq::grammar
