// The client library against a scripted broker over real ZeroMQ on loopback: submit and its
// answers (ACCEPTED, REJECTED, ERROR, none), waiting for a job's events, status, cancel, and the
// stream subscriber.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "client/flashq_client.h"
#include "tests/client/fake_broker.h"

namespace flashq::testing {
namespace {

using protocol::Event;
using protocol::JobState;
using protocol::MessageType;

constexpr int kTestTimeoutMs = 5000;

protocol::Job text_job(const std::string& id = "") {
  protocol::Job job;
  job.id = id;
  job.prompt = std::string("hello queue");
  return job;
}

std::vector<Event> three_events() {
  return {text_event("", 0, "Hel", {1}), text_event("", 1, "lo", {2}), final_event("", 2, "!", {3}, stop_result())};
}

protocol::StatusReply running_status() {
  protocol::StatusReply status;
  status.state = JobState::kRunning;
  status.attempt = 1;
  status.seq = 2;
  return status;
}

std::unique_ptr<Client> connect_to(const FakeBroker& broker) {
  auto client = std::make_unique<Client>();
  client->connect(broker.frontend_endpoint(), broker.stream_endpoint());
  return client;
}

template <typename Message>
Message request_at(const FakeBroker& broker, std::size_t index) {
  const std::vector<protocol::WireMessage> requests = broker.requests();
  EXPECT_GT(requests.size(), index);
  return protocol::from_wire<Message>(requests.at(index));
}

TEST(Client, SubmitReturnsTheIdTheBrokerAssigned) {
  FakeBroker broker(broker_like(three_events()));
  EXPECT_EQ(connect_to(broker)->submit(text_job(), kTestTimeoutMs), "job-1");
  EXPECT_EQ(request_at<protocol::Submit>(broker, 0).job, text_job());
}

TEST(Client, WaitDeliversStreamedEventsInOrderAndReturnsTheFinalResult) {
  FakeBroker broker(broker_like(three_events()));
  auto client = connect_to(broker);
  protocol::Job job = text_job("j1");
  job.stream = true;
  ASSERT_EQ(client->submit(job, kTestTimeoutMs), "j1");
  std::vector<std::int64_t> seqs;
  std::string text;
  const protocol::FinalResult result = client->wait(
      "j1",
      [&](const Event& event) {
        seqs.push_back(event.seq);
        text += event.text;
      },
      kTestTimeoutMs);
  EXPECT_EQ(seqs, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(text, "Hello!");
  EXPECT_EQ(result, stop_result());
}

TEST(Client, WaitWithoutStreamGetsOnlyTheFinalEvent) {
  FakeBroker broker(broker_like(three_events()));
  auto client = connect_to(broker);
  ASSERT_EQ(client->submit(text_job("j1"), kTestTimeoutMs), "j1");
  std::vector<std::int64_t> seqs;
  client->wait("j1", [&](const Event& event) { seqs.push_back(event.seq); }, kTestTimeoutMs);
  EXPECT_EQ(seqs, (std::vector<std::int64_t>{2}));
}

TEST(Client, EventsOfAnotherJobAreKeptForItsOwnWait) {
  FakeBroker broker(broker_like(three_events()));
  auto client = connect_to(broker);
  protocol::Job first = text_job("first");
  protocol::Job second = text_job("second");
  first.stream = second.stream = true;
  client->submit(first, kTestTimeoutMs);
  client->submit(second, kTestTimeoutMs);  // first's events arrive while this waits for ACCEPTED
  std::string second_text;
  std::string first_text;
  client->wait("second", [&](const Event& event) { second_text += event.text; }, kTestTimeoutMs);
  client->wait("first", [&](const Event& event) { first_text += event.text; }, kTestTimeoutMs);
  EXPECT_EQ(second_text, "Hello!");
  EXPECT_EQ(first_text, "Hello!");
}

TEST(Client, SubmitThrowsJobRejectedWithReasonAndRetryHint) {
  FakeBroker broker([](const protocol::WireMessage&) {
    return std::vector{protocol::to_wire(protocol::Rejected{"j1", "overloaded", 250})};
  });
  try {
    connect_to(broker)->submit(text_job("j1"), kTestTimeoutMs);
    FAIL() << "no exception";
  } catch (const JobRejected& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.reason(), "overloaded");
    EXPECT_EQ(e.retry_after_ms(), 250);
    EXPECT_EQ(std::string(e.what()), "job j1 rejected: overloaded (retry after 250 ms)");
  }
}

TEST(Client, JobRejectedSaysWhatTheBrokersMessageSays) {
  FakeBroker broker([](const protocol::WireMessage&) {
    return std::vector{protocol::to_wire(
        protocol::Rejected{"j1", "unknown_model", 0, "no worker serves model 'x'; models served: tiny"})};
  });
  try {
    connect_to(broker)->submit(text_job("j1"), kTestTimeoutMs);
    FAIL() << "no exception";
  } catch (const JobRejected& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.reason(), "unknown_model");
    EXPECT_EQ(e.retry_after_ms(), 0);
    EXPECT_EQ(std::string(e.what()),
              "job j1 rejected: unknown_model (no worker serves model 'x'; models served: tiny)");
  }
}

TEST(Client, SubmitThrowsBrokerErrorWithTheWireCode) {
  FakeBroker broker([](const protocol::WireMessage&) {
    return std::vector{protocol::to_wire(protocol::ErrorReply{"unsupported", "no such model", "j1"})};
  });
  try {
    connect_to(broker)->submit(text_job("j1"), kTestTimeoutMs);
    FAIL() << "no exception";
  } catch (const BrokerError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(e.wire_code(), "unsupported");
    EXPECT_NE(std::string(e.what()).find("no such model"), std::string::npos) << e.what();
  }
}

TEST(Client, SubmitRefusesAnInvalidJobWithoutSendingIt) {
  FakeBroker broker(broker_like(three_events()));
  protocol::Job job = text_job();
  job.top_p = 1.5;
  try {
    connect_to(broker)->submit(job, kTestTimeoutMs);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(broker.requests().empty());
}

TEST(Client, RequestTimesOutWhenNobodyAnswers) {
  FakeBroker broker([](const protocol::WireMessage&) { return std::vector<protocol::WireMessage>{}; });
  const auto start = std::chrono::steady_clock::now();
  try {
    connect_to(broker)->submit(text_job("j1"), 200);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("no answer to SUBMIT j1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("200 ms"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(Client, LateReplyToATimedOutRequestIsDropped) {
  FakeBroker broker([](const protocol::WireMessage& request) {
    const auto status = protocol::from_wire<protocol::Status>(request);
    if (status.id == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(300));
    protocol::StatusReply reply = running_status();
    reply.id = status.id;
    return std::vector{protocol::to_wire(reply)};
  });
  auto client = connect_to(broker);
  EXPECT_THROW(client->status("slow", 100), Error);
  EXPECT_EQ(client->status("fast", kTestTimeoutMs).id, "fast");
}

TEST(Client, WaitTimesOutWhenNoFinalEventComes) {
  FakeBroker broker([](const protocol::WireMessage&) { return std::vector{accepted("j1")}; });
  auto client = connect_to(broker);
  client->submit(text_job("j1"), kTestTimeoutMs);
  try {
    client->wait("j1", nullptr, 200);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("did not finish within 200 ms"), std::string::npos) << e.what();
  }
}

TEST(Client, StatusReturnsTheBrokersReply) {
  FakeBroker broker(broker_like({}, running_status()));
  const protocol::StatusReply status = connect_to(broker)->status("j1", kTestTimeoutMs);
  EXPECT_EQ(status.id, "j1");
  EXPECT_EQ(status.state, JobState::kRunning);
  EXPECT_EQ(status.attempt, 1);
  EXPECT_EQ(status.seq, 2);
  EXPECT_EQ(request_at<protocol::Status>(broker, 0).id, "j1");
}

TEST(Client, CancelSendsCancelWithTheIdAndReturnsTheStatusAfterIt) {
  FakeBroker broker(broker_like({}, running_status()));
  const protocol::StatusReply status = connect_to(broker)->cancel("j1", kTestTimeoutMs);
  EXPECT_EQ(status.state, JobState::kRunning);
  const std::vector<protocol::WireMessage> requests = broker.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(protocol::from_wire<protocol::Cancel>(requests[0]).id, "j1");
  EXPECT_EQ(protocol::from_wire<protocol::Status>(requests[1]).id, "j1");
}

TEST(Client, CancelOfAnUnknownJobThrowsNotFoundAndLeavesNoStaleReply) {
  FakeBroker broker(broker_like({}));  // unknown: CANCEL gets ERROR not_found, STATUS state unknown
  auto client = connect_to(broker);
  try {
    client->cancel("ghost", kTestTimeoutMs);
    FAIL() << "no exception";
  } catch (const BrokerError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_EQ(e.id(), "ghost");
  }
  EXPECT_EQ(client->status("ghost", kTestTimeoutMs).state, JobState::kUnknown);
}

TEST(Client, StreamSubscriberGetsOnlyItsOwnJobsEvents) {
  FakeBroker broker(broker_like({}));
  // "job/ab" matches the subscription "job/a" as a prefix.
  broker.publish_on_subscribe("a", {text_event("ab", 0, "other", {9}), text_event("a", 0, "mine", {1}),
                                    final_event("a", 1, "", {}, stop_result())});
  StreamSubscriber subscriber = connect_to(broker)->subscribe("a");
  std::optional<Event> first = subscriber.next(kTestTimeoutMs);
  std::optional<Event> second = subscriber.next(kTestTimeoutMs);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->id, "a");
  EXPECT_EQ(first->text, "mine");
  EXPECT_EQ(second->seq, 1);
  EXPECT_TRUE(second->final_result.has_value());
  EXPECT_FALSE(subscriber.next(100).has_value());
}

}  // namespace
}  // namespace flashq::testing
