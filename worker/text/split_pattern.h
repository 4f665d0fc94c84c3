// The regex of a Split pre-tokenizer, run by PCRE2 (UTF + UCP, JIT when available). tokenizer.json
// patterns are written for Oniguruma, which Hugging Face tokenizers uses. Two differences change
// splits: \s (Oniguruma: Unicode White_Space, which includes U+0085; PCRE2: Z category plus
// \t-\r), so \s and \S are rewritten as the White_Space set before compiling; and the Unicode
// version of \p{...} (Oniguruma's 16.0 against PCRE2 10.42's 14.0), so \p{L}, \p{N} and the
// other categories of oniguruma_categories.h get the code points assigned since. Those classes
// are slower to match, so text without such a code point is split by the pattern without them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "worker/text/oniguruma_categories.h"

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
  bool holds_added_code_point(std::string_view text) const;

  // pcre2_code_8, kept opaque so the PCRE2 header stays in the .cpp: the pattern with the
  // Unicode additions, and (null when it has none) the one without.
  void* code_ = nullptr;
  void* plain_code_ = nullptr;
  std::vector<CodePointRange> additions_;  // every addition the pattern uses, sorted and merged
};

// Oniguruma's \s, \S, \p{...} and \P{...} written out as PCRE2 classes (exposed for tests);
// without the additions, \p{...} stays as PCRE2 has it.
std::string translate_oniguruma_pattern(std::string_view pattern);
std::string translate_oniguruma_pattern(std::string_view pattern, bool with_unicode_additions,
                                        std::vector<CodePointRange>* additions_used = nullptr);

}  // namespace flashq
