// The NFC normalizer of tokenizer.json (Qwen's) against Hugging Face tokenizers' own, on strings
// built around every combining mark and every character with a canonical decomposition
// (tests/golden/nfc_golden.json, written by tests/golden/make_nfc_golden.js). Its tables are
// Unicode 9.0: later marks are never reordered or composed, and utf8proc's must not be either.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/tokenizer/qwen3_golden.h"
#include "worker/text/unicode_normalizer.h"

namespace flashq {
namespace {

constexpr int kMaxReported = 10;

nlohmann::json read_golden() {
  std::filesystem::path path = test::source_dir() / "tests/golden/nfc_golden.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open the golden set");
  return nlohmann::json::parse(in);
}

TEST(NfcGolden, NormalizesLikeHuggingFace) {
  const nlohmann::json golden = read_golden();
  const nlohmann::json& cases = golden.at("cases");
  ASSERT_GE(cases.size(), 30000u);
  int mismatches = 0;
  for (const nlohmann::json& c : cases) {
    const std::string text = c.at(0).get<std::string>();
    const std::string expected = c.at(1).get<std::string>();
    const std::string got = normalize_unicode(text, NormalizationForm::kNFC);
    if (got == expected) continue;
    if (++mismatches <= kMaxReported) {
      ADD_FAILURE() << "NFC(" << test::quoted(text) << ")\n  got      " << test::quoted(got) << "\n  expected "
                    << test::quoted(expected);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size();
}

// U+1DF6 (Unicode 10.0, class 232) is no mark to Hugging Face: nothing moves across it, and the
// e and U+0301 before it still compose.
TEST(NfcGolden, LeavesAMarkAssignedAfterUnicode9WhereItIs) {
  EXPECT_EQ(normalize_unicode("e\u0301\u1DF6\u0334", NormalizationForm::kNFC), "\u00e9\u1DF6\u0334");
  EXPECT_EQ(normalize_unicode("a\u1DF6\u0301", NormalizationForm::kNFC), "a\u1DF6\u0301");
}

}  // namespace
}  // namespace flashq
