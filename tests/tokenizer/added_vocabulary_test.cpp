#include "worker/text/added_vocabulary.h"

#include <gtest/gtest.h>

namespace flashq {
namespace {

struct Piece {
  std::string text;
  int32_t id;
  bool operator==(const Piece&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Piece& p) {
  return out << "{\"" << p.text << "\", " << p.id << "}";
}

std::vector<Piece> split(const AddedVocabulary& added, std::string_view text, bool normalized = false) {
  std::vector<TextSegment> segments;
  added.split(text, normalized, segments);
  std::vector<Piece> pieces;
  for (const TextSegment& s : segments) pieces.push_back({std::string(s.text), s.added_id});
  return pieces;
}

AddedToken token(int32_t id, std::string content) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = true;
  return t;
}

TEST(AddedVocabulary, SplitsTextOnAddedTokens) {
  AddedVocabulary added({token(1, "<|im_start|>"), token(2, "<|im_end|>")});
  using V = std::vector<Piece>;
  EXPECT_EQ(split(added, "<|im_start|>user\nhi<|im_end|>"),
            (V{{"<|im_start|>", 1}, {"user\nhi", -1}, {"<|im_end|>", 2}}));
  EXPECT_EQ(split(added, "no tokens <|im_end| here"), (V{{"no tokens <|im_end| here", -1}}));
  EXPECT_EQ(split(added, "<|im_end|><|im_end|>"), (V{{"<|im_end|>", 2}, {"<|im_end|>", 2}}));
}

TEST(AddedVocabulary, PrefersTheLongestTokenAtAPosition) {
  AddedVocabulary added({token(1, "<think>"), token(2, "<think>>"), token(3, "<")});
  using V = std::vector<Piece>;
  EXPECT_EQ(split(added, "a<think>>b<c"),
            (V{{"a", -1}, {"<think>>", 2}, {"b", -1}, {"<", 3}, {"c", -1}}));
}

TEST(AddedVocabulary, StripsWhiteSpaceOnTheSidesItIsAskedTo) {
  AddedToken left = token(1, "[L]");
  left.lstrip = true;
  AddedToken right = token(2, "[R]");
  right.rstrip = true;
  AddedVocabulary added({left, right});
  using V = std::vector<Piece>;
  EXPECT_EQ(split(added, "a \t[L] b"), (V{{"a", -1}, {" \t[L]", 1}, {" b", -1}}));
  EXPECT_EQ(split(added, "a [R]\n b"), (V{{"a ", -1}, {"[R]\n ", 2}, {"b", -1}}));
}

TEST(AddedVocabulary, MatchesSingleWordTokensOnlyAsWholeWords) {
  AddedToken word = token(1, "cat");
  word.single_word = true;
  AddedVocabulary added({word});
  using V = std::vector<Piece>;
  EXPECT_EQ(split(added, "a cat."), (V{{"a ", -1}, {"cat", 1}, {".", -1}}));
  EXPECT_EQ(split(added, "concatenate"), (V{{"concatenate", -1}}));
}

TEST(AddedVocabulary, MatchesNormalizedTokensOnlyInNormalizedText) {
  AddedToken normalized = token(1, "<n>");
  normalized.normalized = true;
  AddedVocabulary added({normalized, token(2, "<r>")});
  using V = std::vector<Piece>;
  EXPECT_EQ(split(added, "<n><r>", false), (V{{"<n>", -1}, {"<r>", 2}}));
  EXPECT_EQ(split(added, "<n><r>", true), (V{{"<n>", 1}, {"<r>", -1}}));
  EXPECT_TRUE(added.has_normalized_tokens());
}

}  // namespace
}  // namespace flashq
