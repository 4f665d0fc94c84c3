// A Responses API request's `instructions` and `input` as the chat messages of a job
// (docs/gateway.md, "The Responses API"). The chat template sees one conversation:
//   instructions                      -> a system message, first
//   input as a string                 -> one user message
//   message items (role user, system, developer, assistant; content a string or a list of
//     input_text / output_text / refusal parts, joined by "\n")
//                                     -> a message of that role; developer becomes system (the
//                                        templates served know no developer role)
//   reasoning items (content's reasoning_text parts, else the summary's summary_text)
//                                     -> reasoning_content of the assistant turn they precede
//   function_call items               -> tool_calls of the assistant turn; consecutive calls,
//                                        and the reasoning and assistant message before them,
//                                        form one assistant turn, as a model writes them
//   function_call_output items        -> a tool message answering call_id, named after the
//                                        call it answers when that call is in the input
// Images, files, item references and every hosted tool's items are refused by name
// (unsupported_parameter): they cannot reach a text-only template.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gateway/openai/request_body.h"
#include "shared/protocol/job.h"

namespace flashq::gateway {

// Throws ApiError (400) naming the item and field at fault. An empty conversation is refused.
std::vector<protocol::ChatMessage> read_responses_input(const BodyJson& input,
                                                        const std::optional<std::string>& instructions);

}  // namespace flashq::gateway
