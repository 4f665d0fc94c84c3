#include "worker/grammar/utf8_ranges.h"

#include <algorithm>

namespace flashq::grammar {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

int encoded_length(char32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

std::vector<uint8_t> encode(char32_t cp) {
  switch (encoded_length(cp)) {
    case 1: return {static_cast<uint8_t>(cp)};
    case 2: return {static_cast<uint8_t>(0xC0 | (cp >> 6)), static_cast<uint8_t>(0x80 | (cp & 0x3F))};
    case 3:
      return {static_cast<uint8_t>(0xE0 | (cp >> 12)), static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)),
              static_cast<uint8_t>(0x80 | (cp & 0x3F))};
    default:
      return {static_cast<uint8_t>(0xF0 | (cp >> 18)), static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F)),
              static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)), static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  }
}

// Splits [lo, hi] until every piece shares all but a suffix of full continuation ranges, the
// shape in which the byte-wise ranges of lo's and hi's encodings describe the piece exactly.
void split(char32_t lo, char32_t hi, std::vector<ByteRangeSequence>& out) {
  if (lo > hi) return;
  if (lo < 0xD800 && hi > 0xDFFF) {
    split(lo, 0xD7FF, out);
    split(0xE000, hi, out);
    return;
  }
  if (lo >= 0xD800 && hi <= 0xDFFF) return;
  if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
  if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
  if (lo > hi) return;
  for (char32_t boundary : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= boundary && boundary < hi) {
      split(lo, boundary, out);
      split(boundary + 1, hi, out);
      return;
    }
  }
  int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    char32_t mask = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~mask) == (hi & ~mask)) continue;
    if ((lo & mask) != 0) {
      split(lo, lo | mask, out);
      split((lo | mask) + 1, hi, out);
      return;
    }
    if ((hi & mask) != mask) {
      split(lo, (hi & ~mask) - 1, out);
      split(hi & ~mask, hi, out);
      return;
    }
  }
  std::vector<uint8_t> a = encode(lo), b = encode(hi);
  ByteRangeSequence sequence;
  for (size_t i = 0; i < a.size(); ++i) sequence.emplace_back(a[i], b[i]);
  out.push_back(std::move(sequence));
}

}  // namespace

std::vector<ByteRangeSequence> utf8_sequences(char32_t lo, char32_t hi) {
  std::vector<ByteRangeSequence> out;
  split(lo, std::min(hi, kMaxCodePoint), out);
  return out;
}

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodePointRange> merged;
  for (const auto& [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  if (!negate) return merged;
  std::vector<CodePointRange> complement;
  char32_t next = 0;
  for (const auto& [lo, hi] : merged) {
    if (lo > next) complement.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) complement.emplace_back(next, kMaxCodePoint);
  return complement;
}

}  // namespace flashq::grammar
