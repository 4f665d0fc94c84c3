#include "worker/tokenizer/unicode_normalizer.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "shared/error.h"

namespace flashq {
namespace {

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

int utf8proc_options(NormalizationForm form) {
  switch (form) {
    case NormalizationForm::kNFC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case NormalizationForm::kNFD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case NormalizationForm::kNFKC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case NormalizationForm::kNFKD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
}

}  // namespace

std::string normalize_unicode(std::string_view text, NormalizationForm form) {
  // ASCII is unchanged by every form; most text of code and English takes this path.
  if (is_ascii(text)) return std::string(text);
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

}  // namespace flashq
