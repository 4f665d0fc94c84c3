// Text <-> token ids. Two implementations sit behind this interface: Hugging Face
// tokenizer.json byte-level BPE (Qwen2/Qwen3, Llama 3) and SentencePiece .model files. load_tokenizer
// picks one by what the model directory holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashq {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text to ids. Added/special tokens written in the text are recognised (as Hugging Face does);
  // nothing is added (no BOS/EOS). Invalid UTF-8 in `text` is replaced by U+FFFD first.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // encode with the special tokens Hugging Face's encode(text, add_special_tokens=true) puts
  // around the text: tokenizer.json's post-processor (Llama 3 puts <|begin_of_text|> first, Qwen
  // adds nothing). For prompts given as text; a chat template writes its own. A tokenizer with
  // no post-processor adds nothing.
  virtual std::vector<int32_t> encode_with_special_tokens(std::string_view text) const { return encode(text); }
  // Ids to text. Byte sequences that are not valid UTF-8 become U+FFFD, as Hugging Face's
  // decode does. Ids outside the vocabulary are a kInvalidArgument error.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const = 0;
  // Number of ids the tokenizer knows (vocabulary plus added tokens).
  virtual int32_t vocab_size() const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // The exact bytes token `id` stands for in generated text (byte-level tokens decoded to their
  // bytes, SentencePiece's U+2581 as a space, byte pieces as their byte); empty for special
  // tokens and ids outside the vocabulary. What a grammar sees of a token.
  virtual std::string token_bytes(int32_t id) const = 0;
};

// Loads tokenizer.json (preferred) or tokenizer.model from `dir`. Errors: kNotFound when neither
// exists, kBadTokenizer (naming the file and the problem) when it cannot be used,
// kUnsupported (naming the key) for a tokenizer.json feature we do not implement.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& dir);

}  // namespace flashq
