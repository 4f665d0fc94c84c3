// Messages between a producer (DEALER) and the broker's frontend (ROUTER): docs/protocol.md,
// "Producer messages". EVENT is also what the stream socket publishes (stream.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "shared/error.h"
#include "shared/protocol/body.h"
#include "shared/protocol/final_result.h"
#include "shared/protocol/job.h"
#include "shared/protocol/message_type.h"
#include "shared/protocol/token_logprobs.h"

namespace flashq::protocol {

// Producer -> broker: enqueue a job. Answered by ACCEPTED or REJECTED.
struct Submit {
  static constexpr MessageType kType = MessageType::kSubmit;
  Job job;
  bool operator==(const Submit&) const = default;
};

// Producer -> broker, and broker -> worker: stop a job.
struct Cancel {
  static constexpr MessageType kType = MessageType::kCancel;
  std::string id;
  bool operator==(const Cancel&) const = default;
};

// Producer -> broker: ask where a job stands. Answered by STATUS_REPLY.
struct Status {
  static constexpr MessageType kType = MessageType::kStatus;
  std::string id;
  bool operator==(const Status&) const = default;
};

// Producer -> broker: send me this job's events from seq `from_seq` on (a late subscriber, or
// one that saw a gap). Answered by those EVENTs from the broker's bounded replay buffer, or by
// ERROR `replay_unavailable` naming the oldest seq still kept.
struct Replay {
  static constexpr MessageType kType = MessageType::kReplay;
  std::string id;
  std::int64_t from_seq = 0;
  bool operator==(const Replay&) const = default;
};

struct Accepted {
  static constexpr MessageType kType = MessageType::kAccepted;
  std::string id;
  bool operator==(const Accepted&) const = default;
};

struct Rejected {
  static constexpr MessageType kType = MessageType::kRejected;
  std::string id;
  std::string reason;               // overloaded, shutting_down, unknown_model, prompt_too_long, ...
  std::int64_t retry_after_ms = 0;  // 0: do not retry
  std::optional<std::string> message;  // optional, what a person reads: e.g. the models served
  bool operator==(const Rejected&) const = default;
};

enum class JobState : std::uint8_t { kQueued, kRunning, kFinished, kUnknown };
std::string_view job_state_name(JobState state);  // "queued", "running", "finished", "unknown"

struct StatusReply {
  static constexpr MessageType kType = MessageType::kStatusReply;
  std::string id;
  JobState state = JobState::kUnknown;
  std::int64_t attempt = 0;  // 0 until first assigned
  std::int64_t seq = 0;      // stream events published so far (the next event's seq)
  std::optional<FinalResult> final_result;  // "final": present exactly when state is finished
  // The job's metadata as submitted (one msgpack value), when the broker still holds the job and
  // it had some: what a producer kept with its job (the gateway: a response's settings).
  std::optional<std::string> metadata;
  bool operator==(const StatusReply&) const = default;
};

// One step of a job's output; the last one carries `final`.
struct Event {
  static constexpr MessageType kType = MessageType::kEvent;
  std::string id;
  std::int64_t seq = 0;
  TokenIds token_ids;
  std::string text;
  std::optional<FinalResult> final_result;  // "final"
  // One per token id, when the job asked for log-probabilities (job.logprobs); else empty.
  std::vector<OutputLogprobs> logprobs;
  bool operator==(const Event&) const = default;
};

// Broker -> producer (or any peer): a request that could not be served. `code` is a flashq
// error code name (error_code_name).
struct ErrorReply {
  static constexpr MessageType kType = MessageType::kError;
  std::string code;
  std::string message;
  std::optional<std::string> id;  // the job concerned, when known
  bool operator==(const ErrorReply&) const = default;
};

// The ERROR reply for a caught error; the message is cut to the protocol's limit.
ErrorReply error_reply(const Error& error, std::optional<std::string> id = std::nullopt);

std::string encode_body(const Submit& message);
std::string encode_body(const Cancel& message);
std::string encode_body(const Status& message);
std::string encode_body(const Replay& message);
std::string encode_body(const Accepted& message);
std::string encode_body(const Rejected& message);
std::string encode_body(const StatusReply& message);
std::string encode_body(const Event& message);
std::string encode_body(const ErrorReply& message);

template <> Submit decode_body<Submit>(std::string_view body);
template <> Cancel decode_body<Cancel>(std::string_view body);
template <> Status decode_body<Status>(std::string_view body);
template <> Replay decode_body<Replay>(std::string_view body);
template <> Accepted decode_body<Accepted>(std::string_view body);
template <> Rejected decode_body<Rejected>(std::string_view body);
template <> StatusReply decode_body<StatusReply>(std::string_view body);
template <> Event decode_body<Event>(std::string_view body);
template <> ErrorReply decode_body<ErrorReply>(std::string_view body);

}  // namespace flashq::protocol
