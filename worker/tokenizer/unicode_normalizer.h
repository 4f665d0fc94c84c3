// Unicode normalization forms for tokenizer.json's normalizers (Qwen uses NFC), through utf8proc.
#pragma once

#include <string>
#include <string_view>

namespace flashq {

enum class NormalizationForm { kNFC, kNFD, kNFKC, kNFKD };

// `text` must be valid UTF-8 (it may contain NUL).
std::string normalize_unicode(std::string_view text, NormalizationForm form);

}  // namespace flashq
