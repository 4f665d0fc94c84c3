// Joining deltas and folding them into the non-streamed message.
#include "gateway/output/output_delta.h"

#include "shared/error.h"

namespace flashq::gateway {

std::string_view delta_kind_name(DeltaKind kind) {
  switch (kind) {
    case DeltaKind::kContent: return "content";
    case DeltaKind::kReasoning: return "reasoning";
    case DeltaKind::kToolCallStart: return "tool_call_start";
    case DeltaKind::kToolCallArguments: return "tool_call_arguments";
    case DeltaKind::kToolCallEnd: return "tool_call_end";
  }
  return "unknown";
}

void append_text(OutputDeltas& out, DeltaKind kind, std::string_view text, int index) {
  if (text.empty()) return;
  if (!out.empty() && out.back().kind == kind && out.back().index == index) {
    out.back().text += text;
    return;
  }
  OutputDelta delta;
  delta.kind = kind;
  delta.text = std::string(text);
  delta.index = index;
  out.push_back(std::move(delta));
}

void append_deltas(OutputDeltas& out, const OutputDeltas& more) {
  for (const OutputDelta& delta : more) {
    switch (delta.kind) {
      case DeltaKind::kContent:
      case DeltaKind::kReasoning:
      case DeltaKind::kToolCallArguments:
        append_text(out, delta.kind, delta.text, delta.index);
        break;
      case DeltaKind::kToolCallStart:
      case DeltaKind::kToolCallEnd:
        out.push_back(delta);
        break;
    }
  }
}

void AssistantMessage::apply(const OutputDelta& delta) {
  switch (delta.kind) {
    case DeltaKind::kContent: content += delta.text; return;
    case DeltaKind::kReasoning: reasoning += delta.text; return;
    case DeltaKind::kToolCallStart:
      check_invariant(delta.index == static_cast<int>(tool_calls.size()),
                      "tool calls start in index order");
      tool_calls.push_back({delta.id, delta.name, "", false});
      return;
    case DeltaKind::kToolCallArguments:
      check_invariant(delta.index >= 0 && delta.index < static_cast<int>(tool_calls.size()),
                      "tool call arguments follow their start");
      tool_calls[static_cast<std::size_t>(delta.index)].arguments += delta.text;
      return;
    case DeltaKind::kToolCallEnd:
      check_invariant(delta.index >= 0 && delta.index < static_cast<int>(tool_calls.size()),
                      "tool call end follows its start");
      tool_calls[static_cast<std::size_t>(delta.index)].complete = true;
      return;
  }
}

void AssistantMessage::apply(const OutputDeltas& deltas) {
  for (const OutputDelta& delta : deltas) apply(delta);
}

std::size_t AssistantMessage::complete_tool_calls() const {
  std::size_t n = 0;
  for (const ParsedToolCall& call : tool_calls) n += call.complete ? 1 : 0;
  return n;
}

}  // namespace flashq::gateway
