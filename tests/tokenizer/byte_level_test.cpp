#include "worker/text/byte_level.h"

#include <gtest/gtest.h>

#include <set>

namespace flashq {
namespace {

TEST(ByteLevel, GivesEveryByteItsOwnPrintableCharacter) {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) seen.emplace(byte_level_char(static_cast<uint8_t>(b)));
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(byte_level_char(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(byte_level_char('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(byte_level_char('a'), "a");
  EXPECT_EQ(byte_level_char(0xE9), "\xC3\xA9");  // U+00E9 stands for byte 0xE9
  EXPECT_EQ(byte_level_char(0xAD), "\xC5\x83");  // the soft hyphen byte maps past U+0100
}

TEST(ByteLevel, MapsBytesToTheAlphabetAndBack) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level_to_bytes(bytes_to_byte_level(all)), all);
}

TEST(ByteLevel, RefusesTokensOutsideTheAlphabet) {
  EXPECT_EQ(byte_level_to_bytes("<|im_end|>"), "<|im_end|>");
  EXPECT_EQ(byte_level_to_bytes("\xE4\xB8\xAD"), std::nullopt);  // U+4E2D is not a byte stand-in
  EXPECT_EQ(byte_level_to_bytes(" "), std::nullopt);             // a raw space never appears
}

}  // namespace
}  // namespace flashq
