#include "shared/protocol/worker_messages.h"

#include <limits>

#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/map_writer.h"

namespace flashq::protocol {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

std::int64_t read_attempt(const FieldReader& fields) { return fields.integer("attempt", 1, kInt32Max); }

}  // namespace

std::string encode_body(const Ready& message) {
  return MapWriter()
      .string("worker_id", message.worker_id)
      .string("model", message.model)
      .integer("slots", message.slots)
      .integer("block_size", message.block_size)
      .string("backend", message.backend)
      .integer("max_model_len", message.max_model_len)
      .string("tool_call_format", tool_call_format_name(message.tool_call_format))
      .string("reasoning_format", reasoning_format_name(message.reasoning_format))
      .finish();
}

std::string encode_body(const WorkerHeartbeat& message) { return MapWriter().integer("load", message.load).finish(); }
std::string encode_body(const BrokerHeartbeat&) { return MapWriter().finish(); }
std::string encode_body(const Disconnect&) { return MapWriter().finish(); }

std::string encode_body(const Assign& message) {
  return MapWriter()
      .map("job", encode_job(message.job))
      .integer("attempt", message.attempt)
      .token_ids("resume_tokens", message.resume_tokens)
      .integer("resume_text_bytes", message.resume_text_bytes)
      .finish();
}

std::string encode_body(const Tokens& message) {
  MapWriter out;
  out.string("id", message.id)
      .integer("attempt", message.attempt)
      .integer("seq", message.seq)
      .token_ids("token_ids", message.token_ids)
      .string("text", message.text);
  if (message.spec) out.map("spec", encode_step_speculation(*message.spec));
  if (!message.logprobs.empty()) out.raw("logprobs", encode_output_logprobs(message.logprobs));
  return out.finish();
}

std::string encode_body(const Final& message) {
  MapWriter out;
  out.string("id", message.id).integer("attempt", message.attempt);
  write_final_fields(out, message.result);
  return out.finish();
}

template <>
Ready decode_body<Ready>(std::string_view body) {
  return read_body<Ready>(body, [](const FieldReader& fields) {
    return Ready{read_id(fields, "worker_id"), fields.string("model", {1, kMaxNameBytes}),
                 fields.integer("slots", 1, kInt32Max), fields.integer("block_size", 0, kMaxBlockSize),
                 fields.string("backend", {1, kMaxIdBytes}), fields.integer_or("max_model_len", 0, kInt32Max, 0),
                 read_tool_call_format(fields, "tool_call_format"), read_reasoning_format(fields, "reasoning_format")};
  });
}

template <>
WorkerHeartbeat decode_body<WorkerHeartbeat>(std::string_view body) {
  return read_body<WorkerHeartbeat>(body, [](const FieldReader& fields) {
    return WorkerHeartbeat{fields.integer("load", 0, kInt32Max)};
  });
}

template <>
BrokerHeartbeat decode_body<BrokerHeartbeat>(std::string_view body) {
  return read_body<BrokerHeartbeat>(body, [](const FieldReader&) { return BrokerHeartbeat{}; });
}

template <>
Disconnect decode_body<Disconnect>(std::string_view body) {
  return read_body<Disconnect>(body, [](const FieldReader&) { return Disconnect{}; });
}

template <>
Assign decode_body<Assign>(std::string_view body) {
  return read_body<Assign>(body, [](const FieldReader& fields) {
    return Assign{read_job(fields.map("job"), JobIdRule::kRequired), read_attempt(fields),
                  fields.token_ids("resume_tokens", kMaxOutputTokens),
                  fields.integer_or("resume_text_bytes", 0, kInt64Max, 0)};
  });
}

template <>
Tokens decode_body<Tokens>(std::string_view body) {
  return read_body<Tokens>(body, [](const FieldReader& fields) {
    Tokens tokens{read_id(fields, "id"), read_attempt(fields), fields.integer("seq", 0, kInt64Max),
                  fields.token_ids("token_ids", kMaxOutputTokens),
                  fields.string("text", {0, kMaxOutputTextBytes}), std::nullopt};
    if (const std::optional<FieldReader> spec = fields.optional_map("spec")) tokens.spec = read_step_speculation(*spec);
    tokens.logprobs = read_logprobs_for(fields, tokens.token_ids.size());
    return tokens;
  });
}

template <>
Final decode_body<Final>(std::string_view body) {
  return read_body<Final>(body, [](const FieldReader& fields) {
    return Final{read_id(fields, "id"), read_attempt(fields), read_final_fields(fields)};
  });
}

}  // namespace flashq::protocol
