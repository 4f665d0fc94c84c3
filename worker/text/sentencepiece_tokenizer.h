// SentencePiece .model files through libsentencepiece. Control pieces (<s>, </s>, padding) and
// <unk> are the special tokens: written in the text they encode to their ids, and decode shows
// them as their piece unless skip_special_tokens. The text between them is encoded and decoded by
// SentencePiece itself.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "worker/text/added_vocabulary.h"
#include "worker/text/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace flashq {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Throws kBadTokenizer naming `path` when SentencePiece cannot load it.
  explicit SentencePieceTokenizer(const std::filesystem::path& path);
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const override;
  int32_t vocab_size() const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  bool is_special(int32_t id) const override;
  std::string token_bytes(int32_t id) const override;

 private:
  std::string decode_pieces(const std::vector<int>& ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::unique_ptr<AddedVocabulary> special_pieces_;
};

}  // namespace flashq
