// A small Qwen2-style tokenizer for random test models: the same tokenizer.json shape as Qwen's
// (NFC, the Qwen split regex, byte-level BPE, ChatML special tokens), with merges learned on a
// short embedded English and code text so that every id is reachable and text round-trips.
#pragma once

#include <cstdint>
#include <filesystem>

namespace flashq {

struct TinyTokenizerIds {
  int32_t endoftext;
  int32_t im_start;
  int32_t im_end;
};

// Writes tokenizer.json and tokenizer_config.json into `dir` (created if missing). The vocabulary
// (256 byte tokens, learned merges, then the three special tokens at the highest ids) holds at most
// `max_vocab` ids; max_vocab < 300 is kInvalidArgument. The output depends only on max_vocab.
TinyTokenizerIds write_tiny_tokenizer(const std::filesystem::path& dir, int32_t max_vocab);

}  // namespace flashq
