#include "broker/prompt_prefix.h"

#include <string_view>
#include <variant>

namespace flashq {
namespace {

// FNV-1a, 64 bits, run over the whole byte string: its state after block i is the hash of the
// prefix up to there, which is what chains a block's key to everything before it.
class BlockKeys {
 public:
  // The kind of prompt seeds the hash, so text and token ids with the same bytes differ.
  BlockKeys(char kind, std::size_t max_blocks) : max_blocks_(max_blocks) { mix(kind); }

  void feed(std::string_view bytes) {
    for (char c : bytes) {
      if (full()) return;
      mix(c);
      if (++in_block_ == kPrefixBlockBytes) {
        keys_.push_back(state_);
        in_block_ = 0;
      }
    }
  }
  void separator(char c) { feed(std::string_view(&c, 1)); }
  bool full() const { return keys_.size() >= max_blocks_; }
  std::vector<std::uint64_t> take() { return std::move(keys_); }

 private:
  void mix(char c) { state_ = (state_ ^ static_cast<unsigned char>(c)) * 0x100000001b3ull; }

  std::size_t max_blocks_;
  std::uint64_t state_ = 0xcbf29ce484222325ull;
  std::size_t in_block_ = 0;
  std::vector<std::uint64_t> keys_;
};

// ASCII's separators cannot be confused with the field boundaries of ordinary text; a field that
// holds them anyway only makes two different chats share a key once in 2^64.
constexpr char kField = 0x1f, kMessage = 0x1e, kHeader = 0x1d;

void feed_chat(BlockKeys& keys, const protocol::Job& job, const std::vector<protocol::ChatMessage>& messages) {
  // What a chat template renders first: the tool definitions and its options shape the system turn.
  keys.feed(job.tools.value_or(""));
  keys.separator(kField);
  keys.feed(job.chat_template_kwargs.value_or(""));
  keys.separator(kHeader);
  for (const protocol::ChatMessage& message : messages) {
    if (keys.full()) return;
    keys.feed(message.role);
    keys.separator(kField);
    keys.feed(message.content.value_or(""));
    keys.separator(kField);
    keys.feed(message.reasoning_content.value_or(""));
    for (const protocol::ToolCall& call : message.tool_calls) {
      keys.separator(kField);
      keys.feed(call.id);
      keys.separator(kField);
      keys.feed(call.name);
      keys.separator(kField);
      keys.feed(call.arguments_json);
    }
    keys.separator(kField);
    keys.feed(message.tool_call_id.value_or(""));
    keys.separator(kField);
    keys.feed(message.name.value_or(""));
    keys.separator(kMessage);
  }
}

}  // namespace

std::vector<std::uint64_t> prompt_prefix_keys(const protocol::Job& job, std::size_t max_blocks) {
  if (const auto* text = std::get_if<std::string>(&job.prompt)) {
    BlockKeys keys('t', max_blocks);
    keys.feed(*text);
    return keys.take();
  }
  if (const auto* tokens = std::get_if<protocol::TokenIds>(&job.prompt)) {
    BlockKeys keys('i', max_blocks);
    for (std::int32_t id : *tokens) {
      if (keys.full()) break;
      const auto u = static_cast<std::uint32_t>(id);
      const char bytes[4] = {static_cast<char>(u), static_cast<char>(u >> 8), static_cast<char>(u >> 16),
                             static_cast<char>(u >> 24)};
      keys.feed(std::string_view(bytes, 4));
    }
    return keys.take();
  }
  BlockKeys keys('c', max_blocks);
  feed_chat(keys, job, std::get<std::vector<protocol::ChatMessage>>(job.prompt));
  return keys.take();
}

}  // namespace flashq
