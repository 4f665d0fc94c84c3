// The window approach of Hugging Face's text-generation-inference: decode ids[prefix:] and
// ids[prefix:read] and emit the difference once it no longer ends in U+FFFD (the mark of a
// character whose bytes have not all arrived). The window keeps one already emitted chunk in front
// so that tokenizers which treat the first token specially (SentencePiece drops its leading space)
// decode the new tokens as they would inside the whole text.
//
// Invariant: the text emitted so far equals decode(ids[0:read_offset_]), and read_offset_ is a
// point where the decoded bytes end with a complete character.
#include "worker/text/incremental_decoder.h"

#include <algorithm>

#include "worker/text/utf8.h"

namespace flashq {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDecoder::push(std::span<const int32_t> ids) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  std::span<const int32_t> all(ids_);
  std::string prefix_text =
      tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_),
                        skip_special_tokens_);
  std::string new_text = tokenizer_.decode(all.subspan(prefix_offset_), skip_special_tokens_);
  if (new_text.size() <= prefix_text.size() || new_text.ends_with(kReplacementCharacter) ||
      !new_text.starts_with(prefix_text)) {
    return {};
  }
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return new_text.substr(prefix_text.size());
}

std::string IncrementalDecoder::flush() {
  std::span<const int32_t> all(ids_);
  std::string prefix_text =
      tokenizer_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_),
                        skip_special_tokens_);
  std::string new_text = tokenizer_.decode(all.subspan(prefix_offset_), skip_special_tokens_);
  prefix_offset_ = read_offset_ = ids_.size();
  // The emitted prefix cannot be taken back; if the window decoded differently, emit what follows
  // the part both decodings share.
  auto mismatch = std::mismatch(prefix_text.begin(), prefix_text.end(), new_text.begin(),
                                new_text.end());
  return std::string(mismatch.second, new_text.end());
}

}  // namespace flashq
