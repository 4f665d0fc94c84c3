// Small tokenizers for random test models, with merges learned on a short embedded English and
// code text so that every id is reachable and text round-trips: a Qwen2-style one (the
// tokenizer.json shape of Qwen's: NFC, the Qwen split regex, byte-level BPE, ChatML special
// tokens), a Llama 3-style one (Llama 3's split regex, ignore_merges, the post-processor that
// puts <|begin_of_text|> first, Llama 3's special tokens and the shape of its chat template), and
// one with gpt-oss's harmony special tokens and the shape of the harmony format.
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

struct TinyLlama3TokenizerIds {
  int32_t begin_of_text;
  int32_t end_of_text;
  int32_t start_header_id;
  int32_t end_header_id;
  int32_t eot_id;
};

// The Llama 3-style tokenizer, as write_tiny_tokenizer writes the Qwen one: the five special
// tokens take the highest ids, at most `max_vocab` in all.
TinyLlama3TokenizerIds write_tiny_llama3_tokenizer(const std::filesystem::path& dir, int32_t max_vocab);

struct TinyHarmonyTokenizerIds {
  int32_t startoftext, endoftext, start, end, message, channel, constrain, return_token, call;
};

// The gpt-oss-style tokenizer (harmony's nine special tokens at the highest ids), as
// write_tiny_tokenizer writes the Qwen one; its end of generation is <|return|> (and <|call|>).
TinyHarmonyTokenizerIds write_tiny_harmony_tokenizer(const std::filesystem::path& dir, int32_t max_vocab);

}  // namespace flashq
