// Code point ranges as UTF-8 byte-range sequences, so a character class over code points becomes
// alternatives of byte sets the byte-level matcher understands. Surrogates (U+D800-U+DFFF) are
// never produced: they are not valid UTF-8.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace flashq::grammar {

using CodePointRange = std::pair<char32_t, char32_t>;  // inclusive
using ByteRangeSequence = std::vector<std::pair<uint8_t, uint8_t>>;

// The byte-range sequences that together match exactly the UTF-8 encodings of [lo, hi].
std::vector<ByteRangeSequence> utf8_sequences(char32_t lo, char32_t hi);

// Sorted, merged ranges; `negate` takes the complement within U+0000-U+10FFFF.
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate);

}  // namespace flashq::grammar
