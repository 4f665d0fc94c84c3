// The gateway's broker link against a broker played by the test on a real ROUTER socket: while
// one job's events pour in as fast as the broker can send them, a request posted to the link
// still reaches the broker and its answers still reach its listener (the link reads a bounded
// batch per socket per round, so a flood starves nothing); and a job under way when its broker's
// connection closes is replayed from its next seq by the broker that answers there next, or fails
// as unavailable when none does.
#include "gateway/server/gateway_broker_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>
#include <zmq_addon.hpp>

#include "shared/protocol/messages.h"
#include "shared/protocol/wire.h"

namespace flashq::gateway {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Counts what one job's listener heard.
class CountingListener : public JobListener {
 public:
  void accepted() override { accepted_ = true; }
  void rejected(const protocol::Rejected&) override {}
  void event(const protocol::Event& event) override {
    {
      std::lock_guard lock(mutex_);
      texts_.push_back(event.text);
    }
    ++events_;
    if (event.final_result) ended_ = true;
  }
  void failed(const protocol::ErrorReply& error) override {
    std::lock_guard lock(mutex_);
    failure_ = error.code + ": " + error.message;
  }
  std::string failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }

  std::vector<std::string> texts() const {
    std::lock_guard lock(mutex_);
    return texts_;
  }

  std::atomic<bool> accepted_{false}, ended_{false};
  std::atomic<std::int64_t> events_{0};

 private:
  mutable std::mutex mutex_;
  std::string failure_;
  std::vector<std::string> texts_;
};

void send_to(zmq::socket_t& router, const std::string& peer, const protocol::WireMessage& message) {
  std::vector<zmq::const_buffer> frames{zmq::buffer(peer)};
  const std::vector<std::string> body = protocol::to_frames(message);
  for (const std::string& f : body) frames.push_back(zmq::buffer(f));
  zmq::send_multipart(router, frames);
}

protocol::Job streamed_job(const std::string& id) {
  protocol::Job job;
  job.id = id;
  job.prompt = std::string("hello");
  job.stream = true;
  return job;
}

TEST(BrokerLinkTest, ARequestPostedDuringAFloodOfEventsReachesTheBrokerAndIsAnswered) {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::sndhwm, 0);  // the flood is never dropped by the broker's side
  router.bind("tcp://127.0.0.1:*");
  zmq::socket_t publisher(context, zmq::socket_type::pub);
  publisher.bind("tcp://127.0.0.1:*");
  GatewayBrokerLink link({.frontend = router.get(zmq::sockopt::last_endpoint),
                   .stream = publisher.get(zmq::sockopt::last_endpoint),
                   .curve = std::nullopt});

  auto flooded = std::make_shared<CountingListener>();
  auto later = std::make_shared<CountingListener>();

  // The broker: accepts "flooded", then sends its events without pause; once the flood runs,
  // the test submits "later", which the broker accepts and ends at once.
  std::atomic<bool> connected{false};
  std::atomic<Clock::rep> later_submitted_at{0};  // steady clock ticks
  std::atomic<std::int64_t> later_seen_after_ms{-1};
  std::jthread broker([&](std::stop_token stop) {
    std::string peer;
    std::int64_t seq = 0;
    const auto give_up = Clock::now() + 5s;
    while (!stop.stop_requested() && Clock::now() < give_up && later_seen_after_ms < 0) {
      std::vector<zmq::message_t> parts;
      while (zmq::recv_multipart(router, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
        std::vector<std::string_view> frames;
        for (std::size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string_view());
        const protocol::WireMessage message = protocol::from_frames(frames);
        if (message.type == protocol::MessageType::kSubmit) {
          const protocol::Job job = protocol::from_wire<protocol::Submit>(message).job;
          peer = parts[0].to_string();
          connected = true;
          send_to(router, peer, protocol::to_wire(protocol::Accepted{job.id}));
          if (job.id == "later") {
            const Clock::time_point submitted{Clock::duration(later_submitted_at.load())};
            later_seen_after_ms =
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - submitted).count();
            protocol::Event last{
                .id = "later", .seq = 0, .token_ids = {}, .text = "", .final_result = protocol::FinalResult{}};
            send_to(router, peer, protocol::to_wire(last));
          }
        }
        parts.clear();
      }
      if (peer.empty()) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      for (int i = 0; i < 256; ++i) {
        send_to(router, peer, protocol::to_wire(protocol::Event{.id = "flooded", .seq = seq++, .text = "x"}));
      }
    }
  });
  // A link sends nothing before its connection is made (it fails at once instead): submit until
  // one gets through.
  for (int tries = 0; !connected && tries < 100; ++tries) {
    flooded = std::make_shared<CountingListener>();
    link.submit(streamed_job("flooded"), flooded);
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(connected) << "the link never connected";
  while (flooded->events_ < 1000 && flooded->failure().empty()) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(flooded->failure().empty()) << flooded->failure();
  later_submitted_at = Clock::now().time_since_epoch().count();
  link.submit(streamed_job("later"), later);
  const auto until = Clock::now() + 10s;
  while (!later->ended_ && Clock::now() < until) std::this_thread::sleep_for(5ms);
  broker.join();

  EXPECT_GE(later_seen_after_ms.load(), 0) << "the SUBMIT posted during the flood never reached the broker";
  EXPECT_LT(later_seen_after_ms.load(), 2000) << "the SUBMIT waited behind the flood";
  EXPECT_TRUE(later->accepted_) << "its ACCEPTED was not delivered during the flood";
  EXPECT_TRUE(later->ended_) << "its final event was not delivered during the flood";
  EXPECT_TRUE(later->failure().empty()) << later->failure();
  EXPECT_GT(flooded->events_.load(), 1000);
}

// A broker played on `endpoint`: a ROUTER the test reads and answers on its own thread.
class PlayedBroker {
 public:
  PlayedBroker(zmq::context_t& context, const std::string& endpoint) : router_(context, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    // A socket closed on this endpoint lets go of the port a moment later (ZeroMQ closes it on
    // its I/O thread).
    for (const auto until = Clock::now() + 5s;; std::this_thread::sleep_for(10ms)) {
      try {
        router_.bind(endpoint);
        return;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || Clock::now() > until) throw;
      }
    }
  }

  std::string endpoint() { return router_.get(zmq::sockopt::last_endpoint); }

  // The next message of type `type` within `timeout` (others are read and passed over).
  std::optional<protocol::WireMessage> next(protocol::MessageType type, std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(router_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      std::vector<std::string_view> frames;
      for (std::size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string_view());
      protocol::WireMessage message = protocol::from_frames(frames);
      peer_ = parts[0].to_string();
      if (message.type == type) return message;
    }
    return std::nullopt;
  }

  void send(const protocol::WireMessage& message) { send_to(router_, peer_, message); }
  void event(std::int64_t seq, const std::string& text, bool final = false) {
    protocol::Event event{.id = "job", .seq = seq, .text = text};
    if (final) event.final_result = protocol::FinalResult{};
    send(protocol::to_wire(event));
  }

 private:
  zmq::socket_t router_;
  std::string peer_;
};

// Submits "job" through `link` until the broker has it (a link sends nothing before its
// connection is made), accepts it and sends its first three events.
std::shared_ptr<CountingListener> start_job(GatewayBrokerLink& link, PlayedBroker& broker) {
  std::shared_ptr<CountingListener> listener;
  for (int tries = 0; tries < 100; ++tries) {
    listener = std::make_shared<CountingListener>();
    link.submit(streamed_job("job"), listener);
    if (broker.next(protocol::MessageType::kSubmit, 50ms)) break;
  }
  broker.send(protocol::to_wire(protocol::Accepted{"job"}));
  for (std::int64_t seq = 0; seq < 3; ++seq) broker.event(seq, std::string(1, static_cast<char>('a' + seq)));
  const auto until = Clock::now() + 5s;
  while (listener->events_ < 3 && Clock::now() < until) std::this_thread::sleep_for(1ms);
  return listener;
}

TEST(BrokerLinkTest, AJobUnderWayWhenItsBrokerRestartsIsReplayedFromItsNextSeq) {
  zmq::context_t context;
  zmq::socket_t publisher(context, zmq::socket_type::pub);
  publisher.bind("tcp://127.0.0.1:*");
  auto first = std::make_unique<PlayedBroker>(context, "tcp://127.0.0.1:*");
  const std::string endpoint = first->endpoint();
  GatewayBrokerLink link({.frontend = endpoint, .stream = publisher.get(zmq::sockopt::last_endpoint), .curve = std::nullopt});
  auto listener = start_job(link, *first);
  ASSERT_EQ(listener->events_.load(), 3) << listener->failure();

  first.reset();  // the broker dies; another takes its place on the same endpoint
  PlayedBroker second(context, endpoint);
  const std::optional<protocol::WireMessage> asked = second.next(protocol::MessageType::kReplay, 5s);
  ASSERT_TRUE(asked) << "the link never asked the new broker for the job";
  const auto replay = protocol::from_wire<protocol::Replay>(*asked);
  EXPECT_EQ(replay.id, "job");
  EXPECT_EQ(replay.from_seq, 3) << "replayed from the first seq not yet heard";
  second.event(2, "c");  // heard already: dropped
  second.event(3, "d");
  second.event(4, "", /*final=*/true);
  const auto until = Clock::now() + 5s;
  while (!listener->ended_ && listener->failure().empty() && Clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(listener->failure().empty()) << listener->failure();
  EXPECT_TRUE(listener->ended_);
  EXPECT_EQ(listener->texts(), (std::vector<std::string>{"a", "b", "c", "d", ""}));
}

TEST(BrokerLinkTest, AJobUnderWayWhenItsBrokerDiesFailsAsUnavailableWhenNoneComesBack) {
  zmq::context_t context;
  zmq::socket_t publisher(context, zmq::socket_type::pub);
  publisher.bind("tcp://127.0.0.1:*");
  auto broker = std::make_unique<PlayedBroker>(context, "tcp://127.0.0.1:*");
  GatewayBrokerLink link({.frontend = broker->endpoint(), .stream = publisher.get(zmq::sockopt::last_endpoint),
                   .curve = std::nullopt});
  auto listener = start_job(link, *broker);
  ASSERT_EQ(listener->events_.load(), 3) << listener->failure();

  broker.reset();
  const auto died = Clock::now();
  const auto until = died + std::chrono::milliseconds(GatewayBrokerLink::kAnswerTimeoutMs) + 5s;
  while (listener->failure().empty() && Clock::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(listener->failure().rfind("unavailable", 0), 0u) << "failed: '" << listener->failure() << "'";
  EXPECT_FALSE(listener->ended_);
  EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - died).count(),
            GatewayBrokerLink::kAnswerTimeoutMs - 200)
      << "failed before the broker had its time to come back";
}

}  // namespace
}  // namespace flashq::gateway
