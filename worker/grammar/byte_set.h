// A set of byte values: the one terminal of the grammar. Character classes over code points
// become sequences of these (UTF-8 ranges), so the matcher only ever tests one byte at a time.
#pragma once

#include <array>
#include <cstdint>

namespace flashq::grammar {

struct ByteSet {
  std::array<uint64_t, 4> words{};

  bool contains(uint8_t byte) const { return (words[byte >> 6] >> (byte & 63)) & 1; }
  void add(uint8_t byte) { words[byte >> 6] |= uint64_t{1} << (byte & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

}  // namespace flashq::grammar
