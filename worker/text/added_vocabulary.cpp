#include "worker/text/added_vocabulary.h"

#include <algorithm>

#include <utf8proc.h>

#include "worker/text/utf8.h"

namespace flashq {
namespace {

bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// A character of a regex word (\w): letters, marks, digits and connector punctuation.
bool is_word_character(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
    has_normalized_ = has_normalized_ || tokens_[i].normalized;
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [this](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

AddedVocabulary::Match AddedVocabulary::find_at(std::string_view text, size_t pos,
                                                bool normalized) const {
  for (size_t index : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    const AddedToken& token = tokens_[index];
    if (token.normalized != normalized) continue;
    if (text.compare(pos, token.content.size(), token.content) != 0) continue;
    size_t end = pos + token.content.size();
    if (token.single_word) {
      size_t before = pos;
      size_t after = end;
      if (pos > 0 && is_word_character(previous_code_point(text, before))) continue;
      if (end < text.size() && is_word_character(next_code_point(text, after))) continue;
    }
    return {pos, end, &token};
  }
  return {};
}

void AddedVocabulary::split(std::string_view text, bool normalized,
                            std::vector<TextSegment>& segments) const {
  size_t plain_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    Match match = find_at(text, pos, normalized);
    if (match.token == nullptr) {
      ++pos;
      continue;
    }
    const AddedToken* token = match.token;
    size_t plain_end = match.begin;
    if (token->lstrip) {
      size_t before = plain_end;
      while (before > plain_start && is_white_space(previous_code_point(text, before))) {
        plain_end = before;
      }
    }
    if (token->rstrip) {
      size_t after = match.end;
      while (after < text.size() && is_white_space(next_code_point(text, after))) {
        match.end = after;
      }
    }
    if (plain_end > plain_start) {
      segments.push_back({text.substr(plain_start, plain_end - plain_start), -1});
    }
    segments.push_back({text.substr(plain_end, match.end - plain_end), token->id});
    plain_start = pos = match.end;
  }
  if (plain_start < text.size()) segments.push_back({text.substr(plain_start), -1});
}

}  // namespace flashq
