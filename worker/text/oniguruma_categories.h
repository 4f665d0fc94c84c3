// What a tokenizer.json regex's \p{...} classes mean to Hugging Face tokenizers. Its regex engine,
// Oniguruma, carries Unicode 16.0; PCRE2 10.42, which runs the patterns here, carries Unicode 14.0,
// so the letters, marks, numbers, punctuation and symbols assigned in Unicode 15.0-16.0 (Kawi,
// Tulu-Tigalari, Garay, CJK Extension I, ...) would fall outside \p{L} and the others. For the
// categories below these code points are added to the class; a newer PCRE2 already holds them,
// and the addition is then a no-op.
//
// Covered: L, Lu, Ll, Lt, Lm, Lo, M, N, Nd, Nl, No, P, S. Not covered: the mark subcategories
// (U+1171E moved from Mn to Mc in Unicode 16.0, which no addition expresses), C and Z (no
// change), and \P{...} inside a bracketed class.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace flashq {

struct CodePointRange {
  char32_t first = 0;
  char32_t last = 0;  // inclusive
};

// The code points to add to \p{category}, sorted (empty where there are none), or nullopt for a
// category not covered.
std::optional<std::span<const CodePointRange>> oniguruma_category_additions(std::string_view category);

}  // namespace flashq
