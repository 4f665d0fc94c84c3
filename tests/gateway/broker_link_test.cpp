// The gateway's broker link against a broker played by the test on a real ROUTER socket: while
// one job's events pour in as fast as the broker can send them, a request posted to the link
// still reaches the broker and its answers still reach its listener (the link reads a bounded
// batch per socket per round, so a flood starves nothing).
#include "gateway/server/broker_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stop_token>
#include <thread>
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

  std::atomic<bool> accepted_{false}, ended_{false};
  std::atomic<std::int64_t> events_{0};

 private:
  mutable std::mutex mutex_;
  std::string failure_;
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
  BrokerLink link({.frontend = router.get(zmq::sockopt::last_endpoint),
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

}  // namespace
}  // namespace flashq::gateway
