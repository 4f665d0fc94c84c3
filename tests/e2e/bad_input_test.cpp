// End to end: bad input on every socket of a running broker. Raw frames on the frontend and the
// backend are answered (ERROR, or DISCONNECT to a worker the broker does not know); the stream
// socket and plain TCP garbage are survived; afterwards the broker still runs a normal job.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "shared/protocol/limits.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/e2e/raw_dealer.h"

namespace flashq::testing {
namespace {

using nlohmann::json;

std::string msgpack_of(const json& value) {
  const std::vector<std::uint8_t> bytes = json::to_msgpack(value);
  return std::string(bytes.begin(), bytes.end());
}

std::string byte(int value) { return std::string(1, static_cast<char>(value)); }

const std::string kTag = "FQ1";
const std::string kSubmit = byte(0x10);

json job_map(json extra = json::object()) {
  json job = {{"id", "bad-input-job"}, {"prompt", "hello"}, {"max_tokens", 4}};
  job.update(extra);
  return job;
}

std::vector<std::string> submit_frames(const json& job) { return {kTag, kSubmit, msgpack_of({{"job", job}})}; }

struct BadMessage {
  std::string what;
  std::vector<std::string> frames;
  std::string expected_code = "protocol";  // ERROR code; "rejected:<reason>" for a REJECTED
};

std::vector<BadMessage> bad_producer_messages() {
  const std::string valid = msgpack_of({{"job", job_map()}});
  json deep = "x";
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  return {
      {"one garbage frame", {"garbage"}},
      {"one empty frame", {""}},
      {"two frames", {kTag, kSubmit}},
      {"four frames", {kTag, kSubmit, valid, "extra"}},
      {"wrong tag", {"FQ2", kSubmit, valid}},
      {"unknown type", {kTag, byte(0x7f), msgpack_of(json::object())}},
      {"type 0x00", {kTag, byte(0x00), msgpack_of(json::object())}},
      {"two-byte type", {kTag, kSubmit + kSubmit, valid}},
      {"a worker's message",
       {kTag, byte(0x30),
        msgpack_of({{"worker_id", "w"}, {"model", "m"}, {"slots", 1}, {"block_size", 0}, {"backend", "cpu"}})}},
      {"empty body", {kTag, kSubmit, ""}},
      {"not msgpack", {kTag, kSubmit, byte(0xc1)}},
      {"truncated msgpack", {kTag, kSubmit, valid.substr(0, valid.size() - 3)}},
      {"bytes after the body", {kTag, kSubmit, valid + byte(0)}},
      {"body is an array", {kTag, kSubmit, msgpack_of(json::array({1, 2}))}},
      {"missing job", {kTag, kSubmit, msgpack_of(json::object())}},
      {"job is a string", {kTag, kSubmit, msgpack_of({{"job", "text"}})}},
      {"job without a prompt", submit_frames({{"max_tokens", 4}})},
      {"two prompts", submit_frames(job_map({{"prompt_tokens", {1, 2}}}))},
      {"max_tokens -1", submit_frames(job_map({{"max_tokens", -1}}))},
      {"max_tokens a string", submit_frames(job_map({{"max_tokens", "ten"}}))},
      {"max_tokens 2^40", submit_frames(job_map({{"max_tokens", int64_t{1} << 40}}))},
      {"priority 2^62", submit_frames(job_map({{"priority", int64_t{1} << 62}}))},
      {"temperature NaN", submit_frames(job_map({{"temperature", std::nan("")}}))},
      {"temperature -1", submit_frames(job_map({{"temperature", -1.0}}))},
      {"top_p 1.5", submit_frames(job_map({{"top_p", 1.5}}))},
      {"negative token id", submit_frames(job_map({{"prompt", nullptr}, {"prompt_tokens", {5, -5}}}))},
      {"id with a space", submit_frames(job_map({{"id", "has space"}}))},
      {"deadline_ms 2^40", submit_frames(job_map({{"deadline_ms", int64_t{1} << 40}}))},
      {"unknown spec", submit_frames(job_map({{"spec", "fast"}}))},
      {"metadata nested 100 deep", submit_frames(job_map({{"metadata", deep}}))},
      {"prompt over 1 MiB", submit_frames(job_map({{"prompt", std::string((1 << 20) + 1, 'a')}}))},
      // A declared length with nothing behind it: nothing may be allocated for it.
      {"array declaring 2^32-1 elements",
       {kTag, kSubmit,
        byte(0x81) + byte(0xa3) + "job" + byte(0x81) + byte(0xad) + "prompt_tokens" + byte(0xdd) +
            std::string(4, static_cast<char>(0xff))}},
      {"duplicate key",
       {kTag, byte(0x04), byte(0x82) + byte(0xa2) + "id" + byte(0xa1) + "a" + byte(0xa2) + "id" + byte(0xa1) + "b"}},
      {"binary key", {kTag, byte(0x04), byte(0x81) + byte(0xc4) + byte(2) + "id" + byte(0xa1) + "a"}},
      {"STATUS id not a string", {kTag, byte(0x11), msgpack_of({{"id", 5}})}},
      {"CANCEL of an unknown job", {kTag, byte(0x04), msgpack_of({{"id", "no-such-job"}})}, "not_found"},
      // Well formed, but a deadline the broker will not hold (over its one-day maximum).
      {"deadline of 24 days", submit_frames(job_map({{"id", "long-deadline"}, {"deadline_ms", int64_t{1} << 31}})),
       "rejected:bad_deadline"},
  };
}

// The ZMTP 3.0 greeting and READY of a DEALER with the NULL mechanism, then one frame whose
// header declares 2^62 bytes: the broker's ZeroMQ must refuse it without allocating it.
std::string zmtp_huge_frame() {
  std::string out = byte(0xff) + std::string(8, '\0') + byte(0x7f) + byte(3) + byte(0) + "NULL" +
                    std::string(16, '\0') + byte(0) + std::string(31, '\0');
  const std::string ready = byte(5) + "READY" + byte(11) + "Socket-Type" + std::string(3, '\0') + byte(6) + "DEALER";
  out += byte(0x04) + byte(static_cast<int>(ready.size())) + ready;
  out += byte(0x02) + byte(0x40) + std::string(7, '\0');  // LONG frame of 0x4000000000000000 bytes
  return out;
}

void send_raw(int port, const std::string& bytes) {
  const int fd = connect_tcp(port);
  if (fd < 0) return;
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  (void)read_until_closed(fd, milliseconds(150));
  ::close(fd);
}

TEST_F(E2eTest, BadInputOnEverySocket) {
  ASSERT_TRUE(start_broker());
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  zmq::context_t context;

  // Frontend: every bad message is answered with ERROR (one REJECTED), in order.
  RawDealer producer(context, cluster_->frontend());
  for (const BadMessage& bad : bad_producer_messages()) {
    SCOPED_TRACE("frontend: " + bad.what);
    producer.send(bad.frames);
    std::optional<protocol::WireMessage> reply = producer.next();
    ASSERT_TRUE(reply) << "no answer; broker running: " << cluster_->broker().running();
    if (bad.expected_code.rfind("rejected:", 0) == 0) {
      ASSERT_EQ(reply->type, protocol::MessageType::kRejected) << protocol::message_type_name(reply->type);
      EXPECT_EQ(protocol::from_wire<protocol::Rejected>(*reply).reason, bad.expected_code.substr(9));
      continue;
    }
    ASSERT_EQ(reply->type, protocol::MessageType::kError) << protocol::message_type_name(reply->type);
    const protocol::ErrorReply error = protocol::from_wire<protocol::ErrorReply>(*reply);
    EXPECT_EQ(error.code, bad.expected_code) << error.message;
    EXPECT_FALSE(error.message.empty());
  }
  // Nothing bad was queued.
  EXPECT_EQ(cluster_->metric("flashq_jobs_admitted_total"), std::optional<double>(0));

  // Backend, from a peer that never registered: ERROR for what is malformed, DISCONNECT for
  // well-formed traffic from a stranger.
  const std::string tokens =
      msgpack_of({{"id", "bad-input-job"}, {"attempt", 1}, {"seq", 0}, {"token_ids", {1}}, {"text", "a"}});
  const std::vector<BadMessage> bad_worker_messages = {
      {"one garbage frame", {"garbage"}},
      {"wrong tag", {"XQ1", byte(0x01), msgpack_of({{"load", 0}})}},
      {"unknown type", {kTag, byte(0x99), msgpack_of(json::object())}},
      {"HEARTBEAT from a stranger", {kTag, byte(0x01), msgpack_of({{"load", 0}})}},
      {"TOKENS from a stranger", {kTag, byte(0x31), tokens}},
      {"SUBMIT on the backend", submit_frames(job_map())},
      {"READY with 0 slots",
       {kTag, byte(0x30),
        msgpack_of({{"worker_id", "w"}, {"model", "m"}, {"slots", 0}, {"block_size", 0}, {"backend", "cpu"}})}},
      {"READY without a model",
       {kTag, byte(0x30), msgpack_of({{"worker_id", "w"}, {"slots", 1}, {"block_size", 0}, {"backend", "cpu"}})}},
      {"READY with 2^40 slots",
       {kTag, byte(0x30),
        msgpack_of(
            {{"worker_id", "w"}, {"model", "m"}, {"slots", int64_t{1} << 40}, {"block_size", 0}, {"backend", "cpu"}})}},
  };
  RawDealer stranger(context, cluster_->backend());
  for (const BadMessage& bad : bad_worker_messages) {
    SCOPED_TRACE("backend: " + bad.what);
    stranger.send(bad.frames);
    std::optional<protocol::WireMessage> reply = stranger.next();
    ASSERT_TRUE(reply) << "no answer; broker running: " << cluster_->broker().running();
    EXPECT_TRUE(reply->type == protocol::MessageType::kError || reply->type == protocol::MessageType::kDisconnect)
        << protocol::message_type_name(reply->type);
  }
  // A registered (fake) worker that sends garbage is answered; then it leaves.
  {
    RawDealer fake(context, cluster_->backend());
    fake.keep_alive(true);
    fake.send(
        {kTag, byte(0x30),
         msgpack_of(
             {{"worker_id", "fake"}, {"model", "fake-model"}, {"slots", 1}, {"block_size", 0}, {"backend", "cpu"}})});
    ASSERT_TRUE(fake.wait_heartbeat()) << "the fake worker was not registered";
    fake.send({kTag, byte(0x31), msgpack_of({{"id", 7}})});
    std::optional<protocol::WireMessage> reply = fake.next();
    ASSERT_TRUE(reply) << "no answer to a malformed TOKENS from a registered worker";
    EXPECT_TRUE(reply->type == protocol::MessageType::kError || reply->type == protocol::MessageType::kDisconnect)
        << protocol::message_type_name(reply->type);
    fake.send({kTag, byte(0x02), msgpack_of(json::object())});
    ASSERT_TRUE(cluster_->wait_for_workers(1));
  }

  // Stream socket: a DEALER (the wrong socket type), an XSUB sending garbage upstream (a
  // message that is no subscription, a 20 MiB one, multipart junk).
  {
    RawDealer wrong_type(context, cluster_->stream());
    // One frame, without waiting: the broker refuses the handshake of the wrong socket type, and
    // once that connection is gone a DEALER has no peer, so a blocking send waits forever, and a
    // multipart one can fail after its first frame (cppzmq asserts). Both happened under the
    // sanitizers on a loaded machine. What it sends never reaches the broker anyway.
    wrong_type.send({"garbage" + std::string(1 << 20, 'y')}, zmq::send_flags::dontwait);
    zmq::socket_t upstream(context, zmq::socket_type::xsub);
    upstream.set(zmq::sockopt::linger, 0);
    upstream.connect(cluster_->stream());
    for (const std::string& junk : {std::string("garbage"), std::string(20 << 20, 'z'),
                                    byte(1) + std::string(5000, 'j'), byte(0) + "never-subscribed", std::string()}) {
      (void)upstream.send(zmq::buffer(junk), zmq::send_flags::dontwait);
    }
    std::vector<zmq::const_buffer> parts = {zmq::buffer(std::string_view("a")), zmq::buffer(std::string_view("b"))};
    (void)zmq::send_multipart(upstream, parts, zmq::send_flags::dontwait);
    std::this_thread::sleep_for(milliseconds(500));  // let it all arrive before the sockets close
  }

  // Plain TCP garbage on every port, and a ZMTP frame declaring 2^62 bytes on each ZeroMQ port.
  for (int port :
       {cluster_->frontend_port(), cluster_->backend_port(), cluster_->stream_port(), cluster_->http_port()}) {
    send_raw(port, "GARBAGE \x01\x02\x03\xff\xfe\r\n\r\n" + std::string(70000, '\xee'));
    send_raw(port, std::string(1, '\xff') + std::string(200, '\0'));
  }
  for (int port : {cluster_->frontend_port(), cluster_->backend_port(), cluster_->stream_port()}) {
    send_raw(port, zmtp_huge_frame());
  }

  // Still alive and serving.
  ASSERT_TRUE(cluster_->broker().running()) << "the broker died";
  EXPECT_EQ(http_get(cluster_->http_port(), "/healthz").status, 200);
  EXPECT_TRUE(cluster_->worker("w1").running());
  auto client = connect_client();
  StreamCollector collector(cluster_->stream());
  ASSERT_TRUE(wait_subscribed(collector, *client));
  expect_matches(run_job(*client, make_job("after-bad-input", "hello world", 24)), reference("hello world", 24),
                 &collector);
  EXPECT_TRUE(collector.has_no_problems());
  EXPECT_TRUE(cluster_->broker().running());
}

// A frame over the protocol's limit is not even buffered: ZeroMQ drops the sender's connection
// (no ERROR comes back, unlike a body that is merely malformed), and everyone else goes on.
TEST_F(E2eTest, FrameOverTheLimitDropsTheConnectionNotTheBroker) {
  ASSERT_TRUE(start_broker());
  start_worker("w1", 2);
  ASSERT_TRUE(cluster_->wait_for_workers(1));
  zmq::context_t context;
  const std::string oversize(static_cast<size_t>(protocol::kMaxFrameBytes) + 1, 'x');
  for (const std::string& endpoint : {cluster_->frontend(), cluster_->backend()}) {
    SCOPED_TRACE(endpoint);
    RawDealer peer(context, endpoint);
    peer.send({std::string(protocol::kProtocolTag), std::string(1, static_cast<char>(protocol::MessageType::kSubmit)),
               oversize});
    EXPECT_FALSE(peer.next(milliseconds(1500))) << "the broker read the whole oversize frame and answered it";
  }
  ASSERT_TRUE(cluster_->broker().running());
  auto client = connect_client();
  expect_matches(run_job(*client, make_job("after-oversize", "hello world", 8)), reference("hello world", 8));
}

}  // namespace
}  // namespace flashq::testing
