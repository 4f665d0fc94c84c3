#include "worker/text/split_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>
#include <span>

#include "shared/error.h"
#include "worker/text/oniguruma_categories.h"
#include "worker/text/utf8.h"

namespace flashq {
namespace {

// Unicode White_Space, Oniguruma's \s.
constexpr std::string_view kWhiteSpaceRanges =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

pcre2_code* as_code(void* code) { return static_cast<pcre2_code*>(code); }

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// A \p{NAME} or \P{NAME} at `pos` (the backslash) whose category oniguruma_categories covers.
struct CategoryClass {
  std::string_view name;
  std::span<const CodePointRange> additions;
  bool negated = false;
  size_t end = 0;  // index just after the closing brace
};

std::optional<CategoryClass> read_category_class(std::string_view pattern, size_t pos) {
  if (pos + 3 >= pattern.size() || (pattern[pos + 1] != 'p' && pattern[pos + 1] != 'P') || pattern[pos + 2] != '{') {
    return std::nullopt;
  }
  size_t close = pattern.find('}', pos + 3);
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view name = pattern.substr(pos + 3, close - pos - 3);
  std::optional<std::span<const CodePointRange>> additions = oniguruma_category_additions(name);
  if (!additions) return std::nullopt;
  return CategoryClass{name, *additions, pattern[pos + 1] == 'P', close + 1};
}

std::string class_items(std::span<const CodePointRange> ranges) {
  std::string out;
  char buffer[40];
  for (const CodePointRange& r : ranges) {
    int n = r.first == r.last
                ? std::snprintf(buffer, sizeof buffer, "\\x{%X}", static_cast<unsigned>(r.first))
                : std::snprintf(buffer, sizeof buffer, "\\x{%X}-\\x{%X}", static_cast<unsigned>(r.first),
                                static_cast<unsigned>(r.last));
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// Sorts and merges overlapping or touching ranges.
std::vector<CodePointRange> merged(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.first < b.first; });
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.first <= out.back().last + 1) {
      out.back().last = std::max(out.back().last, r.last);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

pcre2_code* compile(const std::string& pattern, const std::string& oniguruma_pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    throw Error(ErrorCode::kBadTokenizer, "Split regex " + oniguruma_pattern + " does not compile (offset " +
                                              std::to_string(error_offset) + "): " + pcre2_message(error_code));
  }
  // Without JIT support pcre2_match falls back to the interpreter; the result is the same.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return code;
}

}  // namespace

std::string translate_oniguruma_pattern(std::string_view pattern, bool with_unicode_additions,
                                        std::vector<CodePointRange>* additions_used) {
  std::string out;
  bool in_class = false;
  size_t class_start = 0;  // index just after '[' or '[^', where a ']' is still literal
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceRanges) : "[" + std::string(kWhiteSpaceRanges) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceRanges) + "]";
      } else if (std::optional<CategoryClass> category = read_category_class(pattern, i - 1);
                 category && !(category->negated && in_class)) {
        const std::string items = "\\p{" + std::string(category->name) + "}" +
                                  (with_unicode_additions ? class_items(category->additions) : std::string());
        if (additions_used != nullptr) {
          additions_used->insert(additions_used->end(), category->additions.begin(), category->additions.end());
        }
        if (in_class || (!with_unicode_additions && !category->negated)) out += items;
        else out += (category->negated ? "[^" : "[") + items + "]";
        i = category->end - 1;
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      class_start = i + 1;
      continue;
    }
    if (in_class && c == ']' && i != class_start) in_class = false;
    out.push_back(c);
  }
  return out;
}

std::string translate_oniguruma_pattern(std::string_view pattern) { return translate_oniguruma_pattern(pattern, true); }

SplitPattern::SplitPattern(const std::string& oniguruma_pattern) {
  std::vector<CodePointRange> additions;
  const std::string full = translate_oniguruma_pattern(oniguruma_pattern, true, &additions);
  // Held until the plain pattern compiled too: a constructor that throws runs no destructor.
  std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code(compile(full, oniguruma_pattern), &pcre2_code_free);
  additions_ = merged(std::move(additions));
  if (!additions_.empty()) plain_code_ = compile(translate_oniguruma_pattern(oniguruma_pattern, false), oniguruma_pattern);
  code_ = code.release();
}

SplitPattern::~SplitPattern() {
  if (code_ != nullptr) pcre2_code_free(as_code(code_));
  if (plain_code_ != nullptr) pcre2_code_free(as_code(plain_code_));
}

SplitPattern::SplitPattern(SplitPattern&& other) noexcept
    : code_(other.code_), plain_code_(other.plain_code_), additions_(std::move(other.additions_)) {
  other.code_ = nullptr;
  other.plain_code_ = nullptr;
}

bool SplitPattern::holds_added_code_point(std::string_view text) const {
  if (additions_.empty()) return false;
  const char32_t lowest = additions_.front().first;
  for (size_t pos = 0; pos < text.size();) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80) {
      ++pos;
      continue;
    }
    if (lead < 0xE0 && lowest >= 0x800) {  // a two-byte sequence: below U+0800
      pos += 2;
      continue;
    }
    const char32_t c = next_code_point(text, pos);
    if (c < lowest) continue;
    auto it = std::upper_bound(additions_.begin(), additions_.end(), c,
                               [](char32_t value, const CodePointRange& r) { return value < r.first; });
    if (it != additions_.begin() && c <= std::prev(it)->last) return true;
  }
  return false;
}

void SplitPattern::split_isolated(std::string_view text,
                                  std::vector<std::string_view>& pieces) const {
  // Both patterns split text without an added code point alike; the plain one is the faster
  // (PCRE2 matches a bare \p{L} by a table lookup, a class of \p{L} and ranges item by item).
  pcre2_code* code = as_code(plain_code_ != nullptr && !holds_added_code_point(text) ? plain_code_ : code_);
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  if (!match) throw Error(ErrorCode::kInternal, "out of memory for a regex match");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t piece_start = 0;
  size_t search_from = 0;
  while (search_from < text.size()) {
    uint32_t options = PCRE2_NO_UTF_CHECK;
    int rc = pcre2_match(code, subject, text.size(), search_from, options, match.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The interpreter keeps its backtracking state on the heap and so copes with long inputs.
      rc = pcre2_match(code, subject, text.size(), search_from, options | PCRE2_NO_JIT, match.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error(ErrorCode::kInternal, "Split regex failed: " + pcre2_message(rc));
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    size_t begin = ovector[0];
    size_t end = ovector[1];
    if (end == begin) {
      // An empty match splits nothing; step over one character and search again.
      if (begin >= text.size()) break;
      size_t length = utf8_sequence_length(text, begin);
      search_from = begin + (length == 0 ? 1 : length);
      continue;
    }
    if (begin > piece_start) pieces.push_back(text.substr(piece_start, begin - piece_start));
    pieces.push_back(text.substr(begin, end - begin));
    piece_start = search_from = end;
  }
  if (piece_start < text.size()) pieces.push_back(text.substr(piece_start));
}

}  // namespace flashq
