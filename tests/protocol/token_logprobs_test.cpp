// TOKENS and EVENT `logprobs` (docs/protocol.md, "Log-probabilities"): what a worker sends with
// each token when the job asks, the job's own field, and every rule a reader checks.
#include <gtest/gtest.h>

#include "shared/protocol/limits.h"
#include "shared/protocol/producer_messages.h"
#include "shared/protocol/worker_messages.h"
#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::expect_protocol_error;
using testing::json;
using testing::msgpack_of;

json bytes_of(const std::string& text) { return json::binary(std::vector<std::uint8_t>(text.begin(), text.end())); }

json entry(int token, double logprob, const std::string& bytes) {
  return {{"token", token}, {"logprob", logprob}, {"bytes", bytes_of(bytes)}};
}

json token_entry(int token, double logprob, const std::string& bytes, const json& top) {
  json out = entry(token, logprob, bytes);
  out["top"] = top;
  return out;
}

json tokens_with(const json& ids, const json& logprobs) {
  return {{"id", "j"}, {"attempt", 1}, {"seq", 0}, {"token_ids", ids}, {"text", ""}, {"logprobs", logprobs}};
}

TEST(TokenLogprobs, DecodeExactlyWithBytesThatAreNotUtf8) {
  const json logprobs = json::array({token_entry(5, -0.5, "\xe2\x80", {entry(5, -0.5, "\xe2\x80"), entry(7, -1.25, "\xff")})});
  const Tokens tokens = decode_body<Tokens>(msgpack_of(tokens_with({5}, logprobs)));
  ASSERT_EQ(tokens.logprobs.size(), 1u);
  EXPECT_EQ(tokens.logprobs[0].chosen, (LogprobEntry{5, -0.5, "\xe2\x80"}));
  EXPECT_EQ(tokens.logprobs[0].top.size(), 2u);
  EXPECT_EQ(tokens.logprobs[0].top[1], (LogprobEntry{7, -1.25, "\xff"}));
}

TEST(TokenLogprobs, AbsentUnlessTheJobAsked) {
  const Tokens tokens = decode_body<Tokens>(msgpack_of({{"id", "j"}, {"attempt", 1}, {"seq", 0}, {"token_ids", {1}}, {"text", ""}}));
  EXPECT_TRUE(tokens.logprobs.empty());
  EXPECT_FALSE(json::from_msgpack(encode_body(tokens)).contains("logprobs"));
  EXPECT_FALSE(json::from_msgpack(encode_body(Event{.id = "j"})).contains("logprobs"));
}

TEST(TokenLogprobs, ARoundingStepAboveZeroIsKeptAsZero) {
  const Tokens tokens = decode_body<Tokens>(msgpack_of(tokens_with({1}, json::array({token_entry(1, 1e-6, "a", json::array())}))));
  EXPECT_EQ(tokens.logprobs[0].chosen.logprob, 0.0);
}

void expect_refused(const json& ids, const json& logprobs, const std::string& field, const std::string& problem) {
  expect_protocol_error([&] { decode_body<Tokens>(msgpack_of(tokens_with(ids, logprobs))); },
                        {"TOKENS field " + field, problem});
}

TEST(TokenLogprobs, EveryRuleIsChecked) {
  const json ok = token_entry(1, -1, "a", json::array());
  const json no_candidates = json::array();
  auto one = [](const json& token) { return json::array({token}); };
  expect_refused({1, 2}, one(ok), "logprobs", "one entry per token id (2), got 1");
  expect_refused({1}, one(token_entry(1, 0.5, "a", no_candidates)), "logprobs[0].logprob", "<= 0");
  expect_refused({1}, one(token_entry(-1, -1, "a", no_candidates)), "logprobs[0].token", "0..");
  const json text_bytes = {{"token", 1}, {"logprob", -1}, {"bytes", "a"}, {"top", no_candidates}};
  expect_refused({1}, one(text_bytes), "logprobs[0].bytes", "must be a binary");
  const std::string too_long(kMaxTokenBytes + 1, 'a');
  expect_refused({1}, one(token_entry(1, -1, too_long, no_candidates)), "logprobs[0].bytes", "bytes, got");
  expect_refused({1}, one(entry(1, -1, "a")), "logprobs[0].top", "missing");
  json many = json::array();
  for (int i = 0; i <= kMaxTopLogprobs; ++i) many.push_back(entry(i, -1, "a"));
  expect_refused({1}, one(token_entry(1, -1, "a", many)), "logprobs[0].top", "at most 20 elements");
  expect_refused({1}, one(token_entry(1, -1, "a", one(entry(2, 1.0, "b")))), "logprobs[0].top[0].logprob", "<= 0");
  expect_refused({1}, "not an array", "logprobs", "must be an array");
}

TEST(TokenLogprobs, TheJobFieldIsBounded) {
  const json asked = {{"job", {{"prompt", "hi"}, {"logprobs", 0}}}};
  EXPECT_EQ(decode_body<Submit>(msgpack_of(asked)).job.logprobs, 0);
  EXPECT_FALSE(decode_body<Submit>(msgpack_of({{"job", {{"prompt", "hi"}}}})).job.logprobs.has_value());
  for (int bad : {-1, 21}) {
    expect_protocol_error(
        [&] { decode_body<Submit>(msgpack_of({{"job", {{"prompt", "hi"}, {"logprobs", bad}}}})); },
        {"SUBMIT field job.logprobs", "0..20"});
  }
}

TEST(TokenLogprobs, TheStoredFormReadsBack) {
  const std::vector<OutputLogprobs> logprobs = testing::full_logprobs();
  EXPECT_EQ(decode_stored_logprobs(encode_stored_logprobs(logprobs), "test"), logprobs);
  expect_protocol_error([] { decode_stored_logprobs("\x81\xa1" "a\x01", "test"); }, {"test", "logprobs", "is missing"});
  expect_protocol_error([] { decode_stored_logprobs("\x91\x01", "test"); }, {"test"});
}

}  // namespace
}  // namespace flashq::protocol
