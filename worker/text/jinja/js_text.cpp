#include "worker/text/jinja/js_text.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace flashq::jinja {
namespace {

// Decodes the code point at `pos` and advances; an invalid byte is U+FFFD of length one.
char32_t next_code_point(std::string_view s, size_t& pos) {
  const unsigned char c = static_cast<unsigned char>(s[pos]);
  int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || pos + len > s.size()) {
    ++pos;
    return 0xfffd;
  }
  char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (int i = 1; i < len; ++i) {
    const unsigned char t = static_cast<unsigned char>(s[pos + i]);
    if ((t >> 6) != 0x2) {
      ++pos;
      return 0xfffd;
    }
    cp = (cp << 6) | (t & 0x3f);
  }
  pos += len;
  return cp;
}

bool is_js_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0a:
    case 0x0b:
    case 0x0c:
    case 0x0d:
    case 0x20:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000:
    case 0xfeff:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200a;
  }
}

bool is_ascii_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t cp = next_code_point(s, pos);
    if (cp >= 0x10000) {
      out.push_back(static_cast<char16_t>(0xd800 + ((cp - 0x10000) >> 10)));
      out.push_back(static_cast<char16_t>(0xdc00 + ((cp - 0x10000) & 0x3ff)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

template <typename MapFn>
std::string map_code_points(std::string_view text, MapFn map) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(map(static_cast<char32_t>(c))));
      ++pos;
    } else {
      append_utf8(out, map(next_code_point(text, pos)));
    }
  }
  return out;
}

// Skips the StrDecimalLiteral prefix of JavaScript's number grammar; returns its length.
size_t decimal_prefix(std::string_view s, bool allow_exponent) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (s.substr(i, 8) == "Infinity") return i + 8;
  const size_t digits_start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  size_t mantissa_digits = i - digits_start;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    mantissa_digits += j - i - 1;
    if (mantissa_digits > 0) i = j;
  }
  if (mantissa_digits == 0) return 0;
  if (allow_exponent && i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    const size_t exp_start = j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j > exp_start) i = j;
  }
  return i;
}

double parse_prefix(std::string_view s) {
  std::string text(s);
  if (text.find("Infinity") != std::string::npos) return text[0] == '-' ? -INFINITY : INFINITY;
  return std::strtod(text.c_str(), nullptr);
}

// Characters whose JavaScript case mapping is not one code point for one (SpecialCasing.txt:
// "ß" upper-cases to "SS", "İ" lower-cases to "i" and a combining dot, a final "Σ" to "ς").
bool has_full_upper_mapping(char32_t c) {
  return c == 0xdf || c == 0x149 || c == 0x1f0 || c == 0x390 || c == 0x3b0 || c == 0x587 ||
         (c >= 0x1e96 && c <= 0x1e9a) || (c >= 0x1f50 && c <= 0x1f56 && c % 2 == 0) || (c >= 0x1f80 && c <= 0x1faf) ||
         (c >= 0x1fb2 && c <= 0x1fb7) || c == 0x1fbc || (c >= 0x1fc2 && c <= 0x1fc7) || c == 0x1fcc ||
         (c >= 0x1fd2 && c <= 0x1fd7) || (c >= 0x1fe2 && c <= 0x1fe7) || (c >= 0x1ff2 && c <= 0x1ff7) || c == 0x1ffc ||
         (c >= 0xfb00 && c <= 0xfb06) || (c >= 0xfb13 && c <= 0xfb17);
}
bool has_full_lower_mapping(char32_t c) { return c == 0x130 || c == 0x3a3; }

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

size_t js_space_length(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  size_t next = pos;
  const char32_t cp = next_code_point(text, next);
  return is_js_space(cp) ? next - pos : 0;
}

size_t js_space_length_before(std::string_view text, size_t end) {
  size_t start = end;
  while (start > 0 && (static_cast<unsigned char>(text[start - 1]) & 0xc0) == 0x80 && end - start < 3) --start;
  if (start > 0) --start;
  return js_space_length(text, start) == end - start ? end - start : 0;
}

std::string_view js_trim_start(std::string_view text) {
  size_t pos = 0;
  while (size_t n = js_space_length(text, pos)) pos += n;
  return text.substr(pos);
}

std::string_view js_trim_end(std::string_view text) {
  size_t end = text.size();
  while (size_t n = js_space_length_before(text, end)) end -= n;
  return text.substr(0, end);
}

std::string_view js_trim(std::string_view text) { return js_trim_end(js_trim_start(text)); }

size_t utf16_length(std::string_view text) {
  size_t n = 0;
  for (size_t pos = 0; pos < text.size();) n += next_code_point(text, pos) >= 0x10000 ? 2 : 1;
  return n;
}

std::optional<std::string> utf16_unit_at(std::string_view text, long long index) {
  const std::u16string units = to_utf16(text);
  const long long size = static_cast<long long>(units.size());
  if (index < 0) index += size;
  if (index < 0 || index >= size) return std::nullopt;
  const char16_t unit = units[static_cast<size_t>(index)];
  std::string out;
  append_utf8(out, unit >= 0xd800 && unit <= 0xdfff ? 0xfffd : unit);
  return out;
}

std::vector<std::string> code_points(std::string_view text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    next_code_point(text, pos);
    out.emplace_back(text.substr(start, pos - start));
  }
  return out;
}

int compare_utf16(std::string_view a, std::string_view b) {
  const int c = to_utf16(a).compare(to_utf16(b));
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

std::optional<std::string> js_upper_simple(std::string_view text) {
  bool simple = true;
  std::string out = map_code_points(text, [&simple](char32_t c) -> char32_t {
    if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
    if (has_full_upper_mapping(c)) simple = false;
    return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
  });
  if (!simple) return std::nullopt;
  return out;
}

std::optional<std::string> js_lower_simple(std::string_view text) {
  bool simple = true;
  std::string out = map_code_points(text, [&simple](char32_t c) -> char32_t {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (has_full_lower_mapping(c)) simple = false;
    return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
  });
  if (!simple) return std::nullopt;
  return out;
}

std::string js_title(std::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_ascii_word(out[i]) && (i == 0 || !is_ascii_word(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z') {
      out[i] = static_cast<char>(out[i] - 32);
    }
  }
  return out;
}

std::optional<std::string> js_capitalize_simple(std::string_view text) {
  if (text.empty()) return std::string();
  size_t pos = 0;
  const char32_t first = next_code_point(text, pos);
  if (first >= 0x10000) return std::string(text);  // charAt(0) is half a surrogate pair
  std::optional<std::string> head = js_upper_simple(text.substr(0, pos));
  if (!head) return std::nullopt;
  return *head + std::string(text.substr(pos));
}

std::string js_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  if (value == 0) return "0";
  std::string sign = value < 0 ? "-" : "";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, std::fabs(value), std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<size_t>(result.ptr - buffer));
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // position of the decimal point
  if (k <= n && n <= 21) return sign + digits + std::string(static_cast<size_t>(n - k), '0');
  if (0 < n && n <= 21)
    return sign + digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  if (-6 < n && n <= 0) return sign + "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  const std::string exp = (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
  if (k == 1) return sign + digits + "e" + exp;
  return sign + digits.substr(0, 1) + "." + digits.substr(1) + "e" + exp;
}

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (size_t pos = 0; pos < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    if (c >= 0x80) {
      const size_t start = pos;
      const char32_t cp = next_code_point(text, pos);
      if (cp == 0xfffd && pos - start == 1) {
        out += "\xef\xbf\xbd";
      } else {
        out.append(text.substr(start, pos - start));
      }
      continue;
    }
    ++pos;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", c);
          out += escape;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string json_ascii_escape(std::string_view json) {
  std::string out;
  for (char16_t unit : to_utf16(json)) {
    if (unit >= 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(unit));
      out += escape;
    } else {
      out.push_back(static_cast<char>(unit));
    }
  }
  return out;
}

std::optional<double> js_parse_int(std::string_view text) {
  std::string_view s = js_trim_start(text);
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) ++i;
  const size_t start = i;
  double value = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') value = value * 10 + (s[i++] - '0');
  if (i == start) return std::nullopt;
  if (i - start > 15) value = std::strtod(std::string(s.substr(start, i - start)).c_str(), nullptr);
  return negative ? -value : value;
}

std::optional<double> js_parse_float(std::string_view text) {
  std::string_view s = js_trim_start(text);
  const size_t n = decimal_prefix(s, true);
  if (n == 0) return std::nullopt;
  return parse_prefix(s.substr(0, n));
}

std::optional<double> js_to_number(std::string_view text) {
  std::string_view s = js_trim(text);
  if (s.empty()) return 0.0;
  if (s.size() > 2 && s[0] == '0' &&
      (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B')) {
    const int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
    double value = 0;
    for (char c : s.substr(2)) {
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : 99;
      if (digit >= base) return std::nullopt;
      value = value * base + digit;
    }
    return value;
  }
  const size_t n = decimal_prefix(s, true);
  if (n != s.size()) return std::nullopt;
  return parse_prefix(s);
}

}  // namespace flashq::jinja
