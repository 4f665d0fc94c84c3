// The broker over real ZeroMQ sockets on loopback, with the test playing producers, workers and
// subscribers at the wire level (docs/protocol.md).
#include <atomic>
#include <thread>

#include <gtest/gtest.h>
#include <zmq_addon.hpp>

#include "broker/broker.h"
#include "shared/protocol/stream.h"
#include "tests/broker/wire_peer.h"
#include "tests/support/http_get.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

class BrokerFixture : public ::testing::Test {
 protected:
  void start(BrokerOptions options = {}) {
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http = "127.0.0.1:0";
    options.heartbeat_ms = 200;  // a silent worker is dead after 600 ms
    options.drain_timeout_ms = 0;
    broker_ = std::make_unique<Broker>(context_, options);
    thread_ = std::thread([this] { broker_->run(stop_); });
  }
  ~BrokerFixture() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  zmq::socket_t connect(zmq::socket_type type, const std::string& endpoint) {
    zmq::socket_t socket(context_, type);
    socket.set(zmq::sockopt::linger, 0);
    socket.connect(endpoint);
    return socket;
  }
  zmq::socket_t producer() { return connect(zmq::socket_type::dealer, broker_->frontend_endpoint()); }
  zmq::socket_t worker(const std::string& name, int64_t slots = 1) {
    zmq::socket_t socket = connect(zmq::socket_type::dealer, broker_->backend_endpoint());
    send(socket, protocol::Ready{.worker_id = name, .model = "tiny", .slots = slots, .backend = "cpu"});
    return socket;
  }

  template <typename Message>
  static void send(zmq::socket_t& socket, const Message& message) { testing::send_message(socket, message); }
  static void send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    zmq::send_multipart(socket, buffers);
  }
  // The next message that is not a heartbeat, within `timeout`.
  static std::optional<protocol::WireMessage> receive(zmq::socket_t& socket, std::chrono::milliseconds timeout = 3000ms) {
    return testing::receive_message(socket, timeout);
  }
  template <typename Message>
  static Message expect(zmq::socket_t& socket) {
    std::optional<protocol::WireMessage> message = receive(socket);
    if (!message) throw std::runtime_error("no message arrived");
    return protocol::from_wire<Message>(*message);
  }
  // Like expect, for a worker that keeps beating while it waits (so it is not declared dead).
  template <typename Message>
  static Message expect_while_beating(zmq::socket_t& worker_socket) {
    for (int i = 0; i < 60; ++i) {
      send(worker_socket, protocol::WorkerHeartbeat{.load = 0});
      if (std::optional<protocol::WireMessage> message = receive(worker_socket, 50ms)) {
        return protocol::from_wire<Message>(*message);
      }
    }
    throw std::runtime_error("no message arrived");
  }
  static protocol::Job job(const std::string& id, bool stream = true) {
    protocol::Job j;
    j.id = id;
    j.prompt = std::string("hello");
    j.stream = stream;
    return j;
  }

  zmq::context_t context_;
  std::unique_ptr<Broker> broker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(BrokerFixture, SubmittedJobIsAssignedStreamedAndEndsWithOneFinal) {
  start();
  zmq::socket_t w = worker("w1");
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("a")});
  EXPECT_EQ(expect<protocol::Accepted>(p).id, "a");
  protocol::Assign assign = expect<protocol::Assign>(w);
  EXPECT_EQ(assign.job.id, "a");
  EXPECT_EQ(assign.attempt, 1);
  EXPECT_TRUE(assign.resume_tokens.empty());

  send(w, protocol::Tokens{.id = "a", .attempt = 1, .seq = 0, .token_ids = {1, 2}, .text = "ab"});
  send(w, protocol::Tokens{.id = "a", .attempt = 1, .seq = 1, .token_ids = {3}, .text = "c"});
  send(w, protocol::Final{.id = "a", .attempt = 1, .result = {.finish_reason = protocol::FinishReason::kLength}});
  protocol::Event e0 = expect<protocol::Event>(p), e1 = expect<protocol::Event>(p), e2 = expect<protocol::Event>(p);
  EXPECT_EQ(e0.seq, 0);
  EXPECT_EQ(e0.token_ids, (protocol::TokenIds{1, 2}));
  EXPECT_EQ(e1.seq, 1);
  EXPECT_EQ(e1.text, "c");
  EXPECT_EQ(e2.seq, 2);
  ASSERT_TRUE(e2.final_result);
  EXPECT_EQ(e2.final_result->finish_reason, protocol::FinishReason::kLength);
  EXPECT_EQ(e2.final_result->usage.completion_tokens, 3);
  EXPECT_FALSE(receive(p, 300ms)) << "a second final";
}

TEST_F(BrokerFixture, SubscribersSeeTheSameGaplessStream) {
  start();
  zmq::socket_t sub = connect(zmq::socket_type::sub, broker_->stream_endpoint());
  sub.set(zmq::sockopt::subscribe, protocol::stream_topic("s"));
  std::this_thread::sleep_for(200ms);  // let the subscription reach the broker
  zmq::socket_t w = worker("w1");
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("s", /*stream=*/false)});
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(w);
  for (int64_t seq = 0; seq < 5; ++seq) {
    send(w, protocol::Tokens{.id = "s", .attempt = 1, .seq = seq, .token_ids = {static_cast<int32_t>(seq)}});
  }
  send(w, protocol::Final{.id = "s", .attempt = 1, .result = {.finish_reason = protocol::FinishReason::kStop}});
  for (int64_t seq = 0; seq <= 5; ++seq) {
    std::vector<zmq::message_t> parts;
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_EQ(zmq::poll(&item, 1, 3000ms), 1);
    (void)zmq::recv_multipart(sub, std::back_inserter(parts));
    std::vector<std::string_view> frames;
    for (auto& part : parts) frames.push_back(part.to_string_view());
    protocol::Event event = protocol::from_stream_frames(frames);
    EXPECT_EQ(event.seq, seq);
    EXPECT_EQ(event.final_result.has_value(), seq == 5);
  }
  // Without stream: true the producer still gets the final event, and only it.
  protocol::Event final_event = expect<protocol::Event>(p);
  EXPECT_TRUE(final_event.final_result);
}

TEST_F(BrokerFixture, WorkerDeathRequeuesTheJobAsAContinuation) {
  start();
  zmq::socket_t p = producer();
  auto w1 = std::make_unique<zmq::socket_t>(worker("w1"));
  send(p, protocol::Submit{job("c")});
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(*w1);
  send(*w1, protocol::Tokens{.id = "c", .attempt = 1, .seq = 0, .token_ids = {5, 6}, .text = "xy"});
  EXPECT_EQ(expect<protocol::Event>(p).seq, 0);
  w1.reset();  // the worker dies: no more heartbeats

  zmq::socket_t w2 = worker("w2");
  protocol::Assign retry = expect_while_beating<protocol::Assign>(w2);
  EXPECT_EQ(retry.attempt, 2);
  EXPECT_EQ(retry.resume_tokens, (protocol::TokenIds{5, 6}));
  EXPECT_EQ(retry.resume_text_bytes, 2);
  send(w2, protocol::Tokens{.id = "c", .attempt = 2, .seq = 0, .token_ids = {7}, .text = "z"});
  send(w2, protocol::Final{.id = "c", .attempt = 2, .result = {.finish_reason = protocol::FinishReason::kLength}});
  protocol::Event e1 = expect<protocol::Event>(p), e2 = expect<protocol::Event>(p);
  EXPECT_EQ(e1.seq, 1);
  EXPECT_EQ(e1.token_ids, (protocol::TokenIds{7}));
  EXPECT_EQ(e2.seq, 2);
  ASSERT_TRUE(e2.final_result);
  EXPECT_EQ(e2.final_result->usage.completion_tokens, 3);
}

// A worker that vanished without a word (its connection closed, its heartbeats not yet overdue)
// is found out when its assignment cannot be sent: the job waits for the next worker.
TEST_F(BrokerFixture, AJobForAWorkerThatCannotBeReachedGoesToTheNext) {
  start();
  zmq::socket_t p = producer();
  auto w1 = std::make_unique<zmq::socket_t>(worker("w1"));
  protocol::Job first = job("first", false);
  first.session = "s";  // so the router remembers w1, and forgets it when w1 is lost
  send(p, protocol::Submit{first});
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(*w1);
  send(*w1, protocol::Final{.id = "first", .attempt = 1, .result = {.finish_reason = protocol::FinishReason::kLength}});
  expect<protocol::Event>(p);
  w1.reset();                         // gone, well before its heartbeats are overdue (600 ms)
  std::this_thread::sleep_for(50ms);  // the broker's socket sees the connection close
  protocol::Job second = job("second", false);
  second.session = "s";
  send(p, protocol::Submit{second});
  expect<protocol::Accepted>(p);
  zmq::socket_t w2 = worker("w2");
  protocol::Assign assign = expect_while_beating<protocol::Assign>(w2);
  EXPECT_EQ(assign.job.id, "second");
  EXPECT_EQ(assign.attempt, 2) << "the first went to w1 and could not be sent";
}

TEST_F(BrokerFixture, AJobWhoseWorkersKeepDyingFailsWithError) {
  start({.max_attempts = 2});
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("doomed")});
  expect<protocol::Accepted>(p);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    auto w = std::make_unique<zmq::socket_t>(worker("w" + std::to_string(attempt)));
    EXPECT_EQ(expect<protocol::Assign>(*w).attempt, attempt);
    send(*w, protocol::Disconnect{});
  }
  protocol::Event final_event = expect<protocol::Event>(p);
  ASSERT_TRUE(final_event.final_result);
  EXPECT_EQ(final_event.final_result->finish_reason, protocol::FinishReason::kError);
}

TEST_F(BrokerFixture, OverloadIsRejectedWithARetryHintAndRecovers) {
  start({.queue = {.max_jobs = 1, .max_prompt_tokens = 1000}, .retry_after_ms = 250});
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("first")});
  expect<protocol::Accepted>(p);
  send(p, protocol::Submit{job("second")});
  protocol::Rejected rejected = expect<protocol::Rejected>(p);
  EXPECT_EQ(rejected.reason, "overloaded");
  EXPECT_EQ(rejected.retry_after_ms, 250);
  send(p, protocol::Cancel{"first"});
  EXPECT_EQ(expect<protocol::Event>(p).final_result->finish_reason, protocol::FinishReason::kCancelled);
  send(p, protocol::Submit{job("third")});
  EXPECT_EQ(expect<protocol::Accepted>(p).id, "third");
}

TEST_F(BrokerFixture, CancelOfARunningJobGoesToItsWorker) {
  start();
  zmq::socket_t w = worker("w1");
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("k")});
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(w);
  send(p, protocol::Cancel{"k"});
  EXPECT_EQ(expect<protocol::Cancel>(w).id, "k");
  send(w, protocol::Final{.id = "k", .attempt = 1, .result = {.finish_reason = protocol::FinishReason::kCancelled}});
  EXPECT_EQ(expect<protocol::Event>(p).final_result->finish_reason, protocol::FinishReason::kCancelled);
  send(p, protocol::Cancel{"nope"});
  EXPECT_EQ(expect<protocol::ErrorReply>(p).code, "not_found");
}

TEST_F(BrokerFixture, AQueuedJobPastItsDeadlineEndsWithDeadline) {
  start();
  zmq::socket_t p = producer();
  protocol::Job j = job("late");
  j.deadline_ms = 150;
  send(p, protocol::Submit{j});
  expect<protocol::Accepted>(p);
  EXPECT_EQ(expect<protocol::Event>(p).final_result->finish_reason, protocol::FinishReason::kDeadline);
}

TEST_F(BrokerFixture, ResubmittingAnIdIsIdempotent) {
  start();
  zmq::socket_t w = worker("w1", 4);
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("same")});
  send(p, protocol::Submit{job("same")});
  expect<protocol::Accepted>(p);
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(w);
  EXPECT_FALSE(receive(w, 300ms)) << "the job was assigned twice";
}

TEST_F(BrokerFixture, StatusReportsWhereAJobStands) {
  start();
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("q", false)});
  expect<protocol::Accepted>(p);
  send(p, protocol::Status{"q"});
  EXPECT_EQ(expect<protocol::StatusReply>(p).state, protocol::JobState::kQueued);
  send(p, protocol::Status{"unknown"});
  EXPECT_EQ(expect<protocol::StatusReply>(p).state, protocol::JobState::kUnknown);
}

TEST_F(BrokerFixture, GarbageGetsATypedErrorAndTheBrokerKeepsServing) {
  start();
  zmq::socket_t p = producer();
  const std::vector<std::vector<std::string>> garbage = {
      {"XX"}, {"FQ1", std::string(1, '\x7f'), "\x80"}, {"FQ1", std::string(1, '\x10'), "\xc1"},
      {"FQ2", std::string(1, '\x10'), "\x80"}, {"FQ1", std::string(1, '\x10'), "\x80"},  // SUBMIT without a job
      {"FQ1", std::string(1, '\x30'), "\x80"}};                                        // READY on the frontend
  for (const auto& frames : garbage) {
    send_frames(p, frames);
    protocol::ErrorReply error = expect<protocol::ErrorReply>(p);
    EXPECT_EQ(error.code, "protocol") << error.message;
  }
  zmq::socket_t w = worker("w1");
  send(p, protocol::Submit{job("fine")});
  EXPECT_EQ(expect<protocol::Accepted>(p).id, "fine");
  EXPECT_EQ(expect<protocol::Assign>(w).job.id, "fine");
}

TEST_F(BrokerFixture, TrafficFromAnUnknownWorkerIsAnsweredWithDisconnect) {
  start();
  zmq::socket_t stranger = connect(zmq::socket_type::dealer, broker_->backend_endpoint());
  send(stranger, protocol::WorkerHeartbeat{.load = 0});
  std::optional<protocol::WireMessage> reply = receive(stranger);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->type, MessageType::kDisconnect);
}

TEST_F(BrokerFixture, JobsGoOnlyToWorkersServingTheirModel) {
  start();
  zmq::socket_t p = producer();
  zmq::socket_t tiny = worker("w-tiny");  // serves "tiny"
  zmq::socket_t big = connect(zmq::socket_type::dealer, broker_->backend_endpoint());
  send(big, protocol::Ready{.worker_id = "w-big", .model = "big", .slots = 1, .backend = "cpu"});
  protocol::Job for_big = job("for-big");
  for_big.model = "big";
  protocol::Job for_nobody = job("for-nobody");
  for_nobody.model = "absent";
  send(p, protocol::Submit{for_nobody});  // first in the queue, but nobody serves it
  send(p, protocol::Submit{for_big});
  EXPECT_EQ(expect_while_beating<protocol::Assign>(big).job.id, "for-big");
  send(p, protocol::Submit{job("any")});
  EXPECT_EQ(expect<protocol::Assign>(tiny).job.id, "any");
}

TEST_F(BrokerFixture, AGapInAnAttemptsTokensRequeuesItAsAContinuation) {
  start();
  zmq::socket_t p = producer();
  zmq::socket_t w = worker("w1");
  send(p, protocol::Submit{job("gap")});
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(w);
  send(w, protocol::Tokens{.id = "gap", .attempt = 1, .seq = 0, .token_ids = {1}});
  send(w, protocol::Tokens{.id = "gap", .attempt = 1, .seq = 2, .token_ids = {3}});  // seq 1 is missing
  EXPECT_EQ(expect<protocol::Event>(p).token_ids, (protocol::TokenIds{1}));
  EXPECT_EQ(expect<protocol::Cancel>(w).id, "gap");
  protocol::Assign again = expect<protocol::Assign>(w);
  EXPECT_EQ(again.attempt, 2);
  EXPECT_EQ(again.resume_tokens, (protocol::TokenIds{1}));
}

TEST_F(BrokerFixture, ALateSubscriberReplaysTheWholeStream) {
  start({.replay_events_per_job = 3});
  zmq::socket_t w = worker("w1");
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("r", /*stream=*/false)});
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(w);
  send(w, protocol::Tokens{.id = "r", .attempt = 1, .seq = 0, .token_ids = {1}, .text = "a"});
  send(w, protocol::Tokens{.id = "r", .attempt = 1, .seq = 1, .token_ids = {2}, .text = "b"});
  zmq::socket_t late = producer();
  std::this_thread::sleep_for(100ms);
  send(late, protocol::Replay{"r", 0});
  EXPECT_EQ(expect<protocol::Event>(late).text, "a");
  EXPECT_EQ(expect<protocol::Event>(late).text, "b");
  send(w, protocol::Tokens{.id = "r", .attempt = 1, .seq = 2, .token_ids = {3}, .text = "c"});
  send(w, protocol::Final{.id = "r", .attempt = 1, .result = {.finish_reason = protocol::FinishReason::kLength}});
  expect<protocol::Event>(p);  // the submitter's final event
  send(late, protocol::Replay{"r", 2});
  EXPECT_EQ(expect<protocol::Event>(late).text, "c");
  EXPECT_TRUE(expect<protocol::Event>(late).final_result);
  // Only 3 events are kept: seq 0 is gone now.
  send(late, protocol::Replay{"r", 0});
  EXPECT_EQ(expect<protocol::ErrorReply>(late).code, "replay_unavailable");
  send(late, protocol::Replay{"nope", 0});
  EXPECT_EQ(expect<protocol::ErrorReply>(late).code, "not_found");
}

TEST_F(BrokerFixture, HttpServesMetricsHealthAndReadiness) {
  start();
  const int port = broker_->http_port();
  EXPECT_EQ(testing::http_get(port, "/healthz").status, 200);
  EXPECT_EQ(testing::http_get(port, "/readyz").status, 503) << "ready without a worker";
  EXPECT_EQ(testing::http_get(port, "/nothing-here").status, 404);
  zmq::socket_t w = worker("w1");
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("m")});
  expect<protocol::Accepted>(p);
  expect<protocol::Assign>(w);
  send(w, protocol::Tokens{.id = "m", .attempt = 1, .seq = 0, .token_ids = {1, 2, 3}});
  send(w, protocol::Final{.id = "m", .attempt = 1, .result = {.finish_reason = protocol::FinishReason::kStop}});
  expect<protocol::Event>(p);
  expect<protocol::Event>(p);
  std::this_thread::sleep_for(100ms);  // the gauges refresh with the broker's loop
  EXPECT_EQ(testing::http_get(port, "/readyz").status, 200);
  const std::string metrics = testing::http_get(port, "/metrics").body;
  for (const char* expected : {"flashq_jobs_admitted_total 1", "flashq_generation_tokens_total 3",
                               "flashq_jobs_finished_total{finish_reason=\"stop\"} 1", "flashq_workers 1",
                               "flashq_time_to_first_token_seconds_count 1"}) {
    EXPECT_NE(metrics.find(expected), std::string::npos) << expected << " in\n" << metrics;
  }
}

}  // namespace
}  // namespace flashq
