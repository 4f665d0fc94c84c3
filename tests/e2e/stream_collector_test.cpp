// The stream collector the end-to-end tests read the stream socket with, against a stand-in XPUB
// socket publishing chosen events: a repeated seq with the same content is a duplicate and dropped
// (docs/protocol.md §8.5), a repeated seq with other content is a problem that names the job, the
// seq and both versions.
#include <gtest/gtest.h>

#include "tests/e2e/stream_collector.h"

namespace flashq::testing {
namespace {

using namespace std::chrono_literals;

class StreamCollectorTest : public ::testing::Test {
 protected:
  StreamCollectorTest() : publisher_(context_, zmq::socket_type::xpub) {
    publisher_.set(zmq::sockopt::linger, 0);
    publisher_.bind("tcp://127.0.0.1:*");
  }

  std::string endpoint() const { return publisher_.get(zmq::sockopt::last_endpoint); }

  // An XPUB socket hears each subscription: once the collector's has arrived, it sees everything
  // published after.
  bool wait_subscribed() {
    zmq::pollitem_t item{publisher_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, 10000ms) != 1) return false;
    zmq::message_t subscription;
    return publisher_.recv(subscription, zmq::recv_flags::none) && subscription.to_string() == "\x01job/";
  }

  void publish(const protocol::Event& event) {
    const std::vector<std::string> frames = protocol::to_stream_frames(event);
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    zmq::send_multipart(publisher_, buffers);
  }

  static protocol::Event event(int64_t seq, protocol::TokenIds token_ids, std::string text, bool final = false) {
    protocol::Event e{.id = "j", .seq = seq, .token_ids = std::move(token_ids), .text = std::move(text)};
    if (final) e.final_result = protocol::FinalResult{.finish_reason = protocol::FinishReason::kLength};
    return e;
  }

  zmq::context_t context_;
  zmq::socket_t publisher_;
};

TEST_F(StreamCollectorTest, AnIdenticalRepeatOfASeqIsDroppedAsADuplicate) {
  StreamCollector collector(endpoint());
  ASSERT_TRUE(wait_subscribed());
  publish(event(0, {1, 2}, "ab"));
  publish(event(1, {3}, "c"));
  publish(event(0, {1, 2}, "ab"));  // a replay overlapping the live stream
  publish(event(1, {3}, "c"));
  publish(event(2, {}, "", /*final=*/true));
  ASSERT_TRUE(collector.wait_final("j", 10000ms));
  const std::vector<protocol::Event> kept = collector.events("j");
  EXPECT_EQ(kept, (std::vector<protocol::Event>{event(0, {1, 2}, "ab"), event(1, {3}, "c"), event(2, {}, "", true)}));
  EXPECT_TRUE(collector.has_no_problems());
}

TEST_F(StreamCollectorTest, ARepeatedSeqWithOtherContentIsAProblemNamingBothVersions) {
  StreamCollector collector(endpoint());
  ASSERT_TRUE(wait_subscribed());
  publish(event(0, {1, 2}, "ab"));
  publish(event(1, {3}, "c"));
  publish(event(1, {4}, "d"));  // a second version of seq 1
  publish(event(2, {}, "", /*final=*/true));
  ASSERT_TRUE(collector.wait_final("j", 10000ms));
  const std::vector<std::string> problems = collector.problems();
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  for (const char* part : {"job j", "seq 1", "token_ids [3], text \"c\"", "token_ids [4], text \"d\""}) {
    EXPECT_NE(problems[0].find(part), std::string::npos) << "'" << part << "' not in: " << problems[0];
  }
  EXPECT_FALSE(collector.has_no_problems());
  // The first version stays the one kept.
  EXPECT_EQ(collector.events("j").at(1), event(1, {3}, "c"));
}

TEST_F(StreamCollectorTest, TwoVersionsOfTheFinalEventAreAProblem) {
  StreamCollector collector(endpoint());
  ASSERT_TRUE(wait_subscribed());
  publish(event(0, {}, "", /*final=*/true));
  protocol::Event other = event(0, {}, "", /*final=*/true);
  other.final_result->finish_reason = protocol::FinishReason::kCancelled;
  publish(other);
  publish(event(0, {}, "", /*final=*/true));  // the first version again: no second problem
  // The stream of another job, published after, arrives after: once it has, so have the repeats.
  protocol::Event marker = event(0, {}, "", /*final=*/true);
  marker.id = "marker";
  publish(marker);
  ASSERT_TRUE(collector.wait_final("marker", 10000ms));
  const std::vector<std::string> problems = collector.problems();
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_NE(problems[0].find("final {length"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("final {cancelled"), std::string::npos) << problems[0];
}

}  // namespace
}  // namespace flashq::testing
