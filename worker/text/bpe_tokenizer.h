// Hugging Face tokenizer.json byte-level BPE, as Qwen2/Qwen3 and Llama 3 use it. encode: repair invalid UTF-8,
// split off added tokens, normalize (NFC), split with the pre-tokenizer regex, map bytes to the
// byte-level alphabet, run BPE on each piece. decode: concatenate the bytes each token stands for
// and repair what is not valid UTF-8.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "worker/text/added_vocabulary.h"
#include "worker/text/bpe_model.h"
#include "worker/text/split_pattern.h"
#include "worker/text/tokenizer.h"
#include "worker/text/tokenizer_json.h"

namespace flashq {

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  // Throws kBadTokenizer / kUnsupported naming `path` (see tokenizer_json.h).
  static std::unique_ptr<ByteLevelBpeTokenizer> load(const std::filesystem::path& path);

  explicit ByteLevelBpeTokenizer(TokenizerJson spec);

  std::vector<int32_t> encode(std::string_view text) const override;
  // The post-processor's special tokens around encode's ids.
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(token_bytes_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  bool is_special(int32_t id) const override;
  std::string token_bytes(int32_t id) const override;

 private:
  void encode_plain_text(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_normalized_text(std::string_view text, std::vector<int32_t>& ids) const;

  std::vector<NormalizationForm> normalizers_;
  std::vector<SplitPattern> split_patterns_;
  AddedVocabulary added_;
  BpeModel model_;
  std::unordered_map<std::string, int32_t> added_ids_;  // content -> id
  std::vector<int32_t> special_prefix_;
  std::vector<int32_t> special_suffix_;
  // Per id: the bytes it decodes to, whether the id exists, whether it is special.
  std::vector<std::string> token_bytes_;
  std::vector<bool> known_;
  std::vector<bool> special_;
};

}  // namespace flashq
