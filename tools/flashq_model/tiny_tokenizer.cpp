// Writes the tiny tokenizers: a deterministic BPE trainer over an embedded text, then
// tokenizer.json and tokenizer_config.json in the layout of Qwen's own files, or of Llama 3's.
#include "tools/flashq_model/tiny_tokenizer.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shared/error.h"
#include "shared/json_file.h"
#include "worker/text/byte_level.h"
#include "worker/text/split_pattern.h"
#include "worker/text/utf8.h"

namespace flashq {
namespace {

using nlohmann::ordered_json;

constexpr int32_t kMinVocab = 300;
constexpr const char* kSpecialTokens[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// Qwen2/Qwen3's pre-tokenizer regex, verbatim from their tokenizer.json.
constexpr const char* kQwenSplitPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Llama 3's (meta-llama's tokenizer.json): numbers split into runs of up to three digits.
constexpr const char* kLlama3SplitPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr const char* kLlama3SpecialTokens[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                                "<|end_header_id|>", "<|eot_id|>"};

// The shape of Llama 3's template without its tool and date handling.
constexpr const char* kLlama3ChatTemplate =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message.role + "
    "'<|end_header_id|>\\n\\n' + message.content + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt "
    "%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

// gpt-oss's special tokens (its o200k_harmony tokenizer.json names them): the harmony format's
// markers, with <|startoftext|> and <|endoftext|>.
constexpr const char* kHarmonySpecialTokens[] = {"<|startoftext|>", "<|endoftext|>", "<|start|>",
                                                 "<|end|>",         "<|message|>",   "<|channel|>",
                                                 "<|constrain|>",   "<|return|>",    "<|call|>"};

// The shape of the harmony format for plain messages: an assistant's answer in the final channel,
// and the generation prompt that leaves the channel to the model. (gpt-oss checkpoints ship their
// own template, with tools and reasoning; tests that need it copy it next to the tokenizer.)
constexpr const char* kHarmonyChatTemplate =
    "{%- for message in messages %}{%- if message.role == 'assistant' %}{{- '<|start|>assistant<|channel|>final"
    "<|message|>' + message.content + '<|end|>' }}{%- else %}{{- '<|start|>' + message.role + '<|message|>' + "
    "message.content + '<|end|>' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<|start|>assistant' }}{%- endif %}";

// ChatML for plain messages; another role is refused (raise_exception) rather than written.
constexpr const char* kChatTemplate =
    "{%- for message in messages %}{%- if message.role not in ['system', 'user', 'assistant'] %}"
    "{{- raise_exception('chat message role \"' + message.role + '\" is not system, user or assistant') }}"
    "{%- endif %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<|im_start|>assistant\\n' }}{%- endif %}";

constexpr const char* kTrainingText = R"TEXT(
The queue accepts generation jobs from producers and hands them to workers. Each worker runs the
model on one GPU, decodes tokens, and streams them back to the broker, which fans them out to the
subscribers. When a worker dies, its jobs are requeued as continuations, so no accepted job is lost.
A tokenizer turns text into ids and ids back into text. The model reads ids; people read text.
Speculative decoding drafts a block of tokens with a small model and verifies the whole block with
the target model in one pass. The longest accepted prefix is committed; the rest is thrown away.
It's simple, and it's fast: we've measured it, they'll see it, you'd like it, I'm sure.
Hello, world! How are you today? The weather is fine, the sky is blue, and the river is calm.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 3.14159 2025-01-31 12:30:45 +1 -1 50% $9.99
int main(int argc, char** argv) {
  std::vector<int32_t> ids = tokenizer.encode("hello world");
  for (size_t i = 0; i < ids.size(); ++i) {
    std::printf("%d\n", ids[i]);
  }
  return 0;
}
def generate(model, prompt, max_tokens=128, temperature=0.0):
    ids = tokenizer.encode(prompt)
    for _ in range(max_tokens):
        logits = model(ids)
        next_id = int(logits[-1].argmax())
        if next_id == eos_id:
            break
        ids.append(next_id)
    return tokenizer.decode(ids)
class Queue:
    def __init__(self):
        self.jobs = []
    def push(self, job):
        self.jobs.append(job)
    def pop(self):
        return self.jobs.pop(0) if self.jobs else None
{"id": "job-1", "prompt": "Write a haiku about the sea.", "max_tokens": 64, "stream": true}
The quick brown fox jumps over the lazy dog. The lazy dog sleeps in the sun all day long.
Every test states the behaviour it checks, and the failure message names what differed.
)TEXT";

using Word = std::vector<std::string>;  // symbols in the byte-level alphabet

std::vector<std::pair<Word, int64_t>> count_words(std::string_view text) {
  SplitPattern pattern(kQwenSplitPattern);
  std::vector<std::string_view> pieces;
  pattern.split_isolated(text, pieces);
  std::map<std::string, int64_t> counts;  // ordered, so training does not depend on hashing
  for (std::string_view piece : pieces) ++counts[std::string(piece)];
  std::vector<std::pair<Word, int64_t>> words;
  for (const auto& [piece, count] : counts) {
    Word word;
    for (char byte : piece) word.emplace_back(byte_level_char(static_cast<uint8_t>(byte)));
    words.emplace_back(std::move(word), count);
  }
  return words;
}

// The most frequent adjacent pair (ties: the smallest pair), or nothing when no pair occurs twice.
std::optional<std::pair<std::string, std::string>> most_frequent_pair(
    const std::vector<std::pair<Word, int64_t>>& words) {
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (const auto& [word, count] : words) {
    for (size_t i = 0; i + 1 < word.size(); ++i) counts[{word[i], word[i + 1]}] += count;
  }
  std::optional<std::pair<std::string, std::string>> best;
  int64_t best_count = 1;
  for (const auto& [pair, count] : counts) {
    if (count > best_count) {
      best = pair;
      best_count = count;
    }
  }
  return best;
}

void apply_merge(const std::pair<std::string, std::string>& merge, Word& word) {
  Word merged;
  for (size_t i = 0; i < word.size(); ++i) {
    if (i + 1 < word.size() && word[i] == merge.first && word[i + 1] == merge.second) {
      merged.push_back(word[i] + word[i + 1]);
      ++i;
    } else {
      merged.push_back(word[i]);
    }
  }
  word.swap(merged);
}

ordered_json added_token_json(int32_t id, const char* content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// Special tokens `names` at ids first, first + 1, ...: tokenizer.json's added_tokens and
// tokenizer_config.json's added_tokens_decoder.
struct SpecialTokensJson {
  ordered_json added_tokens = ordered_json::array();
  ordered_json added_tokens_decoder = ordered_json::object();
};

SpecialTokensJson special_tokens_json(int32_t first, std::span<const char* const> names) {
  SpecialTokensJson out;
  for (size_t i = 0; i < names.size(); ++i) {
    const int32_t id = first + static_cast<int32_t>(i);
    ordered_json token = added_token_json(id, names[i]);
    out.added_tokens.push_back(token);
    token.erase("id");
    out.added_tokens_decoder[std::to_string(id)] = token;
  }
  return out;
}

// A pre-tokenizer that splits by `pattern` (isolated matches), then maps bytes as `byte_level`.
ordered_json split_pre_tokenizer(const char* pattern, const ordered_json& byte_level) {
  const ordered_json split = {
      {"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", ordered_json::array({split, byte_level})}};
}

// The byte tokens and the merges learned on the training text, up to `regular_limit` ids.
struct LearnedBpe {
  ordered_json vocab = ordered_json::object();
  ordered_json merges = ordered_json::array();
  int32_t next_id = 256;
};

LearnedBpe learn_bpe(int32_t max_vocab, int32_t special_count) {
  if (max_vocab < kMinVocab) {
    throw Error(ErrorCode::kInvalidArgument,
                "tiny tokenizer: max_vocab " + std::to_string(max_vocab) + " is below " + std::to_string(kMinVocab));
  }
  LearnedBpe bpe;
  for (int byte = 0; byte < 256; ++byte) {
    bpe.vocab[std::string(byte_level_char(static_cast<uint8_t>(byte)))] = byte;
  }
  const int32_t regular_limit = max_vocab - special_count;
  auto words = count_words(kTrainingText);
  while (bpe.next_id < regular_limit) {
    auto pair = most_frequent_pair(words);
    if (!pair) break;
    for (auto& [word, count] : words) apply_merge(*pair, word);
    bpe.merges.push_back(ordered_json::array({pair->first, pair->second}));
    std::string merged = pair->first + pair->second;
    if (!bpe.vocab.contains(merged)) bpe.vocab[merged] = bpe.next_id++;
  }
  return bpe;
}

// The BPE model of the tiktoken-style tokenizers (Llama 3, o200k_harmony): merges over byte-level
// characters, no prefix or suffix markers, whole words in the vocabulary taken as they are.
ordered_json tiktoken_bpe_model(const LearnedBpe& bpe) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", true},
          {"vocab", bpe.vocab},
          {"merges", bpe.merges}};
}

void write_files(const std::filesystem::path& dir, const ordered_json& tokenizer, const ordered_json& config) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::kIo, dir.string() + ": cannot create directory: " + ec.message());
  write_text_file(dir / "tokenizer.json", tokenizer.dump(2) + "\n");
  write_text_file(dir / "tokenizer_config.json", config.dump(2) + "\n");
}

}  // namespace

TinyTokenizerIds write_tiny_tokenizer(const std::filesystem::path& dir, int32_t max_vocab) {
  LearnedBpe bpe = learn_bpe(max_vocab, static_cast<int32_t>(std::size(kSpecialTokens)));
  const int32_t next_id = bpe.next_id;
  ordered_json& vocab = bpe.vocab;
  ordered_json& merges = bpe.merges;
  TinyTokenizerIds ids{next_id, next_id + 1, next_id + 2};
  const auto [added_tokens, added_tokens_decoder] = special_tokens_json(next_id, kSpecialTokens);
  ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ordered_json tokenizer = {{"version", "1.0"},
                            {"truncation", nullptr},
                            {"padding", nullptr},
                            {"added_tokens", added_tokens},
                            {"normalizer", {{"type", "NFC"}}},
                            {"pre_tokenizer", split_pre_tokenizer(kQwenSplitPattern, byte_level)},
                            {"post_processor", byte_level},
                            {"decoder", byte_level},
                            {"model",
                             {{"type", "BPE"},
                              {"dropout", nullptr},
                              {"unk_token", nullptr},
                              {"continuing_subword_prefix", ""},
                              {"end_of_word_suffix", ""},
                              {"fuse_unk", false},
                              {"byte_fallback", false},
                              {"ignore_merges", false},
                              {"vocab", vocab},
                              {"merges", merges}}}};
  ordered_json config = {{"add_bos_token", false},
                         {"add_prefix_space", false},
                         {"added_tokens_decoder", added_tokens_decoder},
                         {"bos_token", nullptr},
                         {"chat_template", kChatTemplate},
                         {"clean_up_tokenization_spaces", false},
                         {"eos_token", "<|im_end|>"},
                         {"errors", "replace"},
                         {"model_max_length", 32768},
                         {"pad_token", "<|endoftext|>"},
                         {"split_special_tokens", false},
                         {"tokenizer_class", "Qwen2Tokenizer"},
                         {"unk_token", nullptr}};

  write_files(dir, tokenizer, config);
  return ids;
}

TinyLlama3TokenizerIds write_tiny_llama3_tokenizer(const std::filesystem::path& dir, int32_t max_vocab) {
  LearnedBpe bpe = learn_bpe(max_vocab, static_cast<int32_t>(std::size(kLlama3SpecialTokens)));
  const int32_t first = bpe.next_id;
  const TinyLlama3TokenizerIds ids{first, first + 1, first + 2, first + 3, first + 4};
  const auto [added_tokens, added_tokens_decoder] = special_tokens_json(first, kLlama3SpecialTokens);
  const char* bos = kLlama3SpecialTokens[0];
  const ordered_json sequence_a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const ordered_json sequence_b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  const ordered_json bos_piece = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
  const ordered_json bos_piece_b = {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}};
  ordered_json post_processor = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
        {{"type", "TemplateProcessing"},
         {"single", {bos_piece, sequence_a}},
         {"pair", {bos_piece, sequence_a, bos_piece_b, sequence_b}},
         {"special_tokens", {{bos, {{"id", bos}, {"ids", {ids.begin_of_text}}, {"tokens", {bos}}}}}}}}}};
  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_tokens},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       split_pre_tokenizer(
           kLlama3SplitPattern,
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}})},
      {"post_processor", post_processor},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", tiktoken_bpe_model(bpe)}};
  ordered_json config = {{"added_tokens_decoder", added_tokens_decoder},
                         {"bos_token", bos},
                         {"chat_template", kLlama3ChatTemplate},
                         {"clean_up_tokenization_spaces", true},
                         {"eos_token", "<|eot_id|>"},
                         {"model_input_names", {"input_ids", "attention_mask"}},
                         {"model_max_length", 131072},
                         {"tokenizer_class", "PreTrainedTokenizerFast"}};
  write_files(dir, tokenizer, config);
  return ids;
}

TinyHarmonyTokenizerIds write_tiny_harmony_tokenizer(const std::filesystem::path& dir, int32_t max_vocab) {
  constexpr auto kCount = static_cast<int32_t>(std::size(kHarmonySpecialTokens));
  LearnedBpe bpe = learn_bpe(max_vocab, kCount);
  const int32_t first = bpe.next_id;
  const auto [added_tokens, added_tokens_decoder] = special_tokens_json(first, kHarmonySpecialTokens);
  const ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  ordered_json tokenizer = {{"version", "1.0"},
                            {"truncation", nullptr},
                            {"padding", nullptr},
                            {"added_tokens", added_tokens},
                            {"normalizer", nullptr},
                            {"pre_tokenizer", split_pre_tokenizer(kLlama3SplitPattern, byte_level)},
                            {"post_processor", nullptr},
                            {"decoder", byte_level},
                            {"model", tiktoken_bpe_model(bpe)}};
  ordered_json config = {{"added_tokens_decoder", added_tokens_decoder},
                         {"bos_token", "<|startoftext|>"},
                         {"chat_template", kHarmonyChatTemplate},
                         {"clean_up_tokenization_spaces", false},
                         {"eos_token", "<|return|>"},
                         {"model_input_names", {"input_ids", "attention_mask"}},
                         {"model_max_length", 131072},
                         {"pad_token", "<|endoftext|>"},
                         {"tokenizer_class", "PreTrainedTokenizerFast"}};
  write_files(dir, tokenizer, config);
  return {.startoftext = first,
          .endoftext = first + 1,
          .start = first + 2,
          .end = first + 3,
          .message = first + 4,
          .channel = first + 5,
          .constrain = first + 6,
          .return_token = first + 7,
          .call = first + 8};
}

}  // namespace flashq
