// The chat fields of the job map (docs/protocol.md, "The job map"): `messages` as OpenAI-shaped
// maps, and the fields that only a job with messages may carry: `tools`,
// `chat_template_kwargs` and `add_generation_prompt`.
#pragma once

#include <vector>

#include "shared/protocol/field_reader.h"
#include "shared/protocol/job.h"
#include "shared/protocol/map_writer.h"

namespace flashq::protocol {

// Template variables the job itself sets; `chat_template_kwargs` may not name them.
inline constexpr const char* kReservedTemplateVariables[] = {"messages", "tools", "add_generation_prompt"};

void write_messages(MapWriter& out, const std::vector<ChatMessage>& messages);
// kProtocol naming the field (job.messages[2].tool_calls[0].function.name) for every rule.
std::vector<ChatMessage> read_messages(const FieldReader& job);

// Writes tools, chat_template_kwargs and add_generation_prompt for a chat job; nothing for others.
void write_chat_options(MapWriter& out, const Job& job);
// Reads them into `job`, whose prompt is already read; given without `messages` they are refused.
void read_chat_options(const FieldReader& fields, Job& job);

}  // namespace flashq::protocol
