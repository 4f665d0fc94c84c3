#include "worker/text/split_pattern.h"

#include <gtest/gtest.h>

#include "shared/error.h"

namespace flashq {
namespace {

constexpr const char* kQwenPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::vector<std::string> split(const SplitPattern& pattern, std::string_view text) {
  std::vector<std::string_view> pieces;
  pattern.split_isolated(text, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(SplitPattern, SplitsLikeQwensPreTokenizer) {
  SplitPattern pattern(kQwenPattern);
  using V = std::vector<std::string>;
  EXPECT_EQ(split(pattern, "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split(pattern, "it's 2024!"), (V{"it", "'s", " ", "2", "0", "2", "4", "!"}));
  EXPECT_EQ(split(pattern, "a  \n\n  b"), (V{"a", "  \n\n", " ", " b"}));
  EXPECT_EQ(split(pattern, "IT'S"), (V{"IT", "'S"}));
  EXPECT_EQ(split(pattern, ""), V{});
}

TEST(SplitPattern, UsesOnigurumasWhiteSpaceForBackslashS) {
  SplitPattern pattern(kQwenPattern);
  using V = std::vector<std::string>;
  // U+0085 is white space for Oniguruma: the first one stands alone before " b"-like letters.
  EXPECT_EQ(split(pattern, "a\xC2\x85\xC2\x85" "b"), (V{"a", "\xC2\x85", "\xC2\x85" "b"}));
  // U+180E is not (PCRE2's own \s would take it): it joins the punctuation-like run.
  EXPECT_EQ(split(pattern, "x \xE1\xA0\x8E y"), (V{"x", " \xE1\xA0\x8E", " y"}));
}

TEST(SplitPattern, TranslatesBackslashSInsideAndOutsideClasses) {
  std::string translated = translate_oniguruma_pattern("\\s+(?!\\S)|[^\\s\\p{L}]|[]\\s]");
  EXPECT_EQ(translated.find("\\s"), std::string::npos) << translated;
  EXPECT_EQ(translated.find("\\S"), std::string::npos) << translated;
  EXPECT_NE(translated.find("[^\\t-\\r"), std::string::npos) << translated;
  EXPECT_EQ(translate_oniguruma_pattern("a\\\\s"), "a\\\\s") << "an escaped backslash is not \\s";
}

// Oniguruma (Unicode 16.0) counts letters that PCRE2 10.42 (Unicode 14.0) does not know: Kawi
// U+11F04 (15.0) and Tulu-Tigalari U+11380 (16.0) are \p{L}, Garay digit U+10D40 (16.0) is \p{N}.
TEST(SplitPattern, CountsLettersAssignedSinceUnicode14AsOnigurumaDoes) {
  using V = std::vector<std::string>;
  SplitPattern words("\\p{L}+|\\p{N}+");
  EXPECT_EQ(split(words, "a\U00011F04\U00011380b \U00010D40\U00010D419"),
            (V{"a\U00011F04\U00011380b", " ", "\U00010D40\U00010D419"}));
  SplitPattern not_letters("[^\\s\\p{L}]+|\\P{L}+");
  EXPECT_EQ(split(not_letters, "x\U00011380!"), (V{"x\U00011380", "!"}));
  // Text is split by the pattern without the additions unless it holds one of them, anywhere.
  EXPECT_EQ(split(not_letters, "x\u00e9\u4e2d!"), (V{"x\u00e9\u4e2d", "!"}));
  EXPECT_EQ(split(words, "abc \u4e2d 12 \U00011380"), (V{"abc", " ", "\u4e2d", " ", "12", " ", "\U00011380"}));
}

TEST(SplitPattern, TranslatesWithoutTheAdditionsToPcre2sOwnClasses) {
  EXPECT_EQ(translate_oniguruma_pattern("\\p{L}+", false), "\\p{L}+");
  EXPECT_EQ(translate_oniguruma_pattern("\\P{N}", false), "[^\\p{N}]");
  EXPECT_EQ(translate_oniguruma_pattern("[^\\p{L}\\p{N}]", false), "[^\\p{L}\\p{N}]");
  std::vector<CodePointRange> used;
  translate_oniguruma_pattern("\\p{Lt}\\p{N}", false, &used);
  EXPECT_FALSE(used.empty()) << "the additions of \\p{N}";
}

TEST(SplitPattern, TranslatesCategoryClassesItCoversAndLeavesOthers) {
  EXPECT_EQ(translate_oniguruma_pattern("\\p{Han}\\p{Mn}"), "\\p{Han}\\p{Mn}") << "not covered";
  EXPECT_EQ(translate_oniguruma_pattern("[\\P{L}]"), "[\\P{L}]") << "a negated class inside a class stays";
  const std::string letters = translate_oniguruma_pattern("\\p{L}");
  EXPECT_TRUE(letters.starts_with("[\\p{L}\\x{")) << letters;
  EXPECT_TRUE(translate_oniguruma_pattern("\\P{N}").starts_with("[^\\p{N}\\x{"));
  EXPECT_TRUE(translate_oniguruma_pattern("[^\\p{Lt}a]").ends_with("a]"));
  EXPECT_EQ(translate_oniguruma_pattern("\\\\p{L}"), "\\\\p{L}") << "an escaped backslash is not \\p";
}

TEST(SplitPattern, KeepsTextBetweenMatchesAsPieces) {
  SplitPattern digits("[0-9]+");
  using V = std::vector<std::string>;
  EXPECT_EQ(split(digits, "ab12cd345"), (V{"ab", "12", "cd", "345"}));
  SplitPattern empty_matches("x*");
  EXPECT_EQ(split(empty_matches, "abxxc"), (V{"ab", "xx", "c"}));
}

TEST(SplitPattern, RefusesARegexThatDoesNotCompile) {
  try {
    SplitPattern bad("(unclosed");
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadTokenizer);
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos) << e.what();
  }
}

TEST(SplitPattern, SplitsVeryLongWhiteSpaceRuns) {
  SplitPattern pattern(kQwenPattern);
  std::string text = "a" + std::string(200000, ' ') + "b";
  std::vector<std::string> pieces = split(pattern, text);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].size(), 199999u);
  EXPECT_EQ(pieces[2], " b");
}

}  // namespace
}  // namespace flashq
