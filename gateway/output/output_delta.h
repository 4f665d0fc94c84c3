// One piece of an assistant message as the model's text is parsed: content text, reasoning text,
// the start of a tool call (index, id, name), a fragment of its arguments, or its end. These are
// exactly the parts of OpenAI's streamed `delta` (content, `tool_calls[i]` with index / id /
// function.name / function.arguments fragments) and of vLLM's `delta.reasoning` /
// `reasoning_content`, so a stream sends each delta as it comes and a non-streamed response is the
// deltas folded together (AssistantMessage). kToolCallEnd carries no text: it tells the Responses
// API's `function_call_arguments.done` and the tool_choice check that a call is complete.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace flashq::gateway {

enum class DeltaKind {
  kContent,           // text: assistant content
  kReasoning,         // text: reasoning (vLLM's `reasoning` / `reasoning_content`)
  kToolCallStart,     // index, id, name; always the first delta of its index
  kToolCallArguments, // index, text: the next fragment of the call's JSON arguments
  kToolCallEnd,       // index: the call is complete and its arguments are one valid JSON object
};

std::string_view delta_kind_name(DeltaKind kind);

struct OutputDelta {
  DeltaKind kind = DeltaKind::kContent;
  std::string text;  // content, reasoning or an arguments fragment
  int index = -1;    // tool-call deltas: the call's index among this completion's calls
  std::string id;    // kToolCallStart: the call's id
  std::string name;  // kToolCallStart: the function's name

  bool operator==(const OutputDelta&) const = default;
};

using OutputDeltas = std::vector<OutputDelta>;

// Appends text of kind kContent, kReasoning or kToolCallArguments, joining it to the last delta
// when that one has the same kind and index, so a feed of many bytes yields few deltas.
void append_text(OutputDeltas& out, DeltaKind kind, std::string_view text, int index = -1);

// Appends every delta of `more`, joining text deltas as append_text does.
void append_deltas(OutputDeltas& out, const OutputDeltas& more);

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // the arguments' JSON text as the model wrote it (decoded when
                          // it wrote them as a JSON string holding the object)
  bool complete = false;  // a kToolCallEnd was seen

  bool operator==(const ParsedToolCall&) const = default;
};

// The non-streamed assistant message: every delta folded in order.
struct AssistantMessage {
  std::string content;
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;

  void apply(const OutputDelta& delta);
  void apply(const OutputDeltas& deltas);
  // Calls with a kToolCallEnd: the ones a finish_reason `tool_calls` speaks of.
  std::size_t complete_tool_calls() const;

  bool operator==(const AssistantMessage&) const = default;
};

}  // namespace flashq::gateway
