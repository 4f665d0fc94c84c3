#include "worker/text/bpe_model.h"

#include <gtest/gtest.h>

#include "shared/error.h"

namespace flashq {
namespace {

std::vector<int32_t> encode(const BpeModel& model, std::string_view word) {
  std::vector<int32_t> ids;
  model.encode_word(word, ids);
  return ids;
}

std::unordered_map<std::string, int32_t> small_vocab() {
  return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}};
}

TEST(BpeModel, MergesTheLowestRankedPairFirst) {
  BpeModel bc_first(small_vocab(), {{"b", "c"}, {"a", "b"}, {"a", "bc"}}, {});
  EXPECT_EQ(encode(bc_first, "abc"), (std::vector<int32_t>{5}));
  BpeModel ab_first(small_vocab(), {{"a", "b"}, {"b", "c"}}, {});
  EXPECT_EQ(encode(ab_first, "abc"), (std::vector<int32_t>{3, 2}));
}

TEST(BpeModel, MergesTheLeftmostOfEqualPairsFirst) {
  BpeModel model(small_vocab(), {{"a", "a"}}, {});
  EXPECT_EQ(encode(model, "aaa"), (std::vector<int32_t>{6, 0}));
  EXPECT_EQ(encode(model, "aaaa"), (std::vector<int32_t>{6, 6}));
}

TEST(BpeModel, EncodesTheSameWordTheSameWayFromItsCache) {
  BpeModel model(small_vocab(), {{"a", "b"}, {"ab", "c"}}, {});
  EXPECT_EQ(encode(model, "abcab"), (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(encode(model, "abcab"), (std::vector<int32_t>{5, 3}));
}

TEST(BpeModel, UsesTheUnknownTokenForCharactersOutsideTheVocabulary) {
  auto vocab = small_vocab();
  vocab["<unk>"] = 7;
  BpeOptions options;
  options.unk_token = "<unk>";
  BpeModel model(vocab, {}, options);
  EXPECT_EQ(encode(model, "axxb"), (std::vector<int32_t>{0, 7, 7, 1}));
  options.fuse_unk = true;
  BpeModel fused(vocab, {}, options);
  EXPECT_EQ(encode(fused, "axxb"), (std::vector<int32_t>{0, 7, 1}));
  BpeModel without_unk(small_vocab(), {}, {});
  EXPECT_EQ(encode(without_unk, "axb"), (std::vector<int32_t>{0, 1}));
}

TEST(BpeModel, TakesVocabularyWordsWholeWhenIgnoringMerges) {
  BpeOptions options;
  options.ignore_merges = true;
  BpeModel model(small_vocab(), {}, options);
  EXPECT_EQ(encode(model, "abc"), (std::vector<int32_t>{5}));
}

TEST(BpeModel, RefusesMergesOfUnknownTokens) {
  try {
    BpeModel model(small_vocab(), {{"a", "b"}, {"c", "zz"}}, {});
    ADD_FAILURE() << "accepted a merge of an unknown token";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadTokenizer);
    EXPECT_NE(std::string(e.what()).find("model.merges[1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"zz\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashq
