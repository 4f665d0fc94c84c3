// TOKENS `spec` (docs/protocol.md, TOKENS): how a worker sums its steps' drafts, and every rule
// the broker checks before counting them.
#include <gtest/gtest.h>

#include "shared/protocol/worker_messages.h"
#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::expect_protocol_error;
using testing::json;
using testing::msgpack_of;

json tokens_with(const json& spec) {
  return {{"id", "j"}, {"attempt", 1}, {"seq", 0}, {"token_ids", {1}}, {"text", ""}, {"spec", spec}};
}

json spec_of(int drafts, int draft_tokens, int accepted, const json& per_pos) {
  return {{"drafts", drafts}, {"draft_tokens", draft_tokens}, {"accepted_tokens", accepted}, {"accepted_per_pos", per_pos}};
}

TEST(StepSpeculation, DraftsAddUpPerPosition) {
  StepSpeculation spec;
  spec.add_draft(4, 2);
  spec.add_draft(4, 0);
  spec.add_draft(0, 0);  // a step without a draft is no draft
  spec.add_draft(3, 3);
  EXPECT_EQ(spec, (StepSpeculation{3, 11, 5, {2, 2, 1}}));
  EXPECT_FALSE(spec.empty());
  EXPECT_TRUE(StepSpeculation{}.empty());
}

TEST(StepSpeculation, TokensWithoutSpecStillDecode) {
  const Tokens tokens = decode_body<Tokens>(msgpack_of({{"id", "j"}, {"attempt", 1}, {"seq", 0}, {"token_ids", {1}}, {"text", "a"}}));
  EXPECT_FALSE(tokens.spec.has_value());
  const Tokens nil_spec = decode_body<Tokens>(msgpack_of(tokens_with(nullptr)));
  EXPECT_FALSE(nil_spec.spec.has_value());
}

TEST(StepSpeculation, AValidSpecDecodesExactly) {
  const Tokens tokens = decode_body<Tokens>(msgpack_of(tokens_with(spec_of(2, 8, 5, {2, 2, 1}))));
  ASSERT_TRUE(tokens.spec.has_value());
  EXPECT_EQ(*tokens.spec, (StepSpeculation{2, 8, 5, {2, 2, 1}}));
  const Tokens none_accepted = decode_body<Tokens>(msgpack_of(tokens_with(spec_of(1, 15, 0, json::array()))));
  EXPECT_EQ(*none_accepted.spec, (StepSpeculation{1, 15, 0, {}}));
}

void expect_refused(const json& spec, const std::string& field, const std::string& problem) {
  expect_protocol_error([&] { decode_body<Tokens>(msgpack_of(tokens_with(spec))); },
                        {"TOKENS field spec." + field, problem});
}

TEST(StepSpeculation, InconsistentCountsAreRefused) {
  expect_refused(spec_of(-1, 4, 0, json::array()), "drafts", "0..");
  expect_refused(spec_of(3, 2, 0, json::array()), "drafts", "<= draft_tokens");
  expect_refused(spec_of(1, 4, 5, {1, 1, 1, 1, 1}), "accepted_tokens", "<= draft_tokens");
  expect_refused(spec_of(1, 4, 2, {2}), "accepted_per_pos[0]", "0..1");           // more than there were drafts
  expect_refused(spec_of(2, 8, 3, {1, 2}), "accepted_per_pos[1]", "0..1");        // acceptance is a prefix
  expect_refused(spec_of(2, 8, 3, {2}), "accepted_per_pos", "must sum to accepted_tokens (3), got 2");
  expect_refused(spec_of(2, 8, 3, "x"), "accepted_per_pos", "");
}

}  // namespace
}  // namespace flashq::protocol
