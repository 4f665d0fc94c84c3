// Every rule of docs/protocol.md "The job map": each refusal is kProtocol and names the field.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::expect_protocol_error;
using testing::json;
using testing::msgpack_of;

json with(json job, const std::string& key, json value) {
  job[key] = std::move(value);
  return job;
}

json minimal_job() { return {{"prompt", "hi"}}; }

void expect_submit_error(const json& job, const std::string& field, const std::string& problem = "") {
  const std::string body = msgpack_of({{"job", job}});
  expect_protocol_error([&] { decode_body<Submit>(body); }, {"SUBMIT field job." + field, problem});
}

Job decode_job(const json& job) { return decode_body<Submit>(msgpack_of({{"job", job}})).job; }

TEST(JobId, AcceptsPrintableAsciiUpTo128Bytes) {
  const std::string longest(128, '~');
  EXPECT_EQ(decode_job(with(minimal_job(), "id", longest)).id, longest);
  EXPECT_EQ(decode_job(with(minimal_job(), "id", "a/b:c-1_2.x!")).id, "a/b:c-1_2.x!");
}

TEST(JobId, RejectsEmptyAndOverlongIds) {
  expect_submit_error(with(minimal_job(), "id", ""), "id", "0 bytes");
  expect_submit_error(with(minimal_job(), "id", std::string(129, 'a')), "id", "129 bytes");
}

TEST(JobId, RejectsSpacesControlAndNonAsciiBytes) {
  for (const std::string& id : {std::string("a b"), std::string("a\tb"), std::string("a\x7f"), std::string("caf\xc3\xa9")}) {
    expect_submit_error(with(minimal_job(), "id", id), "id", "printable ASCII");
  }
}

TEST(JobId, IsRequiredInAssign) {
  const json body = {{"job", minimal_job()}, {"attempt", 1}, {"resume_tokens", json::array()}};
  expect_protocol_error([&] { decode_body<Assign>(msgpack_of(body)); }, {"ASSIGN field job.id", "missing"});
}

TEST(JobPrompt, OneOfPromptPromptTokensMessagesIsRequired) {
  expect_submit_error(json::object({{"max_tokens", 5}}), "prompt", "one of prompt, prompt_tokens, messages");
}

TEST(JobPrompt, OnlyOneOfThemMayBeGiven) {
  expect_submit_error({{"prompt", "hi"}, {"prompt_tokens", {1}}}, "prompt", "only one");
  expect_submit_error({{"prompt", "hi"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}, "prompt", "only one");
  expect_submit_error({{"prompt_tokens", {1}}, {"messages", {{{"role", "user"}, {"content", "x"}}}}}, "prompt",
                      "only one");
}

TEST(JobPrompt, TextMustBeNonEmptyAndAtMostOneMebibyte) {
  expect_submit_error({{"prompt", ""}}, "prompt", "0 bytes");
  expect_submit_error({{"prompt", std::string((1 << 20) + 1, 'a')}}, "prompt", "1048577 bytes");
  EXPECT_EQ(std::get<std::string>(decode_job({{"prompt", std::string(1 << 20, 'a')}}).prompt).size(), 1u << 20);
}

TEST(JobPrompt, TokensMustBeNonEmptyAndAtMost262144) {
  expect_submit_error({{"prompt_tokens", json::array()}}, "prompt_tokens", "at least one");
  expect_submit_error({{"prompt_tokens", std::vector<int>(262'145, 1)}}, "prompt_tokens", "at most 262144");
  EXPECT_EQ(std::get<TokenIds>(decode_job({{"prompt_tokens", std::vector<int>(262'144, 1)}}).prompt).size(),
            262'144u);
}

TEST(JobPrompt, TokenIdsMustBeNonNegative32BitIntegers) {
  expect_submit_error({{"prompt_tokens", {1, -1}}}, "prompt_tokens[1]", "0..2147483647");
  expect_submit_error({{"prompt_tokens", {2147483648LL}}}, "prompt_tokens[0]", "0..2147483647");
  expect_submit_error({{"prompt_tokens", {1.0}}}, "prompt_tokens[0]", "must be an integer");
}

TEST(JobPrompt, MessagesMustBeANonEmptyArrayOfRoleContentMaps) {
  expect_submit_error({{"messages", json::array()}}, "messages", "at least one");
  expect_submit_error({{"messages", {"user: hi"}}}, "messages[0]", "must be a map");
  expect_submit_error({{"messages", {{{"content", "x"}}}}}, "messages[0].role", "missing");
  expect_submit_error({{"messages", {{{"role", "user"}}}}}, "messages[0].content", "missing");
  expect_submit_error({{"messages", {{{"role", ""}, {"content", "x"}}}}}, "messages[0].role", "0 bytes");
  expect_submit_error({{"messages", {{{"role", std::string(129, 'r')}, {"content", "x"}}}}}, "messages[0].role",
                      "129 bytes");
  expect_submit_error({{"messages", std::vector<json>(4097, {{"role", "user"}, {"content", "x"}})}}, "messages",
                      "at most 4096");
}

TEST(JobPrompt, ChatContentTogetherIsAtMostOneMebibyte) {
  const json half = {{"role", "user"}, {"content", std::string(1 << 19, 'a')}};
  EXPECT_NO_THROW(decode_job({{"messages", {half, half}}}));
  expect_submit_error({{"messages", {half, half, {{"role", "user"}, {"content", "a"}}}}}, "messages",
                      "content of all messages");
}

TEST(JobSampling, MaxTokensIsBetween1And1000000) {
  expect_submit_error(with(minimal_job(), "max_tokens", 0), "max_tokens", "1..1000000");
  expect_submit_error(with(minimal_job(), "max_tokens", 1'000'001), "max_tokens", "1..1000000");
  EXPECT_EQ(decode_job(with(minimal_job(), "max_tokens", 1'000'000)).max_tokens, 1'000'000);
}

TEST(JobSampling, TemperatureIsAFiniteNonNegativeNumber) {
  expect_submit_error(with(minimal_job(), "temperature", -0.5), "temperature", ">= 0");
  expect_submit_error(with(minimal_job(), "temperature", std::nan("")), "temperature", "finite");
  expect_submit_error(with(minimal_job(), "temperature", std::numeric_limits<double>::infinity()), "temperature",
                      "finite");
}

TEST(JobSampling, TopPIsInZeroExclusiveToOneInclusive) {
  expect_submit_error(with(minimal_job(), "top_p", 0), "top_p", "(0, 1]");
  expect_submit_error(with(minimal_job(), "top_p", 1.01), "top_p", "(0, 1]");
  expect_submit_error(with(minimal_job(), "top_p", -1), "top_p", "(0, 1]");
  EXPECT_EQ(decode_job(with(minimal_job(), "top_p", 0.01)).top_p, 0.01);
}

TEST(JobSampling, TopKIsANonNegative32BitInteger) {
  expect_submit_error(with(minimal_job(), "top_k", -1), "top_k", "0..2147483647");
  expect_submit_error(with(minimal_job(), "top_k", 2147483648LL), "top_k", "0..2147483647");
}

TEST(JobSampling, SeedIsAnyUnsigned64BitInteger) {
  expect_submit_error(with(minimal_job(), "seed", -1), "seed", "non-negative");
  EXPECT_EQ(decode_job(with(minimal_job(), "seed", 18446744073709551615ULL)).seed, 18446744073709551615ULL);
}

TEST(JobStops, AtMost16NonEmptyStringsOfAtMost1024Bytes) {
  expect_submit_error(with(minimal_job(), "stop", std::vector<std::string>(17, "x")), "stop", "at most 16");
  expect_submit_error(with(minimal_job(), "stop", {"ok", ""}), "stop[1]", "0 bytes");
  expect_submit_error(with(minimal_job(), "stop", {std::string(1025, 'x')}), "stop[0]", "1025 bytes");
  expect_submit_error(with(minimal_job(), "stop", "END"), "stop", "must be an array");
  EXPECT_EQ(decode_job(with(minimal_job(), "stop", std::vector<std::string>(16, "x"))).stop.size(), 16u);
}

TEST(JobStops, StopTokenIdsAreAtMost1024NonNegativeIds) {
  expect_submit_error(with(minimal_job(), "stop_token_ids", {-3}), "stop_token_ids[0]", "0..2147483647");
  expect_submit_error(with(minimal_job(), "stop_token_ids", std::vector<int>(1025, 1)), "stop_token_ids",
                      "at most 1024");
}

TEST(JobScheduling, PriorityIsA32BitInteger) {
  expect_submit_error(with(minimal_job(), "priority", 2147483648LL), "priority", "-2147483648..2147483647");
  expect_submit_error(with(minimal_job(), "priority", -2147483649LL), "priority", "-2147483648..2147483647");
  EXPECT_EQ(decode_job(with(minimal_job(), "priority", -2147483648LL)).priority, -2147483648LL);
}

TEST(JobScheduling, DeadlineIsBetween0And2To32Minus1Milliseconds) {
  expect_submit_error(with(minimal_job(), "deadline_ms", -1), "deadline_ms", "0..4294967295");
  expect_submit_error(with(minimal_job(), "deadline_ms", 4294967296LL), "deadline_ms", "0..4294967295");
}

TEST(JobSpeculation, SpecIsAutoOffOrDflash) {
  expect_submit_error(with(minimal_job(), "spec", "fast"), "spec", "auto, off, dflash");
  expect_submit_error(with(minimal_job(), "spec", "AUTO"), "spec", "auto, off, dflash");
}

TEST(JobSpeculation, BlockSizeIsBetween0And1024) {
  expect_submit_error(with(minimal_job(), "block_size", -1), "block_size", "0..1024");
  expect_submit_error(with(minimal_job(), "block_size", 1025), "block_size", "0..1024");
}

TEST(JobOther, ModelIsANonEmptyNameOfAtMost256Bytes) {
  expect_submit_error(with(minimal_job(), "model", ""), "model", "0 bytes");
  expect_submit_error(with(minimal_job(), "model", std::string(257, 'm')), "model", "257 bytes");
}

TEST(JobOther, SessionIsANonEmptyStringOfAtMost256Bytes) {
  expect_submit_error(with(minimal_job(), "session", ""), "session", "0 bytes");
  expect_submit_error(with(minimal_job(), "session", std::string(257, 's')), "session", "257 bytes");
  expect_submit_error(with(minimal_job(), "session", 7), "session", "must be a string");
  EXPECT_EQ(decode_job(with(minimal_job(), "session", std::string(256, 's'))).session, std::string(256, 's'));
}

TEST(JobOther, StreamIsABoolean) {
  expect_submit_error(with(minimal_job(), "stream", 1), "stream", "must be a boolean");
  expect_submit_error(with(minimal_job(), "stream", "true"), "stream", "must be a boolean");
}

TEST(JobOther, MetadataNestingCountsAgainstTheBodyDepthLimit) {
  json deep = 1;
  for (int i = 0; i < 30; ++i) deep = json::array({deep});  // body 1 + job 2 + 30 = 32 levels
  EXPECT_NO_THROW(decode_job(with(minimal_job(), "metadata", deep)));
  deep = json::array({deep});
  const std::string body = msgpack_of({{"job", with(minimal_job(), "metadata", deep)}});
  expect_protocol_error([&] { decode_body<Submit>(body); }, {"SUBMIT body", "nested deeper than 32"});
}

TEST(JobMap, MustBeAMap) {
  expect_protocol_error([&] { decode_body<Submit>(msgpack_of({{"job", "hi"}})); }, {"SUBMIT field job", "must be a map"});
  expect_protocol_error([&] { decode_body<Submit>(msgpack_of(json::object())); }, {"SUBMIT field job", "missing"});
}

}  // namespace
}  // namespace flashq::protocol
