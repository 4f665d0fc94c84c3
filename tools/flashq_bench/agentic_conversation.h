// The agentic workload of `flashq-bench agentic`: conversations of several turns over one system
// prompt (an agent's instructions and its tool definitions) shared by every conversation. Each
// turn's prompt is the previous turn's prompt, the model's own output, a tool result and a new
// user message, so every later turn's prompt extends the previous turn's prompt and output token
// for token (what a prefix cache can reuse).
//
// The text is written by the model's chat template and tokenizer when they take it: the tools as
// the template's `tools` with `tool` messages for their results, or, for a template that takes
// plain messages only, the tools in the system message and each result in a user message (as
// Qwen's template writes them). What a turn appends is the template's text after the reply
// (rendered with a marker in the reply's place), tokenized; the reply itself is kept as the ids
// the model produced. A model whose template takes neither, or --token-ids, gets seeded random
// ids of the same lengths. Everything is a function of the seed, so two arms of a comparison see
// the same prompts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "worker/text/chat_template.h"
#include "worker/text/tokenizer.h"

namespace flashq {

struct AgenticShape {
  int64_t system_tokens = 2000;      // the shared system prompt with the tool definitions, at least
  int64_t tool_result_tokens = 200;  // each turn's tool result, at least
  int64_t user_tokens = 24;          // each user message, about
};

// How the text was made: "chat template with tools", "chat template, plain messages" or "token ids".
class AgenticScript {
 public:
  // Without `chat_template` (or when it takes no plain conversation) the script writes token ids
  // below `ordinary_ids`.
  AgenticScript(const Tokenizer* tokenizer, const ChatTemplate* chat_template, int32_t ordinary_ids, AgenticShape shape,
                uint64_t seed);

  const std::string& mode() const { return mode_; }
  const AgenticShape& shape() const { return shape_; }
  // Tokens of the shared system prompt as it starts every conversation's first prompt.
  int64_t system_prompt_tokens() const { return system_prompt_tokens_; }

 private:
  friend class AgenticConversation;
  ChatRequest request_for(const ChatJson& messages) const;
  std::string tool_result_text(uint64_t seed) const;
  std::string user_text(uint64_t seed) const;
  std::vector<int32_t> random_ids(int64_t count, uint64_t seed) const;

  const Tokenizer* tokenizer_;
  const ChatTemplate* chat_template_;
  int32_t ordinary_ids_;
  AgenticShape shape_;
  uint64_t seed_;
  std::string mode_;
  bool tools_in_request_ = false;
  ChatJson tools_ = ChatJson::array();
  std::string system_text_;
  int64_t system_prompt_tokens_ = 0;
};

// One conversation of the script: its prompt for the current turn, grown turn by turn.
class AgenticConversation {
 public:
  AgenticConversation(const AgenticScript& script, int64_t index);

  int64_t turn() const { return turn_; }  // 0 for the first
  const std::vector<int32_t>& prompt() const { return prompt_; }
  // The next turn: `reply` (this turn's output ids), the end of the assistant's turn, a tool
  // result, a user message and the opening of the assistant's next turn.
  void add_turn(std::span<const int32_t> reply);

 private:
  const AgenticScript& script_;
  int64_t index_;
  int64_t turn_ = 0;
  ChatJson messages_ = ChatJson::array();
  std::vector<int32_t> prompt_;
};

}  // namespace flashq
