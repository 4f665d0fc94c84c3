// The regex of a Split pre-tokenizer, run by PCRE2 (UTF + UCP, JIT when available). tokenizer.json
// patterns are written for Oniguruma, which Hugging Face tokenizers uses; the one difference that
// changes Qwen's splits is \s (Oniguruma: Unicode White_Space, which includes U+0085; PCRE2: Z
// category plus \t-\r), so \s and \S are rewritten as the White_Space set before compiling.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashq {

class SplitPattern {
 public:
  // Throws kBadTokenizer when PCRE2 cannot compile the pattern.
  explicit SplitPattern(const std::string& oniguruma_pattern);
  ~SplitPattern();
  SplitPattern(const SplitPattern&) = delete;
  SplitPattern& operator=(const SplitPattern&) = delete;
  SplitPattern(SplitPattern&& other) noexcept;
  SplitPattern& operator=(SplitPattern&&) = delete;

  // Split with behaviour "Isolated": every match and every stretch between matches becomes a
  // piece, in order; empty pieces are dropped. `text` must be valid UTF-8.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8; kept opaque so the PCRE2 header stays in the .cpp
};

// Oniguruma's \s and \S written out as PCRE2 classes (exposed for tests).
std::string translate_oniguruma_pattern(std::string_view pattern);

}  // namespace flashq
