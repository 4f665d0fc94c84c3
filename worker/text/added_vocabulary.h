// Added tokens of tokenizer.json (<|im_start|>, <think>, ...): found in the input before any other
// processing and encoded as one id each, as Hugging Face's AddedVocabulary does. Matching is
// leftmost-longest; tokens with normalized=false are matched in the raw text, the others in the
// normalized text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashq {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // skipped by decode(skip_special_tokens=true)
  bool normalized = false;   // matched after normalization rather than before
  bool lstrip = false;       // the match swallows white space on its left
  bool rstrip = false;       // the match swallows white space on its right
  bool single_word = false;  // matches only where it is not part of a longer word
};

// A stretch of input: either plain text (added_id < 0) or one added token.
struct TextSegment {
  std::string_view text;
  int32_t added_id = -1;
};

class AddedVocabulary {
 public:
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Splits `text` on the tokens whose `normalized` flag equals `normalized`; appends to `segments`.
  void split(std::string_view text, bool normalized, std::vector<TextSegment>& segments) const;

  bool has_normalized_tokens() const { return has_normalized_; }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Match {
    size_t begin = 0;
    size_t end = 0;
    const AddedToken* token = nullptr;
  };
  Match find_at(std::string_view text, size_t pos, bool normalized) const;

  std::vector<AddedToken> tokens_;
  std::array<std::vector<size_t>, 256> by_first_byte_;  // indices into tokens_, longest first
  bool has_normalized_ = false;
};

}  // namespace flashq
