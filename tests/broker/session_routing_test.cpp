// Cache-aware routing across the whole broker (docs/protocol.md 9.4, "Routing"): a real Broker on
// loopback, a producer and two workers played at the wire level over real ZeroMQ sockets. Where
// each job goes is read from the ASSIGNs the workers are sent (the job's `session` travels in
// them), and why from the broker's /metrics. Every wait is on a message, with a generous bound;
// the one check that something does NOT arrive waits a fixed quiet period, which a slow machine
// can only make pass, never fail.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <sstream>
#include <thread>

#include "broker/broker.h"
#include "tests/broker/synthetic_worker.h"
#include "tests/support/http_get.h"

namespace flashq::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kSystemPrompt = "You are an agent. Tools: " + std::string(1500, 't');

class SessionRoutingTest : public ::testing::Test {
 protected:
  SessionRoutingTest() {
    BrokerOptions options;
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http = "127.0.0.1:0";
    options.heartbeat_ms = 100;
    options.liveness = 100;  // 10 s of silence before a worker is dead, however slow the machine
    options.drain_timeout_ms = 0;
    broker_ = std::make_unique<Broker>(context_, options);
    backend_ = broker_->backend_endpoint();
    producer_.set(zmq::sockopt::linger, 0);
    producer_.connect(broker_->frontend_endpoint());
    thread_ = std::thread([this] { broker_->run(stop_); });
    // Two workers of 2 slots: which of them a tie of load picks depends on their ROUTER
    // identities, so the tests name them by what happened to them, never by registration order.
    for (const char* name : {"w1", "w2"}) {
      workers_.push_back(std::make_unique<SyntheticWorker>(context_, backend_, name, 2));
      SyntheticWorker& worker = *workers_.back();
      EXPECT_TRUE(pump_until([&] { return worker.registered(); })) << name << " never registered";
    }
  }
  ~SessionRoutingTest() override {
    stop_ = true;
    thread_.join();
  }

  template <typename Done>
  bool pump_until(Done done, std::chrono::milliseconds timeout = 10000ms) {
    const auto until = Clock::now() + timeout;
    auto next_beat = Clock::now();
    while (true) {
      for (auto& worker : workers_) worker->drain();
      drain_producer();
      if (done()) return true;
      if (Clock::now() >= until) return false;
      if (Clock::now() >= next_beat) {
        for (auto& worker : workers_) worker->beat();
        next_beat = Clock::now() + 100ms;
      }
      std::vector<zmq::pollitem_t> items{{producer_.handle(), 0, ZMQ_POLLIN, 0}};
      for (auto& worker : workers_) items.push_back({worker->socket().handle(), 0, ZMQ_POLLIN, 0});
      zmq::poll(items.data(), items.size(), 10ms);
    }
  }

  // Submits a job and waits for its ASSIGN: the worker it went to, nullptr when none came.
  SyntheticWorker* run(const std::string& id, std::optional<std::string> session, std::string prompt = "hello") {
    protocol::Job job;
    job.id = id;
    job.prompt = std::move(prompt);
    job.session = std::move(session);
    send(protocol::Submit{job});
    SyntheticWorker* assigned = nullptr;
    pump_until([&] {
      for (auto& worker : workers_) {
        if (std::optional<protocol::Assign> assign = worker->take_assign()) {
          EXPECT_EQ(assign->job.id, id) << "an ASSIGN of another job";
          EXPECT_EQ(assign->job.session, job.session) << "the session travels to the worker";
          assigns_[assign->job.id] = *assign;
          assigned = worker.get();
        }
      }
      return assigned != nullptr;
    });
    return assigned;
  }

  SyntheticWorker* other_than(const SyntheticWorker* worker) {
    return workers_[0].get() == worker ? workers_[1].get() : workers_[0].get();
  }

  // Ends job `id` with FINAL and waits for its final event: the slot is free when this returns.
  bool finish(SyntheticWorker& worker, const std::string& id) {
    worker.finish(assigns_.at(id));
    return pump_until([&] { return ended_.count(id) > 0; });
  }

  // flashq_routing_decisions_total{reason=...} from /metrics; -1 when absent.
  double routed(const std::string& reason) {
    return metric("flashq_routing_decisions_total{reason=\"" + reason + "\"}");
  }
  // The sample named exactly `name` (labels included) from /metrics; -1 when absent.
  double metric(const std::string& name) {
    const HttpResponse response = http_get(broker_->http_port(), "/metrics");
    if (response.status != 200) return -1;
    const std::string sample = name + " ";
    std::istringstream lines(response.body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(sample, 0) == 0) return std::stod(line.substr(sample.size()));
    }
    return -1;
  }

 private:
  template <typename Message>
  void send(const Message& message) {
    const std::vector<std::string> frames = protocol::to_frames(protocol::to_wire(message));
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    zmq::send_multipart(producer_, buffers);
  }

  void drain_producer() {
    std::vector<zmq::message_t> parts;
    while (zmq::recv_multipart(producer_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
      std::vector<std::string_view> frames;
      for (const zmq::message_t& part : parts) frames.push_back(part.to_string_view());
      protocol::WireMessage message = protocol::from_frames(frames);
      if (message.type == protocol::MessageType::kEvent) {
        const protocol::Event event = protocol::from_wire<protocol::Event>(message);
        if (event.final_result) ended_.insert(event.id);
      } else {
        EXPECT_EQ(message.type, protocol::MessageType::kAccepted)
            << "unexpected " << protocol::message_type_name(message.type);
      }
      parts.clear();
    }
  }

  zmq::context_t context_;
  std::unique_ptr<Broker> broker_;
  std::string backend_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  zmq::socket_t producer_{context_, zmq::socket_type::dealer};
  std::vector<std::unique_ptr<SyntheticWorker>> workers_;
  std::map<std::string, protocol::Assign> assigns_;
  std::set<std::string> ended_;
};

// Turn 2 goes to turn 1's worker though the other is idle; turn 3, with that worker full, goes to
// the other rather than wait (and the session follows it); another session is not starved.
TEST_F(SessionRoutingTest, ASessionsTurnsGoBackToItsWorkerUntilItIsFull) {
  ASSERT_EQ(routed("session"), 0) << "every reason is on /metrics from the start";
  SyntheticWorker* first = run("turn-1", "agent-7");
  ASSERT_NE(first, nullptr);
  SyntheticWorker* second = run("turn-2", "agent-7");
  EXPECT_EQ(second, first) << "1 of 2 slots busy against an idle worker: within the load gap";
  SyntheticWorker* third = run("turn-3", "agent-7");
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third, other_than(first)) << "the session's worker is full: never waited for";
  SyntheticWorker* other = run("other-1", "agent-8");
  EXPECT_EQ(other, third) << "the only free slot: another session still runs";
  EXPECT_EQ(routed("session"), 1);
  EXPECT_EQ(routed("fallback"), 1);
  EXPECT_EQ(routed("least_loaded"), 2);

  // The session now lives where turn 3 ran.
  ASSERT_TRUE(finish(*third, "turn-3"));
  ASSERT_TRUE(finish(*first, "turn-1"));
  ASSERT_TRUE(finish(*first, "turn-2"));
  EXPECT_EQ(run("turn-4", "agent-7"), third) << "1 of 2 busy (other-1) against an idle worker";
  EXPECT_EQ(routed("session"), 2);
  // Gauges are refreshed by the broker's timers (every 10 ms or so).
  EXPECT_TRUE(pump_until([&] { return metric("flashq_routing_sessions") == 2; })) << "agent-7 and agent-8";
  EXPECT_EQ(metric("flashq_routing_prefix_blocks"), 0) << "no prompt filled a block";
}

// Without a session, a prompt goes where its longest known prefix was sent.
TEST_F(SessionRoutingTest, APromptGoesWhereItsPrefixWasSent) {
  SyntheticWorker* first = run("q1", std::nullopt, kSystemPrompt + "\nuser: what is 2+2?");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(run("q2", std::nullopt, kSystemPrompt + "\nuser: and 3+3?"), first) << "the other worker is idle";
  ASSERT_TRUE(finish(*first, "q1"));
  EXPECT_EQ(run("short", std::nullopt, "hi"), other_than(first)) << "no prefix known: by load";
  EXPECT_EQ(routed("prefix"), 1);
  EXPECT_EQ(routed("least_loaded"), 2);
  EXPECT_EQ(routed("session"), 0);
  // Both questions share the system prompt's 5 whole blocks (1,525 bytes) and differ in their
  // sixth, where the question begins: 7 blocks; "hi" fills none.
  EXPECT_TRUE(pump_until([&] { return metric("flashq_routing_prefix_blocks") == 7; }))
      << metric("flashq_routing_prefix_blocks");
}

}  // namespace
}  // namespace flashq::testing
