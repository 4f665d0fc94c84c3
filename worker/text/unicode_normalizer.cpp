#include "worker/text/unicode_normalizer.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>

#include <utf8proc.h>

#include "shared/error.h"
#include "worker/text/utf8.h"

namespace flashq {
namespace {

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// Code points that Hugging Face tokenizers' normalizers do not know: its tables are Unicode 9.0,
// and to it these later combining marks and compositions are plain starters, never reordered,
// decomposed or composed. Written from tests/golden/nfc_golden.json
// (tests/golden/make_nfc_golden.js asks Hugging Face itself); sorted.
constexpr char32_t kUnknownToHuggingFace[] = {
    0x7FD, 0x897, 0x898, 0x899, 0x89A, 0x89B, 0x89C, 0x89D, 0x89E, 0x89F, 0x8CA, 0x8CB, 0x8CC,
    0x8CD, 0x8CE, 0x8CF, 0x8D0, 0x8D1, 0x8D2, 0x8D3, 0x9FE, 0xC3C, 0xD3B, 0xD3C, 0xEBA, 0x1715,
    0x1ABF, 0x1AC0, 0x1AC1, 0x1AC2, 0x1AC3, 0x1AC4, 0x1AC5, 0x1AC6, 0x1AC7, 0x1AC8, 0x1AC9, 0x1ACA,
    0x1ACB, 0x1ACC, 0x1ACD, 0x1ACE, 0x1ACF, 0x1AD0, 0x1AD1, 0x1AD2, 0x1AD3, 0x1AD4, 0x1AD5, 0x1AD6,
    0x1AD7, 0x1AD8, 0x1AD9, 0x1ADA, 0x1ADB, 0x1ADC, 0x1ADD, 0x1AE0, 0x1AE1, 0x1AE2, 0x1AE3, 0x1AE4,
    0x1AE5, 0x1AE6, 0x1AE7, 0x1AE8, 0x1AE9, 0x1AEA, 0x1AEB, 0x1DF6, 0x1DF7, 0x1DF8, 0x1DF9, 0x1DFA,
    0xA82C, 0x105C9, 0x105D2, 0x105DA, 0x105E4, 0x10D24, 0x10D25, 0x10D26, 0x10D27, 0x10D69,
    0x10D6A, 0x10D6B, 0x10D6C, 0x10D6D, 0x10EAB, 0x10EAC, 0x10EFA, 0x10EFB, 0x10EFD, 0x10EFE,
    0x10EFF, 0x10F46, 0x10F47, 0x10F48, 0x10F49, 0x10F4A, 0x10F4B, 0x10F4C, 0x10F4D, 0x10F4E,
    0x10F4F, 0x10F50, 0x10F82, 0x10F83, 0x10F84, 0x10F85, 0x11070, 0x1133B, 0x11382, 0x11383,
    0x11384, 0x11385, 0x1138B, 0x1138E, 0x11390, 0x11391, 0x113B8, 0x113BB, 0x113C2, 0x113C5,
    0x113C7, 0x113C8, 0x113C9, 0x113CE, 0x113CF, 0x113D0, 0x1145E, 0x11839, 0x1183A, 0x11930,
    0x11935, 0x11938, 0x1193D, 0x1193E, 0x11943, 0x119E0, 0x11A34, 0x11A47, 0x11A99, 0x11D42,
    0x11D44, 0x11D45, 0x11D97, 0x11F41, 0x11F42, 0x1611E, 0x1611F, 0x16120, 0x16121, 0x16122,
    0x16123, 0x16124, 0x16125, 0x16126, 0x16127, 0x16128, 0x16129, 0x1612F, 0x16D63, 0x16D67,
    0x16D68, 0x16D69, 0x16D6A, 0x16FF0, 0x16FF1, 0x1E08F, 0x1E130, 0x1E131, 0x1E132, 0x1E133,
    0x1E134, 0x1E135, 0x1E136, 0x1E2AE, 0x1E2EC, 0x1E2ED, 0x1E2EE, 0x1E2EF, 0x1E4EC, 0x1E4ED,
    0x1E4EE, 0x1E4EF, 0x1E5EE, 0x1E5EF, 0x1E6E3, 0x1E6E6, 0x1E6EE, 0x1E6EF, 0x1E6F5,
};

bool unknown_to_hugging_face(char32_t c) {
  return c >= kUnknownToHuggingFace[0] &&
         std::binary_search(std::begin(kUnknownToHuggingFace), std::end(kUnknownToHuggingFace), c);
}

std::string map_with_utf8proc(std::string_view text, NormalizationForm form);

int utf8proc_options(NormalizationForm form) {
  switch (form) {
    case NormalizationForm::kNFC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case NormalizationForm::kNFD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case NormalizationForm::kNFKC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case NormalizationForm::kNFKD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
}

std::string map_with_utf8proc(std::string_view text, NormalizationForm form) {
  utf8proc_uint8_t* mapped = nullptr;
  // An explicit length (no UTF8PROC_NULLTERM) keeps NUL characters inside the text.
  utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                         static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                         static_cast<utf8proc_option_t>(utf8proc_options(form)));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  if (length < 0) {
    throw Error(ErrorCode::kInternal,
                std::string("unicode normalization failed: ") + utf8proc_errmsg(length));
  }
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
}

}  // namespace

std::string normalize_unicode(std::string_view text, NormalizationForm form) {
  // ASCII is unchanged by every form; most text of code and English takes this path.
  if (is_ascii(text)) return std::string(text);
  // A code point Hugging Face does not know stands alone: nothing before it reorders or composes
  // with anything after it, and it stays as it is. So the stretches between such code points
  // are normalized each on their own.
  std::string out;
  size_t stretch_begin = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t begin = pos;
    if (!unknown_to_hugging_face(next_code_point(text, pos))) continue;
    if (begin > stretch_begin) out += map_with_utf8proc(text.substr(stretch_begin, begin - stretch_begin), form);
    out.append(text.substr(begin, pos - begin));
    stretch_begin = pos;
  }
  if (stretch_begin == 0) return map_with_utf8proc(text, form);
  if (stretch_begin < text.size()) out += map_with_utf8proc(text.substr(stretch_begin), form);
  return out;
}

}  // namespace flashq
