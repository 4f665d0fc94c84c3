// Rules of docs/protocol.md that only a misbehaving worker exercises: a malformed message gets it
// dropped (9.3), and a running job ends at its deadline even if its worker never answers (9.4).
//
// The test plays a worker by hand (a raw DEALER on the backend) to do what a real worker only
// does when something is wrong with it.
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

// docs/protocol.md §9.3: "answers a malformed message from a worker with ERROR protocol, then
// DISCONNECT, and treats the worker as lost". The broker sends ERROR only and keeps the worker.
TEST_F(E2eTest, MalformedMessageFromARegisteredWorkerDisconnectsIt) {
  ASSERT_TRUE(start_broker());
  zmq::context_t context;
  RawDealer fake(context, cluster_->backend());
  fake.keep_alive(true);
  fake.send_message(kFakeReady);
  ASSERT_TRUE(fake.wait_heartbeat()) << "the fake worker was not registered";
  fake.send({"FQ1", std::string(1, '\x31'), std::string("\x81\xa2id\x07", 5)});  // TOKENS {id: 7}
  std::optional<protocol::WireMessage> first = fake.next(milliseconds(3000));
  ASSERT_TRUE(first && first->type == protocol::MessageType::kError) << type_of(first);
  std::optional<protocol::WireMessage> second = fake.next(milliseconds(3000));
  EXPECT_TRUE(second && second->type == protocol::MessageType::kDisconnect)
      << "FAIL (known bug): after ERROR the broker must send DISCONNECT and drop the worker; got " << type_of(second);
  bool dropped = false;
  for (int i = 0; i < 20 && !dropped; ++i) {
    (void)fake.next(milliseconds(100));  // keeps beating: only the malformed message may drop it
    dropped = cluster_->metric("flashq_workers") == std::optional<double>(0);
  }
  EXPECT_TRUE(dropped) << "FAIL (known bug): the worker that sent a malformed message is still registered";
}

// docs/protocol.md §9.4: "when a running job's deadline has passed by more than 1 s without a
// FINAL, it sends CANCEL and publishes the final event deadline itself." The broker sends CANCEL
// and then waits for the worker's FINAL for ever: a worker that is alive (beating) but stuck
// keeps the job running past its deadline until the worker dies.
TEST_F(E2eTest, RunningJobEndsAtItsDeadlineEvenIfTheWorkerNeverAnswers) {
  ASSERT_TRUE(start_broker());
  zmq::context_t context;
  auto client = connect_client();
  RawDealer fake(context, cluster_->backend());
  fake.keep_alive(true);
  fake.send_message(kFakeReady);
  ASSERT_TRUE(fake.wait_heartbeat()) << "the fake worker was not registered";
  protocol::Job job = make_job("stuck", "hello world", 8);
  job.deadline_ms = 300;
  ASSERT_NO_THROW(client->submit(job, 20000));
  std::optional<protocol::WireMessage> assign = fake.next();
  ASSERT_TRUE(assign && assign->type == protocol::MessageType::kAssign) << type_of(assign);

  // Deadline + 1 s, plus generous slack; the fake ignores the CANCEL and keeps beating.
  const auto until = Clock::now() + milliseconds(6000);
  bool finished = false;
  while (!finished && Clock::now() < until) {
    (void)fake.next(milliseconds(100));
    finished = client->status("stuck", 20000).state == protocol::JobState::kFinished;
  }
  ASSERT_TRUE(finished) << "FAIL (known bug): 6 s after submission the job with a 300 ms deadline still runs";
  const JobRun run = wait_job(*client, "stuck", 5000);
  EXPECT_EQ(run.finish_reason(), "deadline") << run;
}

}  // namespace
}  // namespace flashq::testing
