// Dispatch across the whole broker (docs/protocol.md §9.4 and "Jobs run in priority order"): a
// real Broker on loopback, a producer and synthetic workers speaking the wire protocol over real
// ZeroMQ sockets. Which worker gets each job, how many it gets, and in which order queued jobs
// start when a slot frees, as a worker sees them: in the ASSIGNs it is sent. Every wait is on a
// message, with a generous bound; only the checks that something does NOT arrive wait a fixed
// quiet period, and a slow machine can only make those pass, never fail.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <set>
#include <thread>

#include "broker/broker.h"
#include "tests/broker/synthetic_worker.h"

namespace flashq::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using protocol::JobState;

class BrokerDispatchTest : public ::testing::Test {
 protected:
  BrokerDispatchTest() {
    BrokerOptions options;
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http = "";
    options.heartbeat_ms = 100;  // registration shows within 100 ms: the broker beats registered workers
    options.liveness = 100;      // 10 s of silence before a worker is dead, however slow the machine
    options.drain_timeout_ms = 0;
    broker_ = std::make_unique<Broker>(context_, options);
    // Read before the broker's thread starts: its sockets are that thread's from then on.
    backend_ = broker_->backend_endpoint();
    producer_.set(zmq::sockopt::linger, 0);
    producer_.connect(broker_->frontend_endpoint());
    thread_ = std::thread([this] { broker_->run(stop_); });
  }
  ~BrokerDispatchTest() override {
    stop_ = true;
    thread_.join();
  }

  // A worker advertising `slots`, registered with the broker when this returns.
  SyntheticWorker& add_worker(const std::string& name, int64_t slots) {
    workers_.push_back(std::make_unique<SyntheticWorker>(context_, backend_, name, slots));
    SyntheticWorker& worker = *workers_.back();
    EXPECT_TRUE(pump_until([&] { return worker.registered(); })) << name << " never registered";
    return worker;
  }

  // Reads every socket and keeps every worker beating until `done` holds or `timeout` passes.
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

  // The job id of the next ASSIGN sent to `worker`, "" when none arrives in 10 s.
  std::string next_assigned(SyntheticWorker& worker) {
    std::optional<protocol::Assign> assign;
    pump_until([&] { return (assign = worker.take_assign()).has_value(); });
    if (!assign) return "";
    assigns_[assign->job.id] = *assign;
    return assign->job.id;
  }

  // After a quiet period, `worker` has been sent no ASSIGN (its next, when it has one).
  std::string assigned_after_quiet_period(SyntheticWorker& worker) {
    pump_until([] { return false; }, 300ms);
    std::optional<protocol::Assign> assign = worker.take_assign();
    return assign ? assign->job.id : "";
  }

  // Ends job `id` on `worker` with FINAL and waits for its final event: the broker has freed the
  // slot when this returns (a FINAL and a later SUBMIT travel on different connections, so
  // without the wait the SUBMIT could be served first).
  bool finish(SyntheticWorker& worker, const std::string& id) {
    worker.finish(assigns_.at(id));
    return pump_until([&] { return ended_.count(id) > 0; });
  }

  // Submits a job that names no model (any worker serves it); true once ACCEPTED.
  bool submit(const std::string& id, int64_t priority = 0) {
    protocol::Job job;
    job.id = id;
    job.prompt = std::string("hello");
    job.priority = priority;
    send(protocol::Submit{job});
    std::optional<protocol::WireMessage> reply = next_reply();
    return reply && reply->type == protocol::MessageType::kAccepted &&
           protocol::from_wire<protocol::Accepted>(*reply).id == id;
  }

  // The broker's own view of a job (STATUS).
  std::string state_of(const std::string& id) {
    send(protocol::Status{id});
    std::optional<protocol::WireMessage> reply = next_reply();
    if (!reply || reply->type != protocol::MessageType::kStatusReply) return "(no STATUS_REPLY)";
    return std::string(protocol::job_state_name(protocol::from_wire<protocol::StatusReply>(*reply).state));
  }

  void expect_states(const std::vector<std::string>& ids, const std::string& state) {
    for (const std::string& id : ids) EXPECT_EQ(state_of(id), state) << "job " << id;
  }

  void expect_no_unexpected_messages() {
    for (auto& worker : workers_) {
      EXPECT_TRUE(worker->unexpected().empty())
          << worker->name() << " was sent " << ::testing::PrintToString(worker->unexpected());
    }
  }

 private:
  template <typename Message>
  void send(const Message& message) {
    const std::vector<std::string> frames = protocol::to_frames(protocol::to_wire(message));
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    zmq::send_multipart(producer_, buffers);
  }

  // Replies to the producer, in order; the final events of the jobs the workers end are kept
  // apart, since they come whenever a FINAL does.
  void drain_producer() {
    std::vector<zmq::message_t> parts;
    while (zmq::recv_multipart(producer_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
      std::vector<std::string_view> frames;
      for (const zmq::message_t& part : parts) frames.push_back(part.to_string_view());
      protocol::WireMessage message = protocol::from_frames(frames);
      if (message.type == protocol::MessageType::kEvent) {
        const protocol::Event event = protocol::from_wire<protocol::Event>(message);
        EXPECT_TRUE(event.final_result) << "job " << event.id << " streams without stream: true";
        EXPECT_TRUE(ended_.insert(event.id).second) << "job " << event.id << " ended twice";
      } else {
        replies_.push_back(std::move(message));
      }
      parts.clear();
    }
  }

  std::optional<protocol::WireMessage> next_reply() {
    if (!pump_until([&] { return !replies_.empty(); })) return std::nullopt;
    protocol::WireMessage reply = std::move(replies_.front());
    replies_.pop_front();
    return reply;
  }

  zmq::context_t context_;
  std::unique_ptr<Broker> broker_;
  std::string backend_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  zmq::socket_t producer_{context_, zmq::socket_type::dealer};
  std::deque<protocol::WireMessage> replies_;
  std::vector<std::unique_ptr<SyntheticWorker>> workers_;
  std::map<std::string, protocol::Assign> assigns_;
  std::set<std::string> ended_;  // jobs whose final event the producer has
};

// Load is the share of a worker's slots in use. "wide" (8 slots, 5 busy: 3 free, 62% loaded) has
// more free slots than "narrow" (2 slots, idle), yet narrow is the less loaded: it gets the next
// jobs until it is fuller than wide (or full), and only then does wide get one.
TEST_F(BrokerDispatchTest, EachJobGoesToTheLeastLoadedWorker) {
  SyntheticWorker& wide = add_worker("wide", 8);
  for (int i = 0; i < 5; ++i) {
    const std::string id = "early-" + std::to_string(i);
    ASSERT_TRUE(submit(id));
    ASSERT_EQ(next_assigned(wide), id) << "the only worker";
  }
  SyntheticWorker& narrow = add_worker("narrow", 2);

  ASSERT_TRUE(submit("n1"));
  EXPECT_EQ(next_assigned(narrow), "n1") << "narrow 0/2 in use, wide 5/8";
  ASSERT_TRUE(submit("n2"));
  EXPECT_EQ(next_assigned(narrow), "n2") << "narrow 1/2 in use, wide 5/8";
  ASSERT_TRUE(submit("w1"));
  EXPECT_EQ(next_assigned(wide), "w1") << "narrow full, wide 5/8";
  EXPECT_EQ(assigned_after_quiet_period(narrow), "") << "narrow was sent a job beyond its 2 slots";
  EXPECT_EQ(assigned_after_quiet_period(wide), "") << "a job was assigned twice";

  // A FINAL on wide makes it 5/8 (62%) against narrow's 2/2: wide. One on narrow makes it 1/2
  // (50%): narrow again.
  ASSERT_TRUE(finish(wide, "early-0"));
  ASSERT_TRUE(submit("w2"));
  EXPECT_EQ(next_assigned(wide), "w2");
  ASSERT_TRUE(finish(narrow, "n1"));
  ASSERT_TRUE(submit("n3"));
  EXPECT_EQ(next_assigned(narrow), "n3");
  expect_states({"early-1", "n2", "n3", "w1", "w2"}, "running");
  expect_no_unexpected_messages();
}

// A worker is sent at most its advertised slots; the jobs beyond wait in the queue (STATUS says
// queued) until a FINAL frees a slot, and a heartbeat that reports no load frees none.
TEST_F(BrokerDispatchTest, AWorkerIsNeverSentMoreJobsThanItsSlots) {
  SyntheticWorker& worker = add_worker("w", 2);
  for (const char* id : {"j0", "j1", "j2", "j3", "j4"}) ASSERT_TRUE(submit(id));
  EXPECT_EQ(next_assigned(worker), "j0");
  EXPECT_EQ(next_assigned(worker), "j1");
  worker.beat(/*load=*/0);
  EXPECT_EQ(assigned_after_quiet_period(worker), "") << "a third job for 2 slots";
  expect_states({"j0", "j1"}, "running");
  expect_states({"j2", "j3", "j4"}, "queued");

  ASSERT_TRUE(finish(worker, "j0"));
  EXPECT_EQ(next_assigned(worker), "j2");
  EXPECT_EQ(assigned_after_quiet_period(worker), "") << "one FINAL frees one slot";
  expect_states({"j3", "j4"}, "queued");

  ASSERT_TRUE(finish(worker, "j1"));
  ASSERT_TRUE(finish(worker, "j2"));
  EXPECT_EQ(next_assigned(worker), "j3");
  EXPECT_EQ(next_assigned(worker), "j4");
  EXPECT_EQ(worker.held(), (std::set<std::string>{"j3", "j4"}));
  expect_states({"j0", "j1", "j2"}, "finished");
  expect_no_unexpected_messages();
}

// Jobs queued behind a busy worker start, one per freed slot, lower priority value first and in
// submission order within a priority, whatever order they were submitted in.
TEST_F(BrokerDispatchTest, QueuedJobsStartInPriorityOrderThenFifo) {
  SyntheticWorker& worker = add_worker("w", 1);
  ASSERT_TRUE(submit("blocker", 0));
  ASSERT_EQ(next_assigned(worker), "blocker");
  const std::vector<std::pair<std::string, int64_t>> queued = {
      {"p5-a", 5}, {"p1-a", 1}, {"neg3", -3}, {"p5-b", 5}, {"p1-b", 1}, {"p0", 0}, {"p1-c", 1}};
  for (const auto& [id, priority] : queued) ASSERT_TRUE(submit(id, priority));
  EXPECT_EQ(assigned_after_quiet_period(worker), "") << "one slot, already held";

  std::vector<std::string> started;
  std::string running = "blocker";
  for (size_t i = 0; i < queued.size(); ++i) {
    ASSERT_TRUE(finish(worker, running)) << "no final event for " << running;
    running = next_assigned(worker);
    ASSERT_NE(running, "") << "nothing started after " << ::testing::PrintToString(started);
    started.push_back(running);
  }
  EXPECT_EQ(started, (std::vector<std::string>{"neg3", "p0", "p1-a", "p1-b", "p1-c", "p5-a", "p5-b"}));
  expect_no_unexpected_messages();
}

}  // namespace
}  // namespace flashq::testing
