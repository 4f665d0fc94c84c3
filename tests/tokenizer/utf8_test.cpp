#include "worker/text/utf8.h"

#include <gtest/gtest.h>

namespace flashq {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, KeepsValidTextUnchanged) {
  std::string text = "plain ascii, caf\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87, \xF0\x9F\x98\x80";
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(replace_invalid_utf8(text), text);
  EXPECT_EQ(replace_invalid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Utf8, ReplacesEachMaximalInvalidSubsequenceWithOneReplacementCharacter) {
  struct Case {
    std::string bytes;
    std::string expected;
  };
  const Case cases[] = {
      {"\x80", kFffd},                              // lone continuation byte
      {"\xC3", kFffd},                              // truncated two-byte sequence
      {"\xE4\xB8", kFffd},                          // truncated three-byte sequence: one U+FFFD
      {"\xF0\x9F\x98", kFffd},                      // truncated four-byte sequence: one U+FFFD
      {"\xE4\xB8" "a", kFffd + "a"},
      {"\xC0\x80", kFffd + kFffd},                  // overlong: C0 never starts a sequence
      {"\xE0\x80\x80", kFffd + kFffd + kFffd},      // overlong three-byte form
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},      // a UTF-16 surrogate
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // above U+10FFFF
      {"\xFF\xFE", kFffd + kFffd},
      {"\xE2\x28\xA1", kFffd + "(" + kFffd},
      {"ab\xF0\x9F\x98\x80\x80", "ab\xF0\x9F\x98\x80" + kFffd},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(is_valid_utf8(c.bytes));
    EXPECT_EQ(replace_invalid_utf8(c.bytes), c.expected);
  }
}

TEST(Utf8, WalksCodePointsBothWays) {
  std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  size_t pos = 0;
  EXPECT_EQ(next_code_point(text, pos), U'a');
  EXPECT_EQ(next_code_point(text, pos), U'\u00E9');
  EXPECT_EQ(next_code_point(text, pos), U'\u4E2D');
  EXPECT_EQ(next_code_point(text, pos), U'\U0001F600');
  EXPECT_EQ(pos, text.size());
  size_t end = text.size();
  EXPECT_EQ(previous_code_point(text, end), U'\U0001F600');
  EXPECT_EQ(previous_code_point(text, end), U'\u4E2D');
  EXPECT_EQ(end, 3u);
}

TEST(Utf8, AppendsEveryEncodingLength) {
  std::string out;
  for (char32_t cp : {U'A', U'\u00E9', U'\u4E2D', U'\U0001F600'}) append_utf8(out, cp);
  EXPECT_EQ(out, "A\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace flashq
