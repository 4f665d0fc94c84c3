// The one ZeroMQ transport (shared/transport): a message framed, sent and parsed between a DEALER
// and a ROUTER; a message that does not parse named to its sender's handler; a send nothing can
// take refused; and a connection's close seen at once by its monitor.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "shared/error.h"
#include "shared/protocol/messages.h"
#include "shared/transport/connection_monitor.h"
#include "shared/transport/frames.h"
#include "shared/transport/router_socket.h"

namespace flashq {
namespace {

using std::chrono::milliseconds;

struct Pair {
  zmq::context_t context;
  zmq::socket_t router{context, zmq::socket_type::router};
  zmq::socket_t dealer{context, zmq::socket_type::dealer};
  std::string endpoint;

  Pair() {
    configure_router(router, 1000);
    router.bind("tcp://127.0.0.1:*");
    endpoint = router.get(zmq::sockopt::last_endpoint);
    configure_socket(dealer, 1000);
    dealer.set(zmq::sockopt::routing_id, "dealer-1");
  }
};

// The messages waiting on the router within `timeout`: each handed over with its sender, or the
// error it failed to parse with.
struct Received {
  std::vector<std::pair<std::string, protocol::WireMessage>> messages;
  std::vector<std::pair<std::string, std::string>> errors;
};

Received receive_for(zmq::socket_t& router, milliseconds timeout, size_t wanted) {
  Received got;
  const std::int64_t deadline = steady_now_ms() + timeout.count();
  while (got.messages.size() + got.errors.size() < wanted && steady_now_ms() < deadline) {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(50));
    receive_from_peers(
        router, 10, [&](const std::string& who, protocol::WireMessage m) { got.messages.emplace_back(who, m); },
        [&](const std::string& who, const Error& e) { got.errors.emplace_back(who, e.what()); });
  }
  return got;
}

TEST(Transport, AMessageGoesFromDealerToRouterWithItsSenderAndBack) {
  Pair pair;
  pair.dealer.connect(pair.endpoint);
  const protocol::Status asked{"job-1"};
  // The connection may take a moment: a DEALER queues until then.
  ASSERT_TRUE(try_send_message(pair.dealer, protocol::to_wire(asked)));
  const Received got = receive_for(pair.router, milliseconds(5000), 1);
  ASSERT_EQ(got.messages.size(), 1u);
  EXPECT_EQ(got.messages[0].first, "dealer-1");
  EXPECT_EQ(protocol::from_wire<protocol::Status>(got.messages[0].second), asked);

  const protocol::ErrorReply answer{"not_found", "no job job-1", "job-1"};
  ASSERT_TRUE(send_to_peer(pair.router, "dealer-1", answer));
  const std::optional<std::vector<std::string>> frames = receive_frames(pair.dealer, deadline_after_ms(5000));
  ASSERT_TRUE(frames.has_value());
  EXPECT_EQ(protocol::from_wire<protocol::ErrorReply>(protocol::from_frames(frame_views(*frames))), answer);
  EXPECT_FALSE(send_to_peer(pair.router, "nobody", answer)) << "a send to a peer that is not there succeeded";
}

TEST(Transport, AMessageThatDoesNotParseGoesToTheErrorHandlerWithItsSender) {
  Pair pair;
  pair.dealer.connect(pair.endpoint);
  const std::vector<std::string> garbage = {"not a flashq frame"};
  send_frames(pair.dealer, garbage, pair.endpoint);
  const Received got = receive_for(pair.router, milliseconds(5000), 1);
  ASSERT_EQ(got.errors.size(), 1u);
  EXPECT_EQ(got.errors[0].first, "dealer-1");
  EXPECT_TRUE(got.messages.empty());
}

TEST(Transport, ASendNoConnectionTakesIsAnIoErrorNamingTheEndpoint) {
  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  configure_socket(dealer);
  dealer.set(zmq::sockopt::immediate, 1);  // queue nothing for a connection that is not there
  dealer.connect("tcp://127.0.0.1:1");
  try {
    send_message(dealer, protocol::to_wire(protocol::Status{"j"}), "tcp://127.0.0.1:1");
    FAIL() << "sent with no connection";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("tcp://127.0.0.1:1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(try_send_message(dealer, protocol::to_wire(protocol::Status{"j"})));
}

TEST(Transport, TheMonitorSeesTheConnectionCloseWhenThePeerGoes) {
  Pair pair;
  ConnectionMonitor monitor(pair.context, pair.dealer, ZMQ_EVENT_DISCONNECTED);
  pair.dealer.connect(pair.endpoint);
  ASSERT_TRUE(try_send_message(pair.dealer, protocol::to_wire(protocol::Status{"j"})));
  ASSERT_EQ(receive_for(pair.router, milliseconds(5000), 1).messages.size(), 1u) << "never connected";
  pair.router.close();
  bool disconnected = false;
  const std::int64_t deadline = steady_now_ms() + 5000;
  while (!disconnected && steady_now_ms() < deadline) {
    zmq::pollitem_t item{monitor.events_socket().handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, milliseconds(50));
    for (const std::uint16_t event : monitor.take_events())
      disconnected = disconnected || event == ZMQ_EVENT_DISCONNECTED;
  }
  EXPECT_TRUE(disconnected) << "no DISCONNECTED event within 5 s of the peer closing";
}

}  // namespace
}  // namespace flashq
