// Reading Hugging Face tokenizer.json into what the byte-level BPE tokenizer needs. The supported
// subset is what Qwen2/Qwen3, Llama 3 and GPT-2 style files use: NFC (or another Unicode form)
// normalizers, Split regex and ByteLevel pre-tokenizers, a BPE model (with ignore_merges), a
// ByteLevel decoder, added tokens, and ByteLevel or TemplateProcessing post-processors. Any
// other type is refused with kUnsupported naming the key; malformed content with kBadTokenizer.
// Both name the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "worker/text/added_vocabulary.h"
#include "worker/text/bpe_model.h"
#include "worker/text/unicode_normalizer.h"

namespace flashq {

// Ids above this are refused: no real vocabulary comes near, and decode tables are indexed by id.
inline constexpr int32_t kMaxTokenId = (1 << 24) - 1;

struct TokenizerJson {
  std::vector<NormalizationForm> normalizers;  // applied in order
  std::vector<std::string> split_patterns;     // Oniguruma regexes, "Isolated" splits in order
  std::vector<AddedToken> added_tokens;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  BpeOptions bpe_options;
  // The post-processor's special tokens around one text (Llama 3: <|begin_of_text|> before it).
  std::vector<int32_t> special_prefix;
  std::vector<int32_t> special_suffix;
};

// Parses the text of a tokenizer.json; `label` (the file path) prefixes every error message.
TokenizerJson parse_tokenizer_json(std::string text, const std::string& label);

TokenizerJson read_tokenizer_json(const std::filesystem::path& path);

}  // namespace flashq
