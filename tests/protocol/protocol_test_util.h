// Shared by the protocol tests: fully populated messages, bodies written as JSON, a decoder for
// every message type, and a check that an error is a kProtocol naming what it should.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/protocol/messages.h"

namespace flashq::protocol::testing {

using nlohmann::json;

// The msgpack encoding of a JSON value (nlohmann writes the shortest forms, as msgpack-c does).
inline std::string msgpack_of(const json& value) {
  const std::vector<std::uint8_t> bytes = json::to_msgpack(value);
  return std::string(bytes.begin(), bytes.end());
}

// Bytes written by hand as a string literal, embedded zeros included.
template <std::size_t N>
std::string bytes_of(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

inline FinalResult full_final_result() {
  FinalResult result;
  result.finish_reason = FinishReason::kError;
  result.usage = {12, 34};
  result.spec_stats = {5, 20, 4.25};
  result.timings = {3, 40, 500};
  result.error = "worker lost its GPU";
  return result;
}

// Every field away from its default.
inline Job full_job() {
  Job job;
  job.id = "job-42";
  job.prompt = std::string("Write a haiku about queues.");
  job.max_tokens = 512;
  job.temperature = 0.7;
  job.top_p = 0.9;
  job.top_k = 40;
  job.seed = 0xFFFF'FFFF'FFFF'FFFFull;
  job.stop = {"\n\n", "END"};
  job.stop_token_ids = {151645, 151643};
  job.priority = -3;
  job.deadline_ms = 30'000;
  job.spec = SpecMode::kDflash;
  job.model = "qwen3-0.6b";
  job.session = "conversation-7";
  job.metadata = msgpack_of({{"trace", "abc"}, {"n", {1, 2.5, nullptr, json::object()}}});
  job.stream = true;
  job.block_size = 16;
  job.structured_output = R"({"type": "json_object"})";
  job.logprobs = 20;
  return job;
}

// Two tokens' log-probabilities: one with bytes that are not UTF-8 and two candidates, one
// without candidates.
inline std::vector<OutputLogprobs> full_logprobs() {
  return {{{9, -0.25, std::string("\xe2\x80", 2)}, {{9, -0.25, std::string("\xe2\x80", 2)}, {4, -1.5, "ab"}}},
          {{8, -3.0, " x"}, {}}};
}

// Runs `decode` and expects a kProtocol error whose message contains every one of `parts`.
inline void expect_protocol_error(const std::function<void()>& decode, const std::vector<std::string>& parts) {
  try {
    decode();
    ADD_FAILURE() << "no error; expected one mentioning \"" << (parts.empty() ? "" : parts.front()) << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "error \"" << e.what() << "\" does not mention \"" << part << "\"";
    }
  }
}

// One decoder per message struct; the name is the wire name (HEARTBEAT twice: worker's, broker's).
struct NamedDecoder {
  std::string name;
  std::function<void(std::string_view)> decode;
};

inline std::vector<NamedDecoder> all_decoders() {
  return {
      {"SUBMIT", [](std::string_view b) { decode_body<Submit>(b); }},
      {"CANCEL", [](std::string_view b) { decode_body<Cancel>(b); }},
      {"STATUS", [](std::string_view b) { decode_body<Status>(b); }},
      {"ACCEPTED", [](std::string_view b) { decode_body<Accepted>(b); }},
      {"REJECTED", [](std::string_view b) { decode_body<Rejected>(b); }},
      {"STATUS_REPLY", [](std::string_view b) { decode_body<StatusReply>(b); }},
      {"EVENT", [](std::string_view b) { decode_body<Event>(b); }},
      {"ERROR", [](std::string_view b) { decode_body<ErrorReply>(b); }},
      {"READY", [](std::string_view b) { decode_body<Ready>(b); }},
      {"HEARTBEAT", [](std::string_view b) { decode_body<WorkerHeartbeat>(b); }},
      {"HEARTBEAT", [](std::string_view b) { decode_body<BrokerHeartbeat>(b); }},
      {"DISCONNECT", [](std::string_view b) { decode_body<Disconnect>(b); }},
      {"TOKENS", [](std::string_view b) { decode_body<Tokens>(b); }},
      {"FINAL", [](std::string_view b) { decode_body<Final>(b); }},
      {"ASSIGN", [](std::string_view b) { decode_body<Assign>(b); }},
      {"MODELS", [](std::string_view b) { decode_body<Models>(b); }},
      {"MODELS_REPLY", [](std::string_view b) { decode_body<ModelsReply>(b); }},
  };
}

inline NamedDecoder decoder_for(std::string_view name) {
  for (NamedDecoder& d : all_decoders()) {
    if (d.name == name) return d;
  }
  throw std::logic_error("no decoder named " + std::string(name));
}

// Encodings of one fully populated message of every type.
inline std::vector<std::pair<std::string, std::string>> full_bodies() {
  return {
      {"SUBMIT", encode_body(Submit{full_job()})},
      {"CANCEL", encode_body(Cancel{"job-42"})},
      {"STATUS", encode_body(Status{"job-42"})},
      {"ACCEPTED", encode_body(Accepted{"job-42"})},
      {"REJECTED", encode_body(Rejected{"job-42", "overloaded", 250})},
      {"STATUS_REPLY", encode_body(StatusReply{"job-42", JobState::kFinished, 2, 17, full_final_result()})},
      {"EVENT", encode_body(Event{"job-42", 17, {1, 2, 3}, "abc", full_final_result()})},
      {"ERROR", encode_body(ErrorReply{"protocol", "SUBMIT field job.top_p: bad", "job-42"})},
      {"READY", encode_body(Ready{"worker-1", "qwen3-0.6b", 8, 16, "cuda"})},
      {"HEARTBEAT", encode_body(WorkerHeartbeat{3})},
      {"DISCONNECT", encode_body(Disconnect{})},
      {"TOKENS", encode_body(Tokens{"job-42", 2, 5, {9, 8, 7}, "xyz"})},
      {"FINAL", encode_body(Final{"job-42", 2, full_final_result()})},
      {"ASSIGN", encode_body(Assign{full_job(), 2, {4, 5, 6}, 11})},
      {"READY", encode_body(Ready{"worker-1", "qwen3-0.6b", 8, 16, "cuda", 40960, ToolCallFormat::kHermes,
                                  ReasoningFormat::kThinkTags})},
      {"MODELS", encode_body(Models{})},
      {"MODELS_REPLY",
       encode_body(ModelsReply{{{"qwen3-0.6b", 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags, 2, 16}}})},
  };
}

}  // namespace flashq::protocol::testing
