// End to end with a worker played by hand (a raw DEALER on the backend), doing what a real worker
// only does when something is wrong with it; real workers finish what it leaves.
#include <gtest/gtest.h>

#include "tests/e2e/e2e_fixture.h"
#include "tests/e2e/raw_dealer.h"

namespace flashq::testing {
namespace {

const protocol::Ready kFakeReady{
    .worker_id = "fake", .model = "fake-model", .slots = 1, .block_size = 0, .backend = "cpu"};

std::string type_of(const std::optional<protocol::WireMessage>& m) {
  return m ? std::string(protocol::message_type_name(m->type)) : "nothing";
}

// docs/protocol.md §9.4: "A gap in an attempt's TOKENS seq is handled as the loss of that attempt:
// the broker sends the worker CANCEL for it and requeues the job as a continuation from the tokens
// before the gap." A real worker then finishes the job with exactly the greedy output.
TEST_F(E2eTest, GapInWorkerTokensIsHandledAsLossOfTheAttempt) {
  const std::string prompt = long_prompt(12);
  ASSERT_FALSE(prompt.empty());
  const Reference want = reference(prompt, 12);
  ASSERT_GE(want.tokens.size(), 3u);

  ASSERT_TRUE(start_broker());
  zmq::context_t context;
  auto client = connect_client();
  {
    RawDealer fake(context, cluster_->backend());
    fake.keep_alive(true);
    fake.send_message(kFakeReady);
    ASSERT_TRUE(fake.wait_heartbeat()) << "the fake worker was not registered";
    ASSERT_NO_THROW(client->submit(make_job("gap", prompt, 12), 20000));
    std::optional<protocol::WireMessage> assign = fake.next();
    ASSERT_TRUE(assign && assign->type == protocol::MessageType::kAssign) << type_of(assign);
    // seq 0 with the first token, then seq 2 with the third: seq 1 (the second token) is missing.
    fake.send_message(protocol::Tokens{.id = "gap", .attempt = 1, .seq = 0, .token_ids = {want.tokens[0]}, .text = ""});
    fake.send_message(protocol::Tokens{.id = "gap", .attempt = 1, .seq = 2, .token_ids = {want.tokens[2]}, .text = ""});
    std::optional<protocol::WireMessage> cancel = fake.next(milliseconds(3000));
    EXPECT_TRUE(cancel && cancel->type == protocol::MessageType::kCancel)
        << "no CANCEL after a gap in TOKENS seq; got " << type_of(cancel);
    fake.send_message(protocol::Disconnect{});
  }
  start_worker("w1", 1);
  const JobRun run = wait_job(*client, "gap", 30000);
  ASSERT_TRUE(run.final_result) << run;
  EXPECT_TRUE(is_complete_stream(run.events)) << run;
  EXPECT_EQ(run.ids(), want.tokens) << "the token after the gap was kept, or the continuation did not resume "
                                       "from the tokens before it";
  EXPECT_EQ(run.text(), want.text);
}

}  // namespace
}  // namespace flashq::testing
