// Every message type survives encode -> decode (and the frames) with every field set; optional
// fields and defaults behave as docs/protocol.md says.
#include <gtest/gtest.h>

#include "shared/protocol/map_writer.h"
#include "shared/protocol/wire.h"
#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::full_final_result;
using testing::full_job;
using testing::json;
using testing::msgpack_of;

template <typename M> M full_message();
template <> Submit full_message<Submit>() { return {full_job()}; }
template <> Cancel full_message<Cancel>() { return {"job-42"}; }
template <> Status full_message<Status>() { return {"job-42"}; }
template <> Accepted full_message<Accepted>() { return {"job-42"}; }
template <> Rejected full_message<Rejected>() {
  return {"job-42", "unknown_model", 0, "no worker serves model 'x'; models served: qwen3-0.6b"};
}
template <> StatusReply full_message<StatusReply>() {
  return {"job-42", JobState::kFinished, 2, 17, full_final_result(), std::string("\x81\xa1k\x01", 4)};
}
template <> Event full_message<Event>() {
  return {"job-42", 17, {1, 2}, "abc", full_final_result(), testing::full_logprobs()};
}
template <> ErrorReply full_message<ErrorReply>() { return {"protocol", "SUBMIT field job.top_p: bad", "job-42"}; }
template <> Ready full_message<Ready>() {
  return {"worker-1", "qwen3-0.6b", 8, 16, "cuda", 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkInPrompt};
}
template <> Models full_message<Models>() { return {}; }
template <> ModelsReply full_message<ModelsReply>() {
  return {{{"llama-3.2-1b", 131072, ToolCallFormat::kLlama3Json, ReasoningFormat::kNone, 1, 4},
           {"qwen3-0.6b", 40960, ToolCallFormat::kHermes, ReasoningFormat::kThinkTags, 3, 24}}};
}
template <> WorkerHeartbeat full_message<WorkerHeartbeat>() { return {3}; }
template <> BrokerHeartbeat full_message<BrokerHeartbeat>() { return {}; }
template <> Disconnect full_message<Disconnect>() { return {}; }
template <> Assign full_message<Assign>() { return {full_job(), 2, {4, 5, 6}, 11}; }
template <> Tokens full_message<Tokens>() {
  return {"job-42", 2, 5, {9, 8}, "xyz", StepSpeculation{2, 7, 3, {2, 1}}, testing::full_logprobs()};
}
template <> Final full_message<Final>() { return {"job-42", 2, full_final_result()}; }

template <typename M>
class RoundTrip : public ::testing::Test {};

using AllMessages = ::testing::Types<Submit, Cancel, Status, Accepted, Rejected, StatusReply, Event, ErrorReply,
                                     Ready, WorkerHeartbeat, BrokerHeartbeat, Disconnect, Assign, Tokens, Final,
                                     Models, ModelsReply>;

struct MessageName {
  template <typename M>
  static std::string GetName(int index) {
    return std::string(message_type_name(M::kType)) + "_" + std::to_string(index);
  }
};

TYPED_TEST_SUITE(RoundTrip, AllMessages, MessageName);

TYPED_TEST(RoundTrip, DecodingTheEncodingGivesBackEveryField) {
  const TypeParam message = full_message<TypeParam>();
  EXPECT_EQ(decode_body<TypeParam>(encode_body(message)), message);
}

TYPED_TEST(RoundTrip, SurvivesTheThreeFrames) {
  const TypeParam message = full_message<TypeParam>();
  const std::vector<std::string> frames = to_frames(to_wire(message));
  const std::vector<std::string_view> views(frames.begin(), frames.end());
  EXPECT_EQ(from_wire<TypeParam>(from_frames(views)), message);
}

TYPED_TEST(RoundTrip, BodyIsOneMsgpackMap) {
  const std::string body = encode_body(full_message<TypeParam>());
  EXPECT_TRUE(json::from_msgpack(body).is_object());
}

TEST(ReadyDefaults, AReadyWithoutTheModelFieldsIsAModelOfUnknownContextAndFormats) {
  const Ready ready = decode_body<Ready>(
      msgpack_of({{"worker_id", "w1"}, {"model", "m"}, {"slots", 2}, {"block_size", 0}, {"backend", "cpu"}}));
  EXPECT_EQ(ready.max_model_len, 0);
  EXPECT_EQ(ready.tool_call_format, ToolCallFormat::kNone);
  EXPECT_EQ(ready.reasoning_format, ReasoningFormat::kNone);
}

TEST(ReadyDefaults, TheModelFieldsGoOnTheWireByTheirNames) {
  const json body = json::from_msgpack(encode_body(full_message<Ready>()));
  EXPECT_EQ(body["max_model_len"], 40960);
  EXPECT_EQ(body["tool_call_format"], "hermes");
  EXPECT_EQ(body["reasoning_format"], "think_in_prompt");
}

TEST(ModelsReplyRoundTrip, NoModelsIsAnEmptyArray) {
  const std::string body = encode_body(ModelsReply{});
  EXPECT_EQ(json::from_msgpack(body), json({{"models", json::array()}}));
  EXPECT_EQ(decode_body<ModelsReply>(body), ModelsReply{});
}

TEST(ModelsReplyRoundTrip, EachModelIsAMapOfTheDocumentedFields) {
  const json body = json::from_msgpack(encode_body(full_message<ModelsReply>()));
  ASSERT_EQ(body["models"].size(), 2u);
  EXPECT_EQ(body["models"][1], json({{"name", "qwen3-0.6b"}, {"max_model_len", 40960}, {"tool_call_format", "hermes"},
                                     {"reasoning_format", "think"}, {"workers", 3}, {"slots", 24}}));
}

TEST(OutputFormatNames, EveryFormatHasItsWireNameBothWays) {
  for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
                           ToolCallFormat::kHarmony}) {
    EXPECT_EQ(tool_call_format_from_name(tool_call_format_name(f)), f);
  }
  for (ReasoningFormat f : {ReasoningFormat::kNone, ReasoningFormat::kThinkTags, ReasoningFormat::kThinkInPrompt,
                            ReasoningFormat::kHarmony}) {
    EXPECT_EQ(reasoning_format_from_name(reasoning_format_name(f)), f);
  }
  EXPECT_EQ(tool_call_format_name(ToolCallFormat::kLlama3Json), "llama3_json");
  EXPECT_EQ(reasoning_format_name(ReasoningFormat::kThinkTags), "think");
  EXPECT_EQ(reasoning_format_name(ReasoningFormat::kThinkInPrompt), "think_in_prompt");
  EXPECT_EQ(tool_call_format_name(ToolCallFormat::kHarmony), "harmony");
  EXPECT_EQ(reasoning_format_name(ReasoningFormat::kHarmony), "harmony");
}

TEST(OutputFormatNames, AnUnknownNameIsAProtocolErrorListingTheKnownOnes) {
  testing::expect_protocol_error([] { tool_call_format_from_name("pythonic"); },
                                 {"'pythonic'", "none, hermes, llama3_json, harmony"});
  testing::expect_protocol_error([] { reasoning_format_from_name("think_tags"); },
                                 {"'think_tags'", "none, think, think_in_prompt"});
  testing::expect_protocol_error([] { tool_call_format_from_name(""); }, {"''"});
}

TEST(JobRoundTrip, PromptTokensSurvive) {
  Job job = full_job();
  job.prompt = TokenIds{0, 1, 151643, 0x7FFF'FFFF};
  EXPECT_EQ(decode_body<Submit>(encode_body(Submit{job})).job, job);
}

TEST(JobRoundTrip, ChatMessagesSurvive) {
  Job job = full_job();
  job.prompt = std::vector<ChatMessage>{{"system", "Be brief."}, {"user", "Hi"}, {"assistant", ""}};
  EXPECT_EQ(decode_body<Submit>(encode_body(Submit{job})).job, job);
}

TEST(JobRoundTrip, SubmitWithoutIdLeavesItForTheBroker) {
  Job job = full_job();
  job.id.clear();
  const std::string body = encode_body(Submit{job});
  EXPECT_FALSE(json::from_msgpack(body)["job"].contains("id"));
  EXPECT_EQ(decode_body<Submit>(body).job.id, "");
}

TEST(JobRoundTrip, MetadataBytesPassThroughUnchanged) {
  const Job job = full_job();
  const Job decoded = decode_body<Submit>(encode_body(Submit{job})).job;
  ASSERT_TRUE(decoded.metadata.has_value());
  EXPECT_EQ(*decoded.metadata, *job.metadata);
  EXPECT_EQ(json::from_msgpack(*decoded.metadata), json::from_msgpack(*job.metadata));
}

TEST(JobRoundTrip, MetadataOfAnyTypePassesThrough) {
  for (const json& value : {json(7), json("text"), json::array({1, "a"}), json(false), json(-2.5)}) {
    Job job = full_job();
    job.metadata = msgpack_of(value);
    EXPECT_EQ(decode_body<Submit>(encode_body(Submit{job})).job.metadata, job.metadata) << value.dump();
  }
}

TEST(JobRoundTrip, EncodingRefusesMetadataThatIsNotOneMsgpackValue) {
  Job job = full_job();
  job.metadata = std::string("\x92\x01", 2);  // an array of two with one element
  testing::expect_protocol_error([&] { encode_body(Submit{job}); }, {"metadata"});
}

TEST(JobDefaults, AMinimalJobTakesTheDocumentedDefaults) {
  const Job job = decode_body<Submit>(msgpack_of({{"job", {{"prompt", "hi"}}}})).job;
  EXPECT_EQ(job.id, "");
  EXPECT_EQ(std::get<std::string>(job.prompt), "hi");
  EXPECT_EQ(job.max_tokens, 256);
  EXPECT_EQ(job.temperature, 0);
  EXPECT_EQ(job.top_p, 1);
  EXPECT_EQ(job.top_k, 0);
  EXPECT_EQ(job.seed, 0u);
  EXPECT_TRUE(job.stop.empty());
  EXPECT_TRUE(job.stop_token_ids.empty());
  EXPECT_EQ(job.priority, 0);
  EXPECT_EQ(job.deadline_ms, 0);
  EXPECT_EQ(job.spec, SpecMode::kAuto);
  EXPECT_FALSE(job.model.has_value());
  EXPECT_FALSE(job.session.has_value());
  EXPECT_FALSE(job.metadata.has_value());
  EXPECT_FALSE(job.stream);
  EXPECT_EQ(job.block_size, 0);
  EXPECT_EQ(job, Job{.prompt = std::string("hi")});
}

TEST(JobDefaults, NilMeansAbsent) {
  json job = {{"prompt", "hi"}};
  for (const char* key : {"id", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stop_token_ids",
                          "priority", "deadline_ms", "spec", "model", "metadata", "stream", "block_size",
                          "prompt_tokens", "messages", "session"}) {
    job[key] = nullptr;
  }
  EXPECT_EQ(decode_body<Submit>(msgpack_of({{"job", job}})).job, Job{.prompt = std::string("hi")});
}

TEST(JobDefaults, IntegersAreAcceptedWhereNumbersAreExpected) {
  const Job job = decode_body<Submit>(msgpack_of({{"job", {{"prompt", "hi"}, {"temperature", 2}, {"top_p", 1}}}})).job;
  EXPECT_EQ(job.temperature, 2.0);
  EXPECT_EQ(job.top_p, 1.0);
}

TEST(JobDefaults, EverySpecModeIsAccepted) {
  for (SpecMode mode : {SpecMode::kAuto, SpecMode::kOff, SpecMode::kDflash}) {
    const json body = {{"job", {{"prompt", "hi"}, {"spec", spec_mode_name(mode)}}}};
    EXPECT_EQ(decode_body<Submit>(msgpack_of(body)).job.spec, mode);
  }
}

TEST(UnknownKeys, AreIgnoredAtEveryLevel) {
  const json body = {
      {"id", "j1"},         {"seq", 0}, {"token_ids", {1}}, {"text", "a"}, {"added_in_a_later_version", {1, 2}},
      {"final", {{"finish_reason", "stop"},
                 {"usage", {{"prompt_tokens", 1}, {"completion_tokens", 1}, {"cached_tokens", 0}}},
                 {"spec_stats", {{"draft_steps", 0}, {"accepted_tokens", 0}, {"tau", 1.0}}},
                 {"timings", {{"queue_ms", 0}, {"ttft_ms", 1}, {"total_ms", 2}, {"gpu_ms", 1}}},
                 {"extra", "x"}}}};
  const Event event = decode_body<Event>(msgpack_of(body));
  EXPECT_EQ(event.id, "j1");
  ASSERT_TRUE(event.final_result.has_value());
  EXPECT_EQ(event.final_result->finish_reason, FinishReason::kStop);
  const json submit = {{"job", {{"prompt", "hi"}, {"best_of", 5}}}, {"client", "x"}};
  EXPECT_EQ(decode_body<Submit>(msgpack_of(submit)).job, Job{.prompt = std::string("hi")});
}

TEST(OptionalFields, StatusReplyForAQueuedJobHasNoFinal) {
  const StatusReply reply{"job-1", JobState::kQueued, 0, 0, std::nullopt};
  const std::string body = encode_body(reply);
  EXPECT_FALSE(json::from_msgpack(body).contains("final"));
  EXPECT_EQ(decode_body<StatusReply>(body), reply);
}

TEST(OptionalFields, StatusReplyMetadataIsOneMsgpackValue) {
  StatusReply reply{"job-1", JobState::kRunning, 1, 3, std::nullopt, std::string("\x92\x01\xa1x", 4)};
  EXPECT_EQ(decode_body<StatusReply>(encode_body(reply)), reply);
  EXPECT_EQ(json::from_msgpack(encode_body(reply))["metadata"], json::array({1, "x"}));
  reply.metadata = std::string("\x92\x01", 2);  // an array missing an element
  EXPECT_THROW(encode_body(reply), Error);
}

TEST(OptionalFields, EveryJobStateRoundTrips) {
  for (JobState state : {JobState::kQueued, JobState::kRunning, JobState::kUnknown}) {
    const StatusReply reply{"job-1", state, 1, 4, std::nullopt};
    EXPECT_EQ(decode_body<StatusReply>(encode_body(reply)), reply) << job_state_name(state);
  }
}

TEST(OptionalFields, EventBeforeTheLastHasNoFinal) {
  const Event event{"job-1", 0, {1}, "a", std::nullopt};
  const std::string body = encode_body(event);
  EXPECT_FALSE(json::from_msgpack(body).contains("final"));
  EXPECT_EQ(decode_body<Event>(body), event);
}

TEST(OptionalFields, RejectedWithoutMessageOmitsIt) {
  const Rejected rejected{"job-42", "overloaded", 250};
  EXPECT_FALSE(json::from_msgpack(encode_body(rejected)).contains("message"));
  EXPECT_EQ(decode_body<Rejected>(encode_body(rejected)), rejected);
}

TEST(OptionalFields, ErrorReplyWithoutIdOmitsIt) {
  const ErrorReply reply{"protocol", "frame 0: unknown protocol tag", std::nullopt};
  EXPECT_EQ(decode_body<ErrorReply>(encode_body(reply)), reply);
}

TEST(OptionalFields, EveryFinishReasonRoundTrips) {
  for (FinishReason reason : {FinishReason::kStop, FinishReason::kLength, FinishReason::kCancelled,
                              FinishReason::kDeadline, FinishReason::kError, FinishReason::kRejected}) {
    FinalResult result = full_final_result();
    result.finish_reason = reason;
    if (reason == FinishReason::kStop || reason == FinishReason::kLength) result.error.reset();
    const Final message{"job-1", 1, result};
    EXPECT_EQ(decode_body<Final>(encode_body(message)), message) << finish_reason_name(reason);
  }
}

TEST(OptionalFields, CancelledFinalMayOmitTheError) {
  FinalResult result = full_final_result();
  result.finish_reason = FinishReason::kCancelled;
  result.error.reset();
  const Final message{"job-1", 1, result};
  EXPECT_EQ(decode_body<Final>(encode_body(message)), message);
}

TEST(OptionalFields, AssignWithoutResumeTextBytesMeansNoneWasStreamed) {
  const json body = {{"job", {{"id", "j"}, {"prompt", "p"}}}, {"attempt", 1}, {"resume_tokens", json::array()}};
  EXPECT_EQ(decode_body<Assign>(msgpack_of(body)).resume_text_bytes, 0);
}

TEST(OptionalFields, FinalKeepsItsFieldsAtTheTopLevel) {
  const json body = json::from_msgpack(encode_body(Final{"job-1", 3, full_final_result()}));
  EXPECT_EQ(body["finish_reason"], "error");
  EXPECT_EQ(body["usage"]["completion_tokens"], 34);
  EXPECT_EQ(body["timings"]["ttft_ms"], 40);
  EXPECT_EQ(body["error"], "worker lost its GPU");
}

TEST(ErrorReplies, CarryTheErrorCodeNameAndMessage) {
  const ErrorReply reply = error_reply(Error(ErrorCode::kProtocol, "SUBMIT field job.top_p: bad"), "job-9");
  EXPECT_EQ(reply.code, "protocol");
  EXPECT_EQ(reply.message, "SUBMIT field job.top_p: bad");
  EXPECT_EQ(reply.id, "job-9");
  EXPECT_EQ(decode_body<ErrorReply>(encode_body(reply)), reply);
}

TEST(ErrorReplies, DropAnIdThatIsNotValidAndCutLongMessages) {
  const ErrorReply reply = error_reply(Error(ErrorCode::kNotFound, std::string(100'000, 'x')), "has space");
  EXPECT_FALSE(reply.id.has_value());
  EXPECT_EQ(reply.message.size(), 64u << 10);
  EXPECT_NO_THROW(decode_body<ErrorReply>(encode_body(reply)));
}

}  // namespace
}  // namespace flashq::protocol

namespace flashq::protocol {
namespace {

TEST(ReplayMessage, SurvivesEncodingAndRefusesANegativeSeq) {
  const Replay replay{"job-7", 42};
  EXPECT_EQ(from_wire<Replay>(to_wire(replay)), replay);
  const std::string negative = MapWriter().string("id", "job-7").integer("from_seq", -1).finish();
  try {
    decode_body<Replay>(negative);
    FAIL() << "a negative from_seq was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProtocol);
    EXPECT_NE(std::string(e.what()).find("from_seq"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashq::protocol
