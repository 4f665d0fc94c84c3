#include "shared/protocol/producer_messages.h"

#include <limits>

#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/map_writer.h"
#include "shared/protocol/strict_unpack.h"

namespace flashq::protocol {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

std::string id_only_body(const std::string& id) { return MapWriter().string("id", id).finish(); }

JobState read_job_state(const FieldReader& fields) {
  const std::string name = fields.string("state", {1, kMaxCodeBytes});
  for (JobState state : {JobState::kQueued, JobState::kRunning, JobState::kFinished, JobState::kUnknown}) {
    if (name == job_state_name(state)) return state;
  }
  fields.fail("state", "must be one of queued, running, finished, unknown");
}

std::optional<FinalResult> read_optional_final(const FieldReader& fields) {
  const std::optional<FieldReader> final_map = fields.optional_map("final");
  if (!final_map) return std::nullopt;
  return read_final_fields(*final_map);
}

}  // namespace

std::string_view job_state_name(JobState state) {
  switch (state) {
    case JobState::kQueued: return "queued";
    case JobState::kRunning: return "running";
    case JobState::kFinished: return "finished";
    case JobState::kUnknown: return "unknown";
  }
  return "unknown";
}

ErrorReply error_reply(const Error& error, std::optional<std::string> id) {
  std::string message = error.what();
  if (message.size() > kMaxMessageBytes) message.resize(kMaxMessageBytes);
  if (id && !is_valid_id(*id)) id.reset();
  return {std::string(error_code_name(error.code())), std::move(message), std::move(id)};
}

std::string encode_body(const Submit& message) { return MapWriter().map("job", encode_job(message.job)).finish(); }
std::string encode_body(const Cancel& message) { return id_only_body(message.id); }
std::string encode_body(const Status& message) { return id_only_body(message.id); }
std::string encode_body(const Replay& message) {
  return MapWriter().string("id", message.id).integer("from_seq", message.from_seq).finish();
}
std::string encode_body(const Accepted& message) { return id_only_body(message.id); }

std::string encode_body(const Rejected& message) {
  MapWriter out;
  out.string("id", message.id).string("reason", message.reason).integer("retry_after_ms", message.retry_after_ms);
  if (message.message) out.string("message", *message.message);
  return out.finish();
}

std::string encode_body(const StatusReply& message) {
  MapWriter out;
  out.string("id", message.id)
      .string("state", job_state_name(message.state))
      .integer("attempt", message.attempt)
      .integer("seq", message.seq);
  if (message.final_result) out.map("final", encode_final_result(*message.final_result));
  if (message.metadata) {
    check_msgpack_value(*message.metadata, "STATUS_REPLY field metadata");
    out.raw("metadata", *message.metadata);
  }
  return out.finish();
}

std::string encode_body(const Event& message) {
  MapWriter out;
  out.string("id", message.id)
      .integer("seq", message.seq)
      .token_ids("token_ids", message.token_ids)
      .string("text", message.text);
  if (message.final_result) out.map("final", encode_final_result(*message.final_result));
  if (!message.logprobs.empty()) out.raw("logprobs", encode_output_logprobs(message.logprobs));
  return out.finish();
}

std::string encode_body(const ErrorReply& message) {
  MapWriter out;
  out.string("code", message.code).string("message", message.message);
  if (message.id) out.string("id", *message.id);
  return out.finish();
}

template <>
Submit decode_body<Submit>(std::string_view body) {
  return read_body<Submit>(body, [](const FieldReader& fields) {
    return Submit{read_job(fields.map("job"), JobIdRule::kOptional)};
  });
}

template <>
Cancel decode_body<Cancel>(std::string_view body) {
  return read_body<Cancel>(body, [](const FieldReader& fields) { return Cancel{read_id(fields, "id")}; });
}

template <>
Status decode_body<Status>(std::string_view body) {
  return read_body<Status>(body, [](const FieldReader& fields) { return Status{read_id(fields, "id")}; });
}

template <>
Replay decode_body<Replay>(std::string_view body) {
  return read_body<Replay>(body, [](const FieldReader& fields) {
    return Replay{read_id(fields, "id"), fields.integer("from_seq", 0, kInt64Max)};
  });
}

template <>
Accepted decode_body<Accepted>(std::string_view body) {
  return read_body<Accepted>(body, [](const FieldReader& fields) { return Accepted{read_id(fields, "id")}; });
}

template <>
Rejected decode_body<Rejected>(std::string_view body) {
  return read_body<Rejected>(body, [](const FieldReader& fields) {
    return Rejected{read_id(fields, "id"), fields.string("reason", {1, kMaxCodeBytes}),
                    fields.integer("retry_after_ms", 0, kInt64Max),
                    fields.optional_string("message", {1, kMaxMessageBytes})};
  });
}

template <>
StatusReply decode_body<StatusReply>(std::string_view body) {
  return read_body<StatusReply>(body, [](const FieldReader& fields) {
    StatusReply reply{read_id(fields, "id"), read_job_state(fields), fields.integer("attempt", 0, kInt32Max),
                      fields.integer("seq", 0, kInt64Max), read_optional_final(fields)};
    const bool finished = reply.state == JobState::kFinished;
    if (finished && !reply.final_result) fields.fail("final", "missing (required when state is finished)");
    if (!finished && reply.final_result) fields.fail("final", "only allowed when state is finished");
    if (const msgpack::object* metadata = fields.find("metadata")) reply.metadata = read_raw(*metadata);
    return reply;
  });
}

template <>
Event decode_body<Event>(std::string_view body) {
  return read_body<Event>(body, [](const FieldReader& fields) {
    Event event{read_id(fields, "id"), fields.integer("seq", 0, kInt64Max),
                fields.token_ids("token_ids", kMaxOutputTokens),
                fields.string("text", {0, kMaxOutputTextBytes}), read_optional_final(fields), {}};
    event.logprobs = read_logprobs_for(fields, event.token_ids.size());
    return event;
  });
}

template <>
ErrorReply decode_body<ErrorReply>(std::string_view body) {
  return read_body<ErrorReply>(body, [](const FieldReader& fields) {
    return ErrorReply{fields.string("code", {1, kMaxCodeBytes}), fields.string("message", {0, kMaxMessageBytes}),
                      read_optional_id(fields, "id")};
  });
}

}  // namespace flashq::protocol
