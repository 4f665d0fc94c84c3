#include "worker/text/bpe_model.h"

#include <queue>

#include "shared/error.h"
#include "worker/text/utf8.h"

namespace flashq {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  merges_.reserve(merges.size());
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    merged.assign(left).append(right);
    auto left_it = vocab_.find(left);
    auto right_it = vocab_.find(right);
    auto merged_it = vocab_.find(merged);
    if (left_it == vocab_.end() || right_it == vocab_.end() || merged_it == vocab_.end()) {
      const std::string& missing =
          left_it == vocab_.end() ? left : right_it == vocab_.end() ? right : merged;
      throw Error(ErrorCode::kBadTokenizer, "model.merges[" + std::to_string(rank) + "] (\"" +
                                                left + "\", \"" + right + "\"): token \"" +
                                                missing + "\" is not in model.vocab");
    }
    // A repeated pair keeps its first (lowest) rank.
    merges_.try_emplace(pair_key(left_it->second, right_it->second),
                        Merge{static_cast<int32_t>(rank), merged_it->second});
  }
  if (options_.unk_token) {
    unk_id_ = token_to_id(*options_.unk_token);
    if (!unk_id_) {
      throw Error(ErrorCode::kBadTokenizer,
                  "model.unk_token \"" + *options_.unk_token + "\" is not in model.vocab");
    }
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  std::string character;
  bool previous_was_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    size_t length = utf8_sequence_length(word, pos);
    if (length == 0) length = 1;
    character.assign(word.substr(pos, length));
    pos += length;
    auto it = vocab_.find(character);
    if (it != vocab_.end()) {
      symbols.push_back(it->second);
      previous_was_unk = false;
    } else if (unk_id_) {
      if (!(options_.fuse_unk && previous_was_unk)) symbols.push_back(*unk_id_);
      previous_was_unk = true;
    }
    // Without an unk token a character missing from the vocabulary is dropped, as in HF.
  }
}

void BpeModel::apply_merges(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  // Symbols form a linked list over their starting positions; a merged symbol lives at the
  // position of its left part, so position order is text order.
  std::vector<int32_t> next(n), previous(n);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    previous[i] = static_cast<int32_t>(i) - 1;
  }
  struct Candidate {
    int32_t rank;
    int32_t left;  // position of the left symbol
    int32_t merged_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    int32_t right = next[left];
    auto it = merges_.find(pair_key(symbols[left], symbols[right]));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, it->second.merged_id});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));
  std::vector<bool> alive(n, true);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    int32_t right = next[c.left];
    if (!alive[c.left] || right < 0) continue;
    // Hugging Face's staleness rule: the pair now at this position must still merge into the
    // same token (it may be a different pair than when the candidate was made).
    auto it = merges_.find(pair_key(symbols[c.left], symbols[right]));
    if (it == merges_.end() || it->second.merged_id != c.merged_id) continue;
    symbols[c.left] = c.merged_id;
    alive[right] = false;
    next[c.left] = next[right];
    if (next[right] >= 0) previous[next[right]] = c.left;
    consider(previous[c.left]);
    consider(c.left);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  if (options_.ignore_merges) {
    if (auto id = token_to_id(word)) {
      ids.push_back(*id);
      return;
    }
  }
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  initial_symbols(word, symbols);
  apply_merges(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::move(key), std::move(symbols));
  }
}

}  // namespace flashq
