// Messages between a worker (DEALER) and the broker's backend (ROUTER): docs/protocol.md,
// "Worker messages". CANCEL (producer_messages.h) also goes broker -> worker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "shared/protocol/body.h"
#include "shared/protocol/final_result.h"
#include "shared/protocol/job.h"
#include "shared/protocol/message_type.h"
#include "shared/protocol/token_logprobs.h"
#include "shared/protocol/output_format.h"
#include "shared/protocol/step_speculation.h"

namespace flashq::protocol {

// Worker -> broker, first on every connection: what this worker serves.
struct Ready {
  static constexpr MessageType kType = MessageType::kReady;
  std::string worker_id;
  std::string model;
  std::int64_t slots = 1;       // jobs it runs at once
  std::int64_t block_size = 0;  // its DFlash block size, 0 = no drafter
  std::string backend;          // "cpu", "cuda"
  // Optional (a worker that does not send them serves a model of unknown context length whose
  // output has no known format): what the gateway needs to list the model and read its output.
  std::int64_t max_model_len = 0;  // the target's context in tokens, as the worker enforces it; 0 = unknown
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  bool operator==(const Ready&) const = default;
};

// Worker -> broker, every second.
struct WorkerHeartbeat {
  static constexpr MessageType kType = MessageType::kHeartbeat;
  std::int64_t load = 0;  // jobs running now
  bool operator==(const WorkerHeartbeat&) const = default;
};

// Broker -> worker, every second; an empty map.
struct BrokerHeartbeat {
  static constexpr MessageType kType = MessageType::kHeartbeat;
  bool operator==(const BrokerHeartbeat&) const = default;
};

// Either way: the sender is going away (or, from the broker, does not know the worker).
struct Disconnect {
  static constexpr MessageType kType = MessageType::kDisconnect;
  bool operator==(const Disconnect&) const = default;
};

// Broker -> worker: run this attempt of a job. `resume_tokens` are the tokens already streamed by
// earlier attempts; the worker continues after them (prompt + resume_tokens) and never sends
// them again. Of their text, the first `resume_text_bytes` bytes were streamed; the rest was
// still held back (an incomplete UTF-8 character, a possible stop string) and is the worker's to
// send.
struct Assign {
  static constexpr MessageType kType = MessageType::kAssign;
  Job job;                   // with its id
  std::int64_t attempt = 1;  // 1 for the first
  TokenIds resume_tokens;
  std::int64_t resume_text_bytes = 0;
  bool operator==(const Assign&) const = default;
};

// Worker -> broker: one engine step's output for one job attempt.
struct Tokens {
  static constexpr MessageType kType = MessageType::kTokens;
  std::string id;
  std::int64_t attempt = 1;
  std::int64_t seq = 0;  // 0, 1, 2, ... within this attempt
  TokenIds token_ids;
  std::string text;
  // What speculation did in the step (or steps) these tokens came from; absent from a worker
  // that does not report it, or when the step carried no draft.
  std::optional<StepSpeculation> spec;
  // One per token id, when the job asked for log-probabilities (job.logprobs); else empty.
  std::vector<OutputLogprobs> logprobs;
  bool operator==(const Tokens&) const = default;
};

// Worker -> broker: how a job attempt ended; exactly one per attempt.
struct Final {
  static constexpr MessageType kType = MessageType::kFinal;
  std::string id;
  std::int64_t attempt = 1;
  FinalResult result;  // its fields sit at the top level of the body
  bool operator==(const Final&) const = default;
};

std::string encode_body(const Ready& message);
std::string encode_body(const WorkerHeartbeat& message);
std::string encode_body(const BrokerHeartbeat& message);
std::string encode_body(const Disconnect& message);
std::string encode_body(const Assign& message);
std::string encode_body(const Tokens& message);
std::string encode_body(const Final& message);

template <> Ready decode_body<Ready>(std::string_view body);
template <> WorkerHeartbeat decode_body<WorkerHeartbeat>(std::string_view body);
template <> BrokerHeartbeat decode_body<BrokerHeartbeat>(std::string_view body);
template <> Disconnect decode_body<Disconnect>(std::string_view body);
template <> Assign decode_body<Assign>(std::string_view body);
template <> Tokens decode_body<Tokens>(std::string_view body);
template <> Final decode_body<Final>(std::string_view body);

}  // namespace flashq::protocol
