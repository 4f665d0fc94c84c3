// The interface that turns a generated completion's text into assistant message parts, as the
// tokens stream. feed() takes the next piece of text (a piece may end anywhere: inside a tag,
// inside a JSON string, between the bytes of a UTF-8 character) and returns the deltas that piece
// settles; finish() is called once when generation ends and returns what was held back. A parser
// holds back only what it cannot yet decide (a partial tag, a tool call not yet validated), so the
// concatenation of all deltas is the same however the text was split.
//
// Malformed output never throws: text that does not form a well-formed part of its format is
// content (docs/gateway.md, "Model output"). A parser is one completion's state: make one per
// choice (n jobs, n parsers).
//
// Formats (one class each, chosen by output_parser_factory.h):
//   PlainOutputParser      everything is content
//   HermesToolParser       Qwen3 / Hermes `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
//   Llama3JsonToolParser   Llama 3.x `{"name": ..., "parameters": {...}}` as the whole message,
//                          after an optional <|python_tag|>, several joined by `;`
//   ThinkTagParser         Qwen3 `<think>...</think>` reasoning, in front of any of the above
//   HarmonyParser          gpt-oss's harmony messages, by channel: analysis as reasoning, final
//                          as content, commentary `to=functions.NAME` as tool calls
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "gateway/output/output_delta.h"

namespace flashq::gateway {

class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual OutputDeltas feed(std::string_view text) = 0;
  virtual OutputDeltas finish() = 0;
};

// Makes the id of the tool call with this index; given by the caller so ids are deterministic
// (the gateway uses "call_" + job id + "_" + index).
using ToolCallIdGenerator = std::function<std::string(int index)>;

// How a tool call's arguments reach the stream.
enum class ArgumentStreaming {
  // The call is held back until its JSON object is complete and valid, then sent as its start
  // and one arguments fragment; a malformed call becomes content, exactly as written.
  kValidated,
  // The start is sent once the name is read and the arguments follow as the model writes them;
  // a call that breaks after its start stays a call without kToolCallEnd (its arguments are then
  // not valid JSON) and the text from the break on is content.
  kIncremental,
};

}  // namespace flashq::gateway
