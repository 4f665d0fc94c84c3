// The BPE model of tokenizer.json: a vocabulary of strings and a ranked list of merges. A word
// starts as its characters; the adjacent pair with the lowest merge rank is merged (the leftmost
// one among equals) until no adjacent pair has a merge, as Hugging Face's BPE does without dropout.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace flashq {

struct BpeOptions {
  std::optional<std::string> unk_token;  // stands for characters missing from the vocabulary
  bool fuse_unk = false;                 // consecutive unknown characters become one unk
  bool ignore_merges = false;            // a word that is in the vocabulary is taken whole
};

class BpeModel {
 public:
  // Throws kBadTokenizer (without a file name) when a merge or the unk token is not in `vocab`.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;
  void apply_merges(std::vector<int32_t>& symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;

  // Words repeat a lot in real text; the cache makes encoding mostly lookups.
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedWordBytes = 128;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace flashq
