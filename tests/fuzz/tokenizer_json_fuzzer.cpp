// libFuzzer target for tokenizer.json: an input is the text of the file, read as the worker reads
// it (parse_tokenizer_json) and built into the byte-level BPE tokenizer (regexes compiled, merges
// ranked, decode tables sized), which then encodes and decodes a short fixed text. A refusal to
// load is a kBadTokenizer or kUnsupported flashq::Error; anything else escaping (a nlohmann or
// PCRE2 failure, a sanitizer report) crashes.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "worker/text/bpe_tokenizer.h"
#include "worker/text/tokenizer_json.h"

namespace {

using flashq::fuzz::require;

const std::string kLabel = "fuzz/tokenizer.json";

// Words, digits, punctuation, an added-token look-alike, a non-ASCII letter and a stray byte.
constexpr std::string_view kText = "Hello, world! 42 <|im_start|>caf\xc3\xa9\n\t \xff";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<flashq::ByteLevelBpeTokenizer> tokenizer;
  try {
    tokenizer = std::make_unique<flashq::ByteLevelBpeTokenizer>(flashq::parse_tokenizer_json(std::move(text), kLabel));
  } catch (const flashq::Error& e) {
    require(e.code() == flashq::ErrorCode::kBadTokenizer || e.code() == flashq::ErrorCode::kUnsupported,
            "a refused tokenizer.json is kBadTokenizer or kUnsupported");
    return 0;
  }
  // A loaded tokenizer may still refuse a text (a typed error: its regex gives up, its vocabulary
  // cannot cover a byte); whatever it encodes, it decodes, since every id it hands out is its own.
  std::vector<int32_t> ids;
  try {
    ids = tokenizer->encode(kText);
  } catch (const flashq::Error&) {
    return 0;
  }
  for (int32_t id : ids) require(id >= 0 && id < tokenizer->vocab_size(), "encoded ids are inside the vocabulary");
  (void)tokenizer->decode(ids);
  (void)tokenizer->decode(ids, /*skip_special_tokens=*/true);
  return 0;
}
