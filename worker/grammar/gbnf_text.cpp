#include "worker/grammar/gbnf_text.h"

#include <cstdio>

#include "worker/text/utf8.h"

namespace flashq::grammar {
namespace {

// A code point as GBNF writes it in a literal or a class: printable ASCII other than the
// delimiters as itself, everything else as an escape.
std::string escape_code_point(char32_t cp, bool in_class) {
  bool delimiter = cp == '"' || cp == '\\' ||
                   (in_class && (cp == '[' || cp == ']' || cp == '-' || cp == '^'));
  if (cp >= 0x20 && cp < 0x7F && !delimiter) return std::string(1, static_cast<char>(cp));
  if (delimiter) return std::string("\\") + static_cast<char>(cp);
  switch (cp) {  // the short escapes every GBNF reader knows, rather than \xHH
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    default: break;
  }
  char buf[16];
  if (cp <= 0xFF) {
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(cp));
  }
  return buf;
}

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp = next_code_point(text, pos);
    if (cp >= 0x80) {
      append_utf8(out, cp);  // the text's own UTF-8: readable in error messages
    } else {
      out += escape_code_point(cp, false);
    }
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<CodePointRange>& ranges) {
  std::string out = "[";
  for (const auto& [lo, hi] : ranges) {
    out += escape_code_point(lo, true);
    if (hi > lo) out += "-" + escape_code_point(hi, true);
  }
  return out + "]";
}

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// The end of the delimited run (a literal, a class, a repetition) that starts at `pos`, past its
// closing `close`; escapes inside are skipped whole.
size_t skip_delimited(std::string_view text, size_t pos, char close) {
  for (++pos; pos < text.size(); ++pos) {
    if (text[pos] == '\\') {
      ++pos;
    } else if (text[pos] == close) {
      return pos + 1;
    }
  }
  return text.size();
}

}  // namespace

std::string prefix_rule_names(std::string_view gbnf, std::string_view prefix) {
  std::string out;
  out.reserve(gbnf.size() + gbnf.size() / 4);
  for (size_t pos = 0; pos < gbnf.size();) {
    const char c = gbnf[pos];
    size_t end = pos + 1;
    if (c == '"') {
      end = skip_delimited(gbnf, pos, '"');
    } else if (c == '[') {
      end = skip_delimited(gbnf, pos, ']');
    } else if (c == '{') {
      end = skip_delimited(gbnf, pos, '}');
    } else if (c == '#') {
      end = gbnf.find('\n', pos);
      if (end == std::string_view::npos) end = gbnf.size();
    } else if (is_name_char(c)) {
      while (end < gbnf.size() && is_name_char(gbnf[end])) ++end;
      out += prefix;
    }
    out += gbnf.substr(pos, end - pos);
    pos = end;
  }
  return out;
}

}  // namespace flashq::grammar
