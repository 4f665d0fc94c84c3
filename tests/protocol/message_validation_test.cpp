// Every message's fields: a missing required field, a value of the wrong type and a value out of
// range are kProtocol errors that name the message type and the field (docs/protocol.md).
#include <algorithm>
#include <cctype>

#include <gtest/gtest.h>

#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::decoder_for;
using testing::expect_protocol_error;
using testing::json;
using testing::msgpack_of;

enum class Kind { kString, kInteger, kNumber, kBool, kMap, kTokenArray, kStringArray, kMapArray };

struct Field {
  std::string pointer;  // JSON pointer into the valid body
  Kind kind;
  bool required;
};

// The wire path of a pointer: "/job/messages/0/role" -> "job.messages[0].role".
std::string field_path(const std::string& pointer) {
  std::string path;
  std::size_t start = 1;
  while (start <= pointer.size()) {
    const std::size_t end = std::min(pointer.find('/', start), pointer.size());
    const std::string part = pointer.substr(start, end - start);
    if (!part.empty() && std::isdigit(static_cast<unsigned char>(part[0]))) {
      path += "[" + part + "]";
    } else {
      path += (path.empty() ? "" : ".") + part;
    }
    start = end + 1;
  }
  return path;
}

json final_map() {
  return {{"finish_reason", "error"},
          {"usage", {{"prompt_tokens", 3}, {"completion_tokens", 2}}},
          {"spec_stats", {{"draft_steps", 1}, {"accepted_tokens", 2}, {"tau", 2.5}}},
          {"timings", {{"queue_ms", 1}, {"ttft_ms", 2}, {"total_ms", 3}}},
          {"error", "boom"}};
}

std::vector<Field> final_fields(const std::string& prefix) {
  return {{prefix + "/finish_reason", Kind::kString, true},
          {prefix + "/usage", Kind::kMap, true},
          {prefix + "/usage/prompt_tokens", Kind::kInteger, true},
          {prefix + "/usage/completion_tokens", Kind::kInteger, true},
          {prefix + "/spec_stats", Kind::kMap, true},
          {prefix + "/spec_stats/draft_steps", Kind::kInteger, true},
          {prefix + "/spec_stats/accepted_tokens", Kind::kInteger, true},
          {prefix + "/spec_stats/tau", Kind::kNumber, true},
          {prefix + "/timings", Kind::kMap, true},
          {prefix + "/timings/queue_ms", Kind::kInteger, true},
          {prefix + "/timings/ttft_ms", Kind::kInteger, true},
          {prefix + "/timings/total_ms", Kind::kInteger, true},
          {prefix + "/error", Kind::kString, true}};  // required because finish_reason is error
}

json full_job_map() {
  return {{"id", "j1"},          {"prompt", "hi"},      {"max_tokens", 10},  {"temperature", 0.5},
          {"top_p", 0.9},        {"top_k", 5},          {"seed", 7},         {"stop", {"x"}},
          {"stop_token_ids", {1}}, {"priority", 1},     {"deadline_ms", 1000}, {"spec", "off"},
          {"model", "m"},        {"metadata", {{"a", 1}}}, {"stream", true}, {"block_size", 8},
          {"session", "s1"}};
}

std::vector<Field> job_fields(bool id_required) {
  return {{"/job", Kind::kMap, true},
          {"/job/id", Kind::kString, id_required},
          {"/job/prompt", Kind::kString, true},
          {"/job/max_tokens", Kind::kInteger, false},
          {"/job/temperature", Kind::kNumber, false},
          {"/job/top_p", Kind::kNumber, false},
          {"/job/top_k", Kind::kInteger, false},
          {"/job/seed", Kind::kInteger, false},
          {"/job/stop", Kind::kStringArray, false},
          {"/job/stop_token_ids", Kind::kTokenArray, false},
          {"/job/priority", Kind::kInteger, false},
          {"/job/deadline_ms", Kind::kInteger, false},
          {"/job/spec", Kind::kString, false},
          {"/job/model", Kind::kString, false},
          {"/job/session", Kind::kString, false},
          {"/job/stream", Kind::kBool, false},
          {"/job/block_size", Kind::kInteger, false}};
}

struct MessageCase {
  std::string name;  // also the decoder
  json body;         // valid, with every field
  std::vector<Field> fields;
};

std::vector<MessageCase> all_cases() {
  std::vector<MessageCase> cases;
  cases.push_back({"SUBMIT", {{"job", full_job_map()}}, job_fields(false)});
  json tokens_job = full_job_map();
  tokens_job.erase("prompt");
  tokens_job["prompt_tokens"] = {1, 2};
  cases.push_back({"SUBMIT", {{"job", tokens_job}}, {{"/job/prompt_tokens", Kind::kTokenArray, true}}});
  json chat_job = full_job_map();
  chat_job.erase("prompt");
  chat_job["messages"] = {{{"role", "user"}, {"content", "hi"}}};
  cases.push_back({"SUBMIT",
                   {{"job", chat_job}},
                   {{"/job/messages", Kind::kMapArray, true},
                    {"/job/messages/0/role", Kind::kString, true},
                    {"/job/messages/0/content", Kind::kString, true}}});
  for (const char* name : {"CANCEL", "STATUS", "ACCEPTED"}) {
    cases.push_back({name, {{"id", "j1"}}, {{"/id", Kind::kString, true}}});
  }
  cases.push_back({"REJECTED",
                   {{"id", "j1"}, {"reason", "overloaded"}, {"retry_after_ms", 100}},
                   {{"/id", Kind::kString, true}, {"/reason", Kind::kString, true},
                    {"/retry_after_ms", Kind::kInteger, true}}});
  std::vector<Field> status_fields = {{"/id", Kind::kString, true}, {"/state", Kind::kString, true},
                                      {"/attempt", Kind::kInteger, true}, {"/seq", Kind::kInteger, true},
                                      {"/final", Kind::kMap, true}};  // required because finished
  for (const Field& f : final_fields("/final")) status_fields.push_back(f);
  cases.push_back({"STATUS_REPLY",
                   {{"id", "j1"}, {"state", "finished"}, {"attempt", 1}, {"seq", 3}, {"final", final_map()}},
                   status_fields});
  std::vector<Field> event_fields = {{"/id", Kind::kString, true}, {"/seq", Kind::kInteger, true},
                                     {"/token_ids", Kind::kTokenArray, true}, {"/text", Kind::kString, true},
                                     {"/final", Kind::kMap, false}};
  for (const Field& f : final_fields("/final")) event_fields.push_back(f);
  cases.push_back({"EVENT",
                   {{"id", "j1"}, {"seq", 0}, {"token_ids", {1, 2}}, {"text", "ab"}, {"final", final_map()}},
                   event_fields});
  cases.push_back({"ERROR",
                   {{"code", "protocol"}, {"message", "bad"}, {"id", "j1"}},
                   {{"/code", Kind::kString, true}, {"/message", Kind::kString, true}, {"/id", Kind::kString, false}}});
  cases.push_back({"READY",
                   {{"worker_id", "w1"}, {"model", "m"}, {"slots", 4}, {"block_size", 16}, {"backend", "cpu"},
                    {"max_model_len", 4096}, {"tool_call_format", "hermes"}, {"reasoning_format", "think"}},
                   {{"/worker_id", Kind::kString, true},
                    {"/model", Kind::kString, true},
                    {"/slots", Kind::kInteger, true},
                    {"/block_size", Kind::kInteger, true},
                    {"/backend", Kind::kString, true},
                    {"/max_model_len", Kind::kInteger, false},
                    {"/tool_call_format", Kind::kString, false},
                    {"/reasoning_format", Kind::kString, false}}});
  cases.push_back({"MODELS", json::object(), {}});
  cases.push_back({"MODELS_REPLY",
                   {{"models",
                     {{{"name", "m"}, {"max_model_len", 4096}, {"tool_call_format", "llama3_json"},
                       {"reasoning_format", "none"}, {"workers", 2}, {"slots", 8}}}}},
                   {{"/models", Kind::kMapArray, true},
                    {"/models/0/name", Kind::kString, true},
                    {"/models/0/max_model_len", Kind::kInteger, true},
                    {"/models/0/tool_call_format", Kind::kString, false},
                    {"/models/0/reasoning_format", Kind::kString, false},
                    {"/models/0/workers", Kind::kInteger, true},
                    {"/models/0/slots", Kind::kInteger, true}}});
  cases.push_back({"HEARTBEAT", {{"load", 2}}, {{"/load", Kind::kInteger, true}}});
  cases.push_back({"TOKENS",
                   {{"id", "j1"}, {"attempt", 1}, {"seq", 0}, {"token_ids", {1}}, {"text", "a"},
                    {"spec", {{"drafts", 2}, {"draft_tokens", 6}, {"accepted_tokens", 3}, {"accepted_per_pos", {2, 1}}}}},
                   {{"/id", Kind::kString, true},
                    {"/attempt", Kind::kInteger, true},
                    {"/seq", Kind::kInteger, true},
                    {"/token_ids", Kind::kTokenArray, true},
                    {"/text", Kind::kString, true},
                    {"/spec", Kind::kMap, false},
                    {"/spec/drafts", Kind::kInteger, true},
                    {"/spec/draft_tokens", Kind::kInteger, true},
                    {"/spec/accepted_tokens", Kind::kInteger, true},
                    {"/spec/accepted_per_pos", Kind::kTokenArray, true}}});
  json final_body = final_map();
  final_body["id"] = "j1";
  final_body["attempt"] = 1;
  std::vector<Field> final_message_fields = {{"/id", Kind::kString, true}, {"/attempt", Kind::kInteger, true}};
  for (const Field& f : final_fields("")) final_message_fields.push_back(f);
  cases.push_back({"FINAL", final_body, final_message_fields});
  std::vector<Field> assign_fields = job_fields(true);
  assign_fields.push_back({"/attempt", Kind::kInteger, true});
  assign_fields.push_back({"/resume_tokens", Kind::kTokenArray, true});
  assign_fields.push_back({"/resume_text_bytes", Kind::kInteger, false});
  cases.push_back({"ASSIGN",
                   {{"job", full_job_map()}, {"attempt", 2}, {"resume_tokens", {5, 6}}, {"resume_text_bytes", 3}},
                   assign_fields});
  return cases;
}

// Values of every msgpack type but the one `kind` asks for (nil is absence, tested apart).
std::vector<json> wrong_values(Kind kind) {
  std::vector<json> values;
  if (kind != Kind::kBool) values.push_back(true);
  if (kind != Kind::kInteger && kind != Kind::kNumber) values.push_back(7);
  if (kind != Kind::kNumber) values.push_back(1.5);
  if (kind != Kind::kString) values.push_back("text");
  if (kind != Kind::kMap) values.push_back({{"k", 1}});
  const bool is_array = kind == Kind::kTokenArray || kind == Kind::kStringArray || kind == Kind::kMapArray;
  if (!is_array) values.push_back(json::array({1}));
  if (kind == Kind::kTokenArray) values.push_back(json::array({"x"}));
  if (kind == Kind::kStringArray || kind == Kind::kMapArray) values.push_back(json::array({1}));
  values.push_back(json::binary({1, 2}));
  return values;
}

TEST(MessageFields, TheValidBodiesDecode) {
  for (const MessageCase& c : all_cases()) {
    EXPECT_NO_THROW(decoder_for(c.name).decode(msgpack_of(c.body))) << c.name << " " << c.body.dump();
  }
}

TEST(MessageFields, EveryMissingRequiredFieldIsNamed) {
  for (const MessageCase& c : all_cases()) {
    for (const Field& f : c.fields) {
      if (!f.required) continue;
      json body = c.body;
      const json::json_pointer pointer(f.pointer);
      body.at(pointer.parent_pointer()).erase(pointer.back());
      SCOPED_TRACE(c.name + " without " + f.pointer);
      // The three prompt keys are one required choice, reported under job.prompt.
      const bool prompt_key = f.pointer == "/job/prompt_tokens" || f.pointer == "/job/messages";
      const std::string path = prompt_key ? "job.prompt" : field_path(f.pointer);
      expect_protocol_error([&] { decoder_for(c.name).decode(msgpack_of(body)); },
                            {c.name + " field " + path, "missing"});
    }
  }
}

TEST(MessageFields, EveryWrongTypedValueIsNamed) {
  for (const MessageCase& c : all_cases()) {
    for (const Field& f : c.fields) {
      for (const json& wrong : wrong_values(f.kind)) {
        json body = c.body;
        body[json::json_pointer(f.pointer)] = wrong;
        SCOPED_TRACE(c.name + " " + f.pointer + " = " + wrong.dump());
        expect_protocol_error([&] { decoder_for(c.name).decode(msgpack_of(body)); },
                              {c.name + " field " + field_path(f.pointer), "must be"});
      }
    }
  }
}

TEST(MessageFields, OptionalFieldsMayBeLeftOut) {
  for (const MessageCase& c : all_cases()) {
    json body = c.body;
    for (const Field& f : c.fields) {
      if (f.required) continue;
      const json::json_pointer pointer(f.pointer);
      body.at(pointer.parent_pointer()).erase(pointer.back());
    }
    EXPECT_NO_THROW(decoder_for(c.name).decode(msgpack_of(body))) << c.name;
  }
}

void expect_error(const std::string& message, const json& body, const std::string& field, const std::string& problem) {
  expect_protocol_error([&] { decoder_for(message).decode(msgpack_of(body)); },
                        {message + " field " + field, problem});
}

TEST(MessageRanges, IdsInEveryMessageFollowTheJobIdRule) {
  for (const char* name : {"CANCEL", "STATUS", "ACCEPTED"}) {
    expect_error(name, {{"id", "a b"}}, "id", "printable ASCII");
    expect_error(name, {{"id", std::string(129, 'a')}}, "id", "129 bytes");
  }
  expect_error("READY", {{"worker_id", ""}, {"model", "m"}, {"slots", 1}, {"block_size", 0}, {"backend", "cpu"}},
               "worker_id", "0 bytes");
  expect_error("ERROR", {{"code", "x"}, {"message", ""}, {"id", "\x01"}}, "id", "printable ASCII");
}

TEST(MessageRanges, RejectedNeedsAReasonAndANonNegativeRetryHint) {
  expect_error("REJECTED", {{"id", "j"}, {"reason", ""}, {"retry_after_ms", 0}}, "reason", "0 bytes");
  expect_error("REJECTED", {{"id", "j"}, {"reason", "overloaded"}, {"retry_after_ms", -1}}, "retry_after_ms",
               "0..");
  expect_error("REJECTED", {{"id", "j"}, {"reason", "unknown_model"}, {"retry_after_ms", 0}, {"message", ""}},
               "message", "0 bytes");
}

TEST(MessageRanges, StatusReplyStateIsOneOfFour) {
  expect_error("STATUS_REPLY", {{"id", "j"}, {"state", "done"}, {"attempt", 0}, {"seq", 0}}, "state",
               "queued, running, finished, unknown");
}

TEST(MessageRanges, StatusReplyCarriesFinalExactlyWhenFinished) {
  expect_error("STATUS_REPLY", {{"id", "j"}, {"state", "finished"}, {"attempt", 1}, {"seq", 1}}, "final",
               "required when state is finished");
  expect_error("STATUS_REPLY", {{"id", "j"}, {"state", "running"}, {"attempt", 1}, {"seq", 1}, {"final", final_map()}},
               "final", "only allowed when state is finished");
}

TEST(MessageRanges, StatusReplyAttemptAndSeqAreNonNegative) {
  expect_error("STATUS_REPLY", {{"id", "j"}, {"state", "queued"}, {"attempt", -1}, {"seq", 0}}, "attempt", "0..");
  expect_error("STATUS_REPLY", {{"id", "j"}, {"state", "queued"}, {"attempt", 0}, {"seq", -1}}, "seq", "0..");
}

TEST(MessageRanges, AttemptsStartAtOneInWorkerMessages) {
  expect_error("TOKENS", {{"id", "j"}, {"attempt", 0}, {"seq", 0}, {"token_ids", {1}}, {"text", ""}}, "attempt",
               "1..2147483647");
  json final_body = final_map();
  final_body["id"] = "j";
  final_body["attempt"] = 0;
  expect_error("FINAL", final_body, "attempt", "1..2147483647");
  expect_error("ASSIGN", {{"job", {{"id", "j"}, {"prompt", "p"}}}, {"attempt", 0}, {"resume_tokens", json::array()}},
               "attempt", "1..2147483647");
}

TEST(MessageRanges, SeqIsNonNegative) {
  expect_error("TOKENS", {{"id", "j"}, {"attempt", 1}, {"seq", -1}, {"token_ids", {1}}, {"text", ""}}, "seq", "0..");
  expect_error("EVENT", {{"id", "j"}, {"seq", -1}, {"token_ids", {1}}, {"text", ""}}, "seq", "0..");
}

TEST(MessageRanges, OutputTokenIdsAreValidIds) {
  expect_error("TOKENS", {{"id", "j"}, {"attempt", 1}, {"seq", 0}, {"token_ids", {-1}}, {"text", ""}}, "token_ids[0]",
               "0..2147483647");
  expect_error("ASSIGN", {{"job", {{"id", "j"}, {"prompt", "p"}}}, {"attempt", 1}, {"resume_tokens", {1, -5}}},
               "resume_tokens[1]", "0..2147483647");
}

TEST(MessageRanges, ResumeTextBytesIsNonNegative) {
  expect_error("ASSIGN",
               {{"job", {{"id", "j"}, {"prompt", "p"}}}, {"attempt", 2}, {"resume_tokens", {1}}, {"resume_text_bytes", -1}},
               "resume_text_bytes", "0..");
}

TEST(MessageRanges, FinishReasonIsOneOfSix) {
  json body = final_map();
  body["id"] = "j";
  body["attempt"] = 1;
  body["finish_reason"] = "eos";
  expect_error("FINAL", body, "finish_reason", "stop, length, cancelled, deadline, error, rejected");
}

TEST(MessageRanges, AnErrorIsNeverReportedAsSuccess) {
  json body = final_map();
  body["id"] = "j";
  body["attempt"] = 1;
  body.erase("error");
  expect_error("FINAL", body, "error", "required when finish_reason is error");
  body["error"] = "";
  expect_error("FINAL", body, "error", "0 bytes");
  for (const char* success : {"stop", "length"}) {
    body["finish_reason"] = success;
    body["error"] = "oops";
    expect_error("FINAL", body, "error", std::string("not allowed when finish_reason is ") + success);
  }
}

TEST(MessageRanges, CountsAndTimingsAreNonNegative) {
  for (const char* pointer : {"/usage/prompt_tokens", "/usage/completion_tokens", "/spec_stats/draft_steps",
                              "/spec_stats/accepted_tokens", "/timings/queue_ms", "/timings/ttft_ms",
                              "/timings/total_ms", "/spec_stats/tau"}) {
    json body = final_map();
    body["id"] = "j";
    body["attempt"] = 1;
    body[json::json_pointer(pointer)] = -1;
    SCOPED_TRACE(pointer);
    expect_protocol_error([&] { decoder_for("FINAL").decode(msgpack_of(body)); }, {"FINAL field " + field_path(pointer)});
  }
}

TEST(MessageRanges, ReadyNeedsAtLeastOneSlotAndABlockSizeUpTo1024) {
  const json ready = {{"worker_id", "w"}, {"model", "m"}, {"slots", 1}, {"block_size", 0}, {"backend", "cpu"}};
  json body = ready;
  body["slots"] = 0;
  expect_error("READY", body, "slots", "1..2147483647");
  body = ready;
  body["block_size"] = 1025;
  expect_error("READY", body, "block_size", "0..1024");
  body = ready;
  body["backend"] = "";
  expect_error("READY", body, "backend", "0 bytes");
}

TEST(MessageRanges, ReadyModelFieldsAreAContextLengthAndKnownFormatNames) {
  const json ready = {{"worker_id", "w"}, {"model", "m"}, {"slots", 1}, {"block_size", 0}, {"backend", "cpu"}};
  json body = ready;
  body["max_model_len"] = -1;
  expect_error("READY", body, "max_model_len", "0..2147483647");
  body = ready;
  body["tool_call_format"] = "pythonic";
  expect_error("READY", body, "tool_call_format", "none, hermes, llama3_json");
  body = ready;
  body["reasoning_format"] = "think_tags";
  expect_error("READY", body, "reasoning_format", "none, think, think_in_prompt");
  body = ready;
  body["reasoning_format"] = "";
  expect_error("READY", body, "reasoning_format", "0 bytes");
}

json models_entry(const std::string& name) {
  return {{"name", name}, {"max_model_len", 4096}, {"tool_call_format", "hermes"},
          {"reasoning_format", "think"}, {"workers", 1}, {"slots", 1}};
}

TEST(MessageRanges, ModelsReplyFieldsAreInRangeAndNamesKnown) {
  const std::vector<std::pair<std::pair<std::string, json>, std::pair<std::string, std::string>>> cases = {
      {{"name", ""}, {"models[0].name", "0 bytes"}},
      {{"name", std::string(257, 'm')}, {"models[0].name", "257 bytes"}},
      {{"max_model_len", -1}, {"models[0].max_model_len", "0..2147483647"}},
      {{"workers", 0}, {"models[0].workers", "1..2147483647"}},
      {{"slots", 0}, {"models[0].slots", "1.."}},
      {{"tool_call_format", "xml"}, {"models[0].tool_call_format", "none, hermes, llama3_json"}},
      {{"reasoning_format", "yes"}, {"models[0].reasoning_format", "none, think, think_in_prompt"}},
  };
  for (const auto& [change, expected] : cases) {
    json entry = models_entry("m");
    entry[change.first] = change.second;
    SCOPED_TRACE(change.first);
    expect_error("MODELS_REPLY", {{"models", {entry}}}, expected.first, expected.second);
  }
}

TEST(MessageRanges, ModelsReplyNamesEachModelOnce) {
  expect_error("MODELS_REPLY", {{"models", {models_entry("a"), models_entry("b"), models_entry("a")}}},
               "models[2].name", "repeats");
}

TEST(MessageRanges, ModelsReplyHoldsAtMost4096Models) {
  json models = json::array();
  for (int i = 0; i <= 4096; ++i) models.push_back(models_entry("m" + std::to_string(i)));
  expect_error("MODELS_REPLY", {{"models", models}}, "models", "4096");
}

TEST(MessageRanges, HeartbeatLoadIsNonNegative) {
  expect_error("HEARTBEAT", {{"load", -1}}, "load", "0..2147483647");
}

TEST(MessageRanges, ErrorCodeIsNonEmpty) {
  expect_error("ERROR", {{"code", ""}, {"message", "m"}}, "code", "0 bytes");
  expect_error("ERROR", {{"code", "protocol"}, {"message", std::string((64 << 10) + 1, 'm')}}, "message", "bytes");
}

TEST(BodyShape, KeysMustBeStrings) {
  // {1: "x", "id": "j"} written by hand: nlohmann cannot make integer keys.
  const std::string body = testing::bytes_of("\x82\x01\xa1x\xa2id\xa1j");
  expect_protocol_error([&] { decode_body<Cancel>(body); }, {"CANCEL body", "keys must be strings"});
}

TEST(BodyShape, BinaryKeysAreNotStrings) {
  const std::string body = testing::bytes_of("\x81\xc4\x02id\xa1j");
  expect_protocol_error([&] { decode_body<Cancel>(body); }, {"CANCEL body", "keys must be strings"});
}

TEST(BodyShape, DuplicateKeysAreRefused) {
  const std::string body = testing::bytes_of("\x82\xa2id\xa1j\xa2id\xa1k");
  expect_protocol_error([&] { decode_body<Cancel>(body); }, {"CANCEL body", "duplicate key \"id\""});
}

TEST(BodyShape, DuplicateKeysInsideTheJobAreRefused) {
  // {"job": {"prompt": "a", "prompt": "b"}}
  const std::string body = testing::bytes_of("\x81\xa3job\x82\xa6prompt\xa1\x61\xa6prompt\xa1\x62");
  expect_protocol_error([&] { decode_body<Submit>(body); }, {"SUBMIT field job", "duplicate key \"prompt\""});
}

TEST(BodyShape, TheBodyMustBeAMap) {
  for (const json& value : {json::array({1}), json(5), json("id"), json(nullptr)}) {
    expect_protocol_error([&] { decode_body<Cancel>(msgpack_of(value)); }, {"CANCEL body", "not a msgpack map"});
  }
}

TEST(BodyShape, AnEmptyBodyIsRefused) {
  expect_protocol_error([] { decode_body<Disconnect>(""); }, {"DISCONNECT body", "empty"});
}

TEST(BodyShape, BytesAfterTheMapAreRefused) {
  const std::string body = msgpack_of({{"id", "j"}}) + msgpack_of({{"id", "k"}});
  expect_protocol_error([&] { decode_body<Cancel>(body); }, {"CANCEL body", "bytes after the end"});
}

TEST(BodyShape, EmptyMessagesAreEmptyMaps) {
  EXPECT_EQ(encode_body(Disconnect{}), testing::bytes_of("\x80"));
  EXPECT_EQ(encode_body(BrokerHeartbeat{}), testing::bytes_of("\x80"));
  EXPECT_NO_THROW(decode_body<Disconnect>(msgpack_of({{"reason", "shutting down"}})));
}

TEST(BodyShape, BodiesOver16MiBAreRefusedBeforeParsing) {
  const std::string body = msgpack_of({{"id", "j"}, {"padding", std::string(16 << 20, 'x')}});
  expect_protocol_error([&] { decode_body<Cancel>(body); }, {"CANCEL body", "over the limit of 16777216"});
}

}  // namespace
}  // namespace flashq::protocol
