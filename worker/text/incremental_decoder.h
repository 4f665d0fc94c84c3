// Streaming detokenization: feed ids as they are generated, get back only text that is final.
// Never emits part of a UTF-8 character (a character split over two tokens waits for the second).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "worker/text/tokenizer.h"

namespace flashq {

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Appends ids; returns the new text that is now complete.
  std::string push(std::span<const int32_t> ids);
  // End of stream: returns whatever is left (an incomplete character becomes U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // ids before this are fully emitted and no longer decoded
  size_t read_offset_ = 0;    // text of ids [prefix_offset_, read_offset_) was already emitted
};

}  // namespace flashq
