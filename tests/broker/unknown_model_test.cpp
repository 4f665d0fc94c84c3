// Unknown models at the broker (docs/protocol.md §9.4), over real ZeroMQ sockets on loopback with
// the test playing producer and workers: a job naming a model no worker has served for the grace
// period ends promptly `rejected` (REJECTED unknown_model at SUBMIT, or a final event once queued)
// with the models served listed; within the grace period it waits and runs when a worker for it
// comes; jobs without a model and `spec: dflash` jobs are never refused for it.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>
#include <zmq_addon.hpp>

#include "broker/broker.h"
#include "tests/broker/wire_peer.h"

namespace flashq {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using protocol::MessageType;

class UnknownModelTest : public ::testing::Test {
 protected:
  void start(int64_t grace_ms) {
    BrokerOptions options;
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http.clear();
    options.heartbeat_ms = 200;
    options.drain_timeout_ms = 0;
    options.unknown_model_grace_ms = grace_ms;
    started_ = Clock::now();  // before the broker, whose grace period starts when it is made
    broker_ = std::make_unique<Broker>(context_, options);
    thread_ = std::thread([this] { broker_->run(stop_); });
  }
  ~UnknownModelTest() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  zmq::socket_t connect(const std::string& endpoint) { return testing::connect_dealer(context_, endpoint); }
  zmq::socket_t producer() { return connect(broker_->frontend_endpoint()); }
  zmq::socket_t worker(const std::string& name, const std::string& model, int64_t block_size = 0) {
    zmq::socket_t socket = connect(broker_->backend_endpoint());
    send(socket, protocol::Ready{.worker_id = name, .model = model, .slots = 2, .block_size = block_size,
                                 .backend = "cpu"});
    return socket;
  }
  template <typename Message>
  static void send(zmq::socket_t& socket, const Message& message) { testing::send_message(socket, message); }
  // The next message that is not a heartbeat within `timeout`; meanwhile the given workers beat,
  // so that they stay alive.
  static std::optional<protocol::WireMessage> receive(zmq::socket_t& socket, std::chrono::milliseconds timeout,
                                                      std::vector<zmq::socket_t*> beating = {}) {
    return testing::receive_message(socket, timeout, [&beating] {
      for (zmq::socket_t* w : beating) send(*w, protocol::WorkerHeartbeat{});
    });
  }
  // Waits `duration` while the given workers beat.
  static void wait_beating(std::chrono::milliseconds duration, std::vector<zmq::socket_t*> beating) {
    const auto until = Clock::now() + duration;
    while (Clock::now() < until) {
      for (zmq::socket_t* w : beating) send(*w, protocol::WorkerHeartbeat{});
      std::this_thread::sleep_for(50ms);
    }
  }
  static protocol::Job job(const std::string& id, std::optional<std::string> model) {
    protocol::Job j;
    j.id = id;
    j.prompt = std::string("hello");
    j.stream = true;
    j.model = std::move(model);
    return j;
  }
  int64_t ms_since_start() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count();
  }

  zmq::context_t context_;
  std::unique_ptr<Broker> broker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Clock::time_point started_;
};

TEST_F(UnknownModelTest, AfterTheGracePeriodSubmitIsRejectedAtOnceWithTheModelsServed) {
  start(300);
  zmq::socket_t p = producer();
  zmq::socket_t w = worker("w-tiny", "tiny");
  wait_beating(400ms, {&w});
  const auto sent = Clock::now();
  send(p, protocol::Submit{job("typo", "tinny")});
  std::optional<protocol::WireMessage> reply = receive(p, 2000ms, {&w});
  ASSERT_TRUE(reply) << "no answer to SUBMIT";
  ASSERT_EQ(reply->type, MessageType::kRejected) << protocol::message_type_name(reply->type);
  EXPECT_LT(Clock::now() - sent, 500ms) << "the rejection is prompt, not at the deadline";
  const auto rejected = protocol::from_wire<protocol::Rejected>(*reply);
  EXPECT_EQ(rejected.id, "typo");
  EXPECT_EQ(rejected.reason, "unknown_model");
  EXPECT_EQ(rejected.retry_after_ms, 0) << "retrying the same job cannot help";
  EXPECT_EQ(rejected.message, "no worker serves model 'tinny'; models served: tiny");
  EXPECT_NE(broker_->metrics().render().find("reason=\"unknown_model\"} 1"), std::string::npos)
      << "the rejection is counted by reason";
}

TEST_F(UnknownModelTest, AQueuedJobEndsRejectedWhenTheGracePeriodPassesWithoutItsModel) {
  start(500);
  zmq::socket_t p = producer();
  zmq::socket_t w = worker("w-tiny", "tiny");
  send(p, protocol::Submit{job("early", "absent")});  // within grace: queued
  std::optional<protocol::WireMessage> accepted = receive(p, 2000ms, {&w});
  ASSERT_TRUE(accepted);
  ASSERT_EQ(accepted->type, MessageType::kAccepted) << protocol::message_type_name(accepted->type);
  std::optional<protocol::WireMessage> final_event = receive(p, 3000ms, {&w});
  ASSERT_TRUE(final_event) << "no final event: the job waits for its 600 s deadline";
  ASSERT_EQ(final_event->type, MessageType::kEvent);
  const auto event = protocol::from_wire<protocol::Event>(*final_event);
  EXPECT_GE(ms_since_start(), 500) << "not before the grace period";
  EXPECT_LT(ms_since_start(), 1500) << "promptly after it";
  ASSERT_TRUE(event.final_result);
  EXPECT_EQ(event.final_result->finish_reason, protocol::FinishReason::kRejected);
  EXPECT_EQ(event.final_result->error, "no worker serves model 'absent'; models served: tiny");
}

TEST_F(UnknownModelTest, WithinTheGracePeriodAJobWaitsAndRunsWhenAWorkerForItConnects) {
  start(800);
  zmq::socket_t p = producer();
  send(p, protocol::Submit{job("late-model", "late")});
  std::optional<protocol::WireMessage> accepted = receive(p, 2000ms);
  ASSERT_TRUE(accepted);
  ASSERT_EQ(accepted->type, MessageType::kAccepted);
  std::this_thread::sleep_for(300ms);
  zmq::socket_t w = worker("w-late", "late");
  std::optional<protocol::WireMessage> assign = receive(w, 2000ms, {&w});
  ASSERT_TRUE(assign) << "the job was not assigned to the worker serving its model";
  ASSERT_EQ(assign->type, MessageType::kAssign);
  EXPECT_EQ(protocol::from_wire<protocol::Assign>(*assign).job.id, "late-model");
  wait_beating(700ms, {&w});  // past the grace period, while it runs
  send(w, protocol::Final{.id = "late-model", .attempt = 1, .result = {}});
  std::optional<protocol::WireMessage> final_event = receive(p, 2000ms, {&w});
  ASSERT_TRUE(final_event);
  const auto event = protocol::from_wire<protocol::Event>(*final_event);
  ASSERT_TRUE(event.final_result);
  EXPECT_EQ(event.final_result->finish_reason, protocol::FinishReason::kStop);
}

TEST_F(UnknownModelTest, AModelIsServedForTheGracePeriodAfterItsLastWorkerLeft) {
  start(400);
  zmq::socket_t p = producer();
  zmq::socket_t w = worker("w-m", "m");
  wait_beating(500ms, {&w});  // the broker is past its own grace period
  send(w, protocol::Disconnect{});
  std::this_thread::sleep_for(100ms);
  const auto left = Clock::now();
  send(p, protocol::Submit{job("after-leave", "m")});
  std::optional<protocol::WireMessage> accepted = receive(p, 2000ms);
  ASSERT_TRUE(accepted);
  ASSERT_EQ(accepted->type, MessageType::kAccepted) << "a restarting worker's model is not forgotten at once";
  std::optional<protocol::WireMessage> final_event = receive(p, 3000ms);
  ASSERT_TRUE(final_event);
  const auto event = protocol::from_wire<protocol::Event>(*final_event);
  ASSERT_TRUE(event.final_result);
  EXPECT_EQ(event.final_result->finish_reason, protocol::FinishReason::kRejected);
  EXPECT_EQ(event.final_result->error, "no worker serves model 'm'; models served: none");
  EXPECT_LT(Clock::now() - left, 1500ms);
}

TEST_F(UnknownModelTest, JobsWithoutAModelAreNeverRejectedAndWaitForAnyWorker) {
  start(100);
  zmq::socket_t p = producer();
  std::this_thread::sleep_for(300ms);  // past the grace period, with no worker at all
  send(p, protocol::Submit{job("any", std::nullopt)});
  std::optional<protocol::WireMessage> accepted = receive(p, 2000ms);
  ASSERT_TRUE(accepted);
  ASSERT_EQ(accepted->type, MessageType::kAccepted);
  EXPECT_FALSE(receive(p, 400ms)) << "no final: the job waits";
  zmq::socket_t w = worker("w-any", "whatever");
  std::optional<protocol::WireMessage> assign = receive(w, 2000ms, {&w});
  ASSERT_TRUE(assign);
  ASSERT_EQ(assign->type, MessageType::kAssign);
  EXPECT_EQ(protocol::from_wire<protocol::Assign>(*assign).job.id, "any");
}

TEST_F(UnknownModelTest, ZeroGraceLetsJobsForAnyModelWait) {
  start(0);
  zmq::socket_t p = producer();
  std::this_thread::sleep_for(200ms);
  send(p, protocol::Submit{job("waits", "absent")});
  std::optional<protocol::WireMessage> accepted = receive(p, 2000ms);
  ASSERT_TRUE(accepted);
  ASSERT_EQ(accepted->type, MessageType::kAccepted);
  EXPECT_FALSE(receive(p, 400ms)) << "with the rule off, the job waits for its deadline";
}

TEST_F(UnknownModelTest, ADflashJobWithNoDrafterAnywhereRunsTargetOnlyOnAWorkerOfItsModel) {
  start(100);
  zmq::socket_t p = producer();
  zmq::socket_t w = worker("w-plain", "m", 0);
  wait_beating(200ms, {&w});
  protocol::Job dflash = job("dflash", "m");
  dflash.spec = protocol::SpecMode::kDflash;
  send(p, protocol::Submit{dflash});
  std::optional<protocol::WireMessage> accepted = receive(p, 2000ms, {&w});
  ASSERT_TRUE(accepted);
  ASSERT_EQ(accepted->type, MessageType::kAccepted) << "spec dflash is never refused for want of a drafter";
  std::optional<protocol::WireMessage> assign = receive(w, 2000ms, {&w});
  ASSERT_TRUE(assign);
  ASSERT_EQ(assign->type, MessageType::kAssign);
  EXPECT_EQ(protocol::from_wire<protocol::Assign>(*assign).job.spec, protocol::SpecMode::kDflash);
}

}  // namespace
}  // namespace flashq
