// The golden cases of tests/golden/<model>_tokenizer_golden.jsonl (made by
// tests/golden/make_tokenizer_golden.js with Hugging Face tokenizers) and the paths of the real
// tokenizer.json files (Qwen3, Llama 3.1, gpt-oss's o200k_harmony) that scripts/setup installs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "worker/text/tokenizer.h"

namespace flashq::test {

struct GoldenEncode {
  size_t line = 0;
  std::string input;  // may be invalid UTF-8 (cases written as bytes_hex)
  bool add_special_tokens = false;  // ids include what the post-processor adds
  std::vector<int32_t> ids;
};

struct GoldenDecode {
  size_t line = 0;
  std::vector<int32_t> ids;
  bool skip_special_tokens = false;
  std::string text;
};

struct GoldenSet {
  std::vector<GoldenEncode> encodes;
  std::vector<GoldenDecode> decodes;
};

// The repository root: $FLASHQ_SOURCE_DIR, else the working directory.
std::filesystem::path source_dir();
std::filesystem::path qwen3_tokenizer_dir();
GoldenSet read_qwen3_golden_set();
std::filesystem::path llama3_1_tokenizer_dir();
GoldenSet read_llama3_1_golden_set();
std::filesystem::path gptoss_tokenizer_dir();
GoldenSet read_gptoss_golden_set();

// `text` as a JSON string, for failure messages that show every character.
std::string quoted(const std::string& text);

// The checks every golden set gets. Each reports the first few cases that differ (a test failure
// naming the golden line, what came out and what was expected) and returns how many differ.
// `encode` produces a case's ids (with the post-processor's special tokens when the case asks).
int count_encode_mismatches(const GoldenSet& set, const std::function<std::vector<int32_t>(const GoldenEncode&)>& encode);
int count_decode_mismatches(const Tokenizer& tokenizer, const GoldenSet& set);
// Feeding ids one at a time, every emitted prefix is final (a prefix of the whole decode) and the
// stream plus flush() is exactly decode(all ids); a difference counts once per case.
void expect_streams_like_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                bool skip_special_tokens, size_t line, int& mismatches);

}  // namespace flashq::test
