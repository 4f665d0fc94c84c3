// A generation job as it travels in SUBMIT and ASSIGN (docs/protocol.md, "The job map").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace flashq::protocol {

class FieldReader;

using TokenIds = std::vector<std::int32_t>;

// A call of one of the job's tools by the assistant, as OpenAI writes it ({id, type: function,
// function: {name, arguments}}).
struct ToolCall {
  std::string id;    // may be empty
  std::string name;  // the function's name
  // JSON text of the arguments as sent: a JSON string holding JSON text (OpenAI's form) or a JSON
  // value (a map, as chat templates take it).
  std::string arguments_json = "{}";
  bool operator==(const ToolCall&) const = default;
};

// One message of a conversation, OpenAI-shaped (docs/protocol.md, "The job map").
struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...: the worker's chat template decides
  // Absent (nil on the wire) only in a message with tool_calls.
  std::optional<std::string> content;
  std::vector<ToolCall> tool_calls;
  std::optional<std::string> tool_call_id;       // a tool result: the call it answers
  std::optional<std::string> name;               // e.g. the tool that produced a result
  std::optional<std::string> reasoning_content;  // an assistant turn's thinking
  bool operator==(const ChatMessage&) const = default;
};

// Exactly one of: prompt text, prompt token ids, chat messages. Keys prompt / prompt_tokens /
// messages on the wire.
using Prompt = std::variant<std::string, TokenIds, std::vector<ChatMessage>>;

enum class SpecMode : std::uint8_t { kAuto, kOff, kDflash };
std::string_view spec_mode_name(SpecMode mode);  // "auto", "off", "dflash"

struct Job {
  std::string id;  // empty only in SUBMIT, where the broker then assigns one
  Prompt prompt;
  std::int64_t max_tokens = 256;
  double temperature = 0;
  double top_p = 1;
  std::int64_t top_k = 0;  // 0: no top-k cut
  std::uint64_t seed = 0;
  std::vector<std::string> stop;
  TokenIds stop_token_ids;
  std::int64_t priority = 0;     // lower runs first
  std::int64_t deadline_ms = 0;  // SUBMIT: from submission, 0 = broker default; ASSIGN: time left
  SpecMode spec = SpecMode::kAuto;
  std::optional<std::string> model;
  std::optional<std::string> metadata;  // one msgpack value, opaque, passed through
  // The conversation the job continues: the broker routes a session's jobs to the worker that
  // served it last, whose caches hold its prefix (docs/protocol.md 9.4, "Routing").
  std::optional<std::string> session;
  bool stream = false;                  // also send the stream events to the submitting producer
  std::int64_t block_size = 0;          // DFlash block size, 0 = the worker's choice
  // Chat jobs only (prompt holds messages), handed to the worker's chat template: the tool
  // definitions (JSON text of an array), the template's own variables (JSON text of a map, e.g.
  // {"enable_thinking": false}), and whether the prompt ends by opening the assistant's turn.
  std::optional<std::string> tools;
  std::optional<std::string> chat_template_kwargs;
  bool add_generation_prompt = true;
  // What the output must be (docs/grammar.md, "Requests"), JSON text of a map: {"type":
  // "json_schema", "schema": {...}}, {"type": "json_object"}, {"type": "regex", "pattern": ...},
  // {"type": "choice", "choices": [...]} or {"type": "grammar", "grammar": GBNF}. The worker
  // compiles it and constrains the decoding to it; absent: any text.
  std::optional<std::string> structured_output;
  // Log-probabilities with each output token (docs/protocol.md, "Log-probabilities"): absent,
  // none; N (0..kMaxTopLogprobs), the token's own and its row's N most likely tokens.
  std::optional<std::int64_t> logprobs;

  bool operator==(const Job&) const = default;
};

// Job ids and worker ids: 1..128 bytes of printable ASCII without space (0x21..0x7E).
bool is_valid_id(std::string_view id);

enum class JobIdRule { kOptional, kRequired };

// The job as a msgpack map. kProtocol when `metadata` is not exactly one msgpack value.
std::string encode_job(const Job& job);
// Validates every field of the job map in `fields` (docs/protocol.md, "The job map").
Job read_job(const FieldReader& fields, JobIdRule id_rule);

// An id field (`key`) of any message, validated with is_valid_id.
std::string read_id(const FieldReader& fields, std::string_view key);
std::optional<std::string> read_optional_id(const FieldReader& fields, std::string_view key);

}  // namespace flashq::protocol
