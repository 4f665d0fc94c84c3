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

}  // namespace flashq::grammar
