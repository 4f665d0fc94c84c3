// libFuzzer target for the grammar engine's inputs: the first byte picks the language (GBNF, JSON
// Schema, regex), the rest is the text, compiled as a request would be (compile_grammar, mask
// cache entries included) against a vocabulary of the 256 single bytes and an end token. A
// refusal is a kInvalidArgument flashq::Error. What compiles is then matched along a fixed text,
// and at every step each byte token's mask bit must say exactly whether accept_token takes it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "worker/grammar/grammar_compiler.h"
#include "worker/grammar/grammar_matcher.h"

namespace {

using flashq::fuzz::require;
using flashq::fuzz::require_code;
namespace grammar = flashq::grammar;

constexpr std::string_view kText = R"({"a": [1, -2.5e3, "x\"y"], "b": null, "c": true}abc)";

std::shared_ptr<const grammar::TokenTable> byte_tokens() {
  static const auto tokens = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    bytes.emplace_back();
    return std::make_shared<const grammar::TokenTable>(std::move(bytes), std::vector<int32_t>{256});
  }();
  return tokens;
}

// Every byte token's mask bit against accept_token; then the text's next byte, if allowed.
void walk(grammar::GrammarMatcher& matcher) {
  std::vector<uint32_t> mask(byte_tokens()->mask_words());
  for (char c : kText) {
    matcher.fill_mask(mask);
    for (int32_t id = 0; id <= 256; ++id) {
      bool allowed = (mask[id >> 5] >> (id & 31)) & 1;
      bool accepted = matcher.accept_token(id);
      require(allowed == accepted, "a token's mask bit says whether accept_token takes it");
      if (accepted) matcher.rollback(1);
    }
    if (!matcher.accept_bytes(std::string(1, c))) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr grammar::GrammarFormat kFormats[] = {
      grammar::GrammarFormat::kGbnf, grammar::GrammarFormat::kJsonSchema, grammar::GrammarFormat::kRegex};
  grammar::GrammarRequest request{kFormats[data[0] % 3], std::string(reinterpret_cast<const char*>(data) + 1, size - 1), {}};
  try {
    grammar::GrammarMatcher matcher(grammar::compile_grammar(request, byte_tokens()));
    walk(matcher);
  } catch (const flashq::Error& e) {
    require_code(e, flashq::ErrorCode::kInvalidArgument);
  }
  return 0;
}
