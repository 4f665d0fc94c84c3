// Split patterns' \p{...} classes and \s hold exactly the code points that Hugging Face tokenizers'
// Oniguruma puts in them (tests/golden/oniguruma_categories.json, written by
// tests/golden/make_oniguruma_categories_golden.js), on every code point: PCRE2's own Unicode
// tables plus worker/text/oniguruma_categories.cpp's additions.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "tests/tokenizer/qwen3_golden.h"
#include "worker/text/split_pattern.h"
#include "worker/text/utf8.h"

namespace flashq {
namespace {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;  // sorted, disjoint, inclusive

constexpr int kMaxReportedCodePoints = 12;

nlohmann::json read_golden() {
  std::filesystem::path path = test::source_dir() / "tests/golden/oniguruma_categories.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open the golden set");
  return nlohmann::json::parse(in);
}

// Every code point but the surrogates, in order.
const std::string& all_code_points() {
  static const std::string text = [] {
    std::string out;
    for (char32_t c = 0; c <= 0x10FFFF; ++c) {
      if (c < 0xD800 || c > 0xDFFF) append_utf8(out, c);
    }
    return out;
  }();
  return text;
}

void add_member(Ranges& ranges, char32_t c) {
  if (!ranges.empty() && ranges.back().second + 1 == c) {
    ranges.back().second = c;
  } else {
    ranges.emplace_back(c, c);
  }
}

// The members of `regex` as a split pattern sees them: `regex+` splits the text into runs of
// members and runs of others, alternately, starting with U+0000's.
Ranges members_by_split_pattern(const std::string& regex, bool zero_is_member) {
  SplitPattern pattern(regex + "+");
  std::vector<std::string_view> pieces;
  pattern.split_isolated(all_code_points(), pieces);
  Ranges ranges;
  for (size_t i = zero_is_member ? 0 : 1; i < pieces.size(); i += 2) {
    for (size_t pos = 0; pos < pieces[i].size();) add_member(ranges, next_code_point(pieces[i], pos));
  }
  return ranges;
}

Ranges ranges_from_json(const nlohmann::json& list) {
  Ranges ranges;
  for (const nlohmann::json& range : list)
    ranges.emplace_back(range.at(0).get<char32_t>(), range.at(1).get<char32_t>());
  return ranges;
}

bool contains(const Ranges& ranges, char32_t c) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                             [](char32_t value, const std::pair<char32_t, char32_t>& r) { return value < r.first; });
  return it != ranges.begin() && c <= std::prev(it)->second;
}

// The code points in `a` and not in `b`, the first few written as U+XXXX, and how many.
std::string only_in(const Ranges& a, const Ranges& b) {
  std::ostringstream out;
  int count = 0;
  for (const auto& [first, last] : a) {
    for (char32_t c = first; c <= last; ++c) {
      if (contains(b, c)) continue;
      if (++count <= kMaxReportedCodePoints) out << " U+" << std::hex << std::uppercase << static_cast<uint32_t>(c);
    }
  }
  return std::to_string(count) + (count ? ":" + out.str() + (count > kMaxReportedCodePoints ? " ..." : "") : "");
}

TEST(OnigurumaCategories, GoldenSetCoversTheClassesOfTheSplitPatterns) {
  nlohmann::json golden = read_golden();
  for (const char* regex :
       {"\\p{L}", "\\p{Lu}", "\\p{Ll}", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}", "\\p{M}", "\\p{N}", "\\s"}) {
    EXPECT_TRUE(golden.contains(regex)) << regex;
  }
  // Oniguruma's tables are Unicode 16.0: a Tulu-Tigalari letter (16.0) is a letter.
  EXPECT_TRUE(contains(ranges_from_json(golden.at("\\p{L}")), 0x11380));
}

TEST(OnigurumaCategories, SplitPatternClassesHoldWhatOnigurumaHoldsOnEveryCodePoint) {
  nlohmann::json golden = read_golden();
  for (const auto& [regex, list] : golden.items()) {
    const Ranges expected = ranges_from_json(list);
    const Ranges got = members_by_split_pattern(regex, contains(expected, 0));
    EXPECT_EQ(got, expected) << regex << ": code points only Oniguruma holds: " << only_in(expected, got)
                             << "; only the split pattern: " << only_in(got, expected)
                             << " (worker/text/oniguruma_categories.cpp lists what PCRE2 lacks)";
  }
}

// Outside a class \P{L} is the complement of the whole letter set, additions included.
TEST(OnigurumaCategories, NegatedClassLeavesOutTheAddedCodePoints) {
  const Ranges letters = ranges_from_json(read_golden().at("\\p{L}"));
  const Ranges not_letters = members_by_split_pattern("\\P{L}", /*zero_is_member=*/true);
  Ranges letters_by_complement;
  char32_t next = 0;
  for (const auto& [first, last] : not_letters) {
    for (char32_t c = next; c < first; ++c) {
      if (c < 0xD800 || c > 0xDFFF) add_member(letters_by_complement, c);
    }
    next = last + 1;
  }
  for (char32_t c = next; c <= 0x10FFFF; ++c) add_member(letters_by_complement, c);
  EXPECT_EQ(letters_by_complement, letters)
      << "only Oniguruma: " << only_in(letters, letters_by_complement)
      << "; only \\P{L}'s complement: " << only_in(letters_by_complement, letters);
}

}  // namespace
}  // namespace flashq
