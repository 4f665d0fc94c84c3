#include "worker/tokenizer/split_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <optional>

#include "shared/error.h"
#include "worker/tokenizer/oniguruma_categories.h"
#include "worker/tokenizer/utf8.h"

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
  std::string_view additions;
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
  std::optional<std::string_view> additions = oniguruma_category_additions(name);
  if (!additions) return std::nullopt;
  return CategoryClass{name, *additions, pattern[pos + 1] == 'P', close + 1};
}

}  // namespace

std::string translate_oniguruma_pattern(std::string_view pattern) {
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
        const std::string items = "\\p{" + std::string(category->name) + "}" + std::string(category->additions);
        if (in_class) out += items;
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

SplitPattern::SplitPattern(const std::string& oniguruma_pattern) {
  std::string pattern = translate_oniguruma_pattern(oniguruma_pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    throw Error(ErrorCode::kBadTokenizer, "Split regex " + oniguruma_pattern +
                                              " does not compile (offset " +
                                              std::to_string(error_offset) +
                                              "): " + pcre2_message(error_code));
  }
  // Without JIT support pcre2_match falls back to the interpreter; the result is the same.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

SplitPattern::~SplitPattern() {
  if (code_ != nullptr) pcre2_code_free(as_code(code_));
}

SplitPattern::SplitPattern(SplitPattern&& other) noexcept : code_(other.code_) {
  other.code_ = nullptr;
}

void SplitPattern::split_isolated(std::string_view text,
                                  std::vector<std::string_view>& pieces) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(as_code(code_), nullptr), &pcre2_match_data_free);
  if (!match) throw Error(ErrorCode::kInternal, "out of memory for a regex match");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t piece_start = 0;
  size_t search_from = 0;
  while (search_from < text.size()) {
    uint32_t options = PCRE2_NO_UTF_CHECK;
    int rc = pcre2_match(as_code(code_), subject, text.size(), search_from, options, match.get(),
                         nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The interpreter keeps its backtracking state on the heap and so copes with long inputs.
      rc = pcre2_match(as_code(code_), subject, text.size(), search_from,
                       options | PCRE2_NO_JIT, match.get(), nullptr);
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
