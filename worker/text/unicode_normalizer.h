// Unicode normalization forms for tokenizer.json's normalizers (Qwen uses NFC), through utf8proc,
// as Hugging Face tokenizers normalizes: its tables are Unicode 9.0, so the combining marks and
// compositions assigned since are left as they are.
#pragma once

#include <string>
#include <string_view>

namespace flashq {

enum class NormalizationForm { kNFC, kNFD, kNFKC, kNFKD };

// `text` must be valid UTF-8 (it may contain NUL).
std::string normalize_unicode(std::string_view text, NormalizationForm form);

}  // namespace flashq
