#include "worker/grammar/token_table.h"

#include <algorithm>

#include "shared/error.h"

namespace flashq::grammar {

TokenTable::TokenTable(const Tokenizer& tokenizer, std::vector<int32_t> end_token_ids,
                       int32_t vocab_size, SpecialTokens special)
    : end_ids_(std::move(end_token_ids)) {
  bytes_.resize(static_cast<size_t>(std::max(vocab_size, tokenizer.vocab_size())));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    bytes_[id] = tokenizer.token_bytes(id);
    if (special == SpecialTokens::kAsText && tokenizer.is_special(id)) {
      const int32_t ids[] = {id};
      bytes_[id] = tokenizer.decode(ids);
    }
  }
  build();
}

TokenTable::TokenTable(std::vector<std::string> token_bytes, std::vector<int32_t> end_token_ids)
    : bytes_(std::move(token_bytes)), end_ids_(std::move(end_token_ids)) {
  build();
}

bool TokenTable::is_end_token(int32_t id) const {
  return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

void TokenTable::build() {
  for (int32_t id : end_ids_) {
    if (id < 0 || id >= vocab_size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "end token id " + std::to_string(id) + " is not in the vocabulary");
    }
  }
  for (int32_t id = 0; id < vocab_size(); ++id) {
    if (!bytes_[id].empty() && !is_end_token(id)) sorted_.push_back(id);
  }
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  // path[d]: the node for the first d+1 bytes of the current token.
  std::vector<int32_t> path;
  std::string_view previous;
  auto close = [&](int32_t node, int32_t token_end) {
    trie_[node].subtree_nodes = static_cast<int32_t>(trie_.size()) - node;
    trie_[node].subtree_tokens_end = token_end;
  };
  for (int32_t i = 0; i < static_cast<int32_t>(sorted_.size()); ++i) {
    std::string_view b = bytes_[sorted_[i]];
    size_t common = 0;
    while (common < b.size() && common < previous.size() && b[common] == previous[common]) ++common;
    while (path.size() > common) {
      close(path.back(), i);
      path.pop_back();
    }
    for (size_t d = common; d < b.size(); ++d) {
      path.push_back(static_cast<int32_t>(trie_.size()));
      trie_.push_back({static_cast<uint8_t>(b[d]), static_cast<int32_t>(d + 1), 0, i, i, 0});
    }
    trie_[path.back()].tokens_end = i + 1;
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(b.size()));
    previous = b;
  }
  while (!path.empty()) {
    close(path.back(), static_cast<int32_t>(sorted_.size()));
    path.pop_back();
  }
}

}  // namespace flashq::grammar
