// A broker with CURVE on, in this process on loopback, and the keys around it: the broker's pair,
// two allowed client pairs (a producer's, a worker's) and a stranger's pair that is not on the
// allow-list. Raw sockets with or without keys play workers and subscribers at the wire level.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "broker/broker.h"
#include "shared/curve/curve_keys.h"
#include "shared/curve/curve_socket.h"
#include "shared/json_file.h"
#include "shared/protocol/messages.h"
#include "shared/protocol/stream.h"
#include "shared/protocol/wire.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {

using namespace std::chrono_literals;

class CurveBrokerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!zmq_has("curve")) GTEST_SKIP() << "libzmq without CURVE";
    broker_keys_ = generate_curve_key_pair();
    producer_keys_ = generate_curve_key_pair();
    worker_keys_ = generate_curve_key_pair();
    stranger_keys_ = generate_curve_key_pair();
    write_text_file(allow_list_path(), "# producers\n" + producer_keys_.public_key + "  # the test producer\n\n" +
                                           "# workers\n" + worker_keys_.public_key + "\n");
  }
  ~CurveBrokerFixture() override { stop_broker(); }

  std::filesystem::path allow_list_path() const { return dir_ / "allowed_keys"; }

  void start_broker() {
    BrokerOptions options;
    options.frontend = options.backend = options.stream = "tcp://127.0.0.1:*";
    options.http = "127.0.0.1:0";
    options.heartbeat_ms = 200;
    options.drain_timeout_ms = 0;
    options.curve_secret_key = broker_keys_.secret_key;
    options.curve_allowed_keys = allow_list_path().string();
    broker_ = std::make_unique<Broker>(context_, options);
    stop_ = false;
    thread_ = std::thread([this] { broker_->run(stop_); });
  }
  void stop_broker() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    broker_.reset();
  }

  // Client keys that the broker lets in (`own` on the allow-list, the right server key).
  CurveClientKeys keys_for(const CurveKeyPair& own) const { return {broker_keys_.public_key, own}; }

  // A socket of this process's context, CURVE client when `keys` are given.
  zmq::socket_t connect(zmq::socket_type type, const std::string& endpoint,
                        const std::optional<CurveClientKeys>& keys) {
    zmq::socket_t socket(context_, type);
    socket.set(zmq::sockopt::linger, 0);
    if (keys) make_curve_client(socket, *keys);
    socket.connect(endpoint);
    return socket;
  }
  zmq::socket_t worker(const std::string& name, const std::optional<CurveClientKeys>& keys) {
    zmq::socket_t socket = connect(zmq::socket_type::dealer, broker_->backend_endpoint(), keys);
    send(socket, protocol::Ready{.worker_id = name, .model = "tiny", .slots = 1, .backend = "cpu"});
    return socket;
  }
  zmq::socket_t subscriber(const std::string& job_id, const std::optional<CurveClientKeys>& keys) {
    zmq::socket_t socket = connect(zmq::socket_type::sub, broker_->stream_endpoint(), keys);
    socket.set(zmq::sockopt::subscribe, protocol::stream_topic(job_id));
    return socket;
  }

  template <typename Message>
  static void send(zmq::socket_t& socket, const Message& message) {
    std::vector<std::string> frames = protocol::to_frames(protocol::to_wire(message));
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    (void)zmq::send_multipart(socket, buffers, zmq::send_flags::dontwait);
  }
  // Every frame set that arrives within `timeout`, heartbeats included.
  static std::vector<std::vector<std::string>> drain(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
    std::vector<std::vector<std::string>> got;
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, 20ms);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      (void)zmq::recv_multipart(socket, std::back_inserter(parts));
      std::vector<std::string> frames;
      for (auto& p : parts) frames.push_back(p.to_string());
      got.push_back(std::move(frames));
    }
    return got;
  }
  // The next message that is not a heartbeat, within `timeout`.
  static std::optional<protocol::WireMessage> receive(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, 20ms);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      (void)zmq::recv_multipart(socket, std::back_inserter(parts));
      std::vector<std::string_view> frames;
      for (auto& p : parts) frames.push_back(p.to_string_view());
      protocol::WireMessage message = protocol::from_frames(frames);
      if (message.type != protocol::MessageType::kHeartbeat) return message;
    }
    return std::nullopt;
  }
  // Plays a worker for one job: waits for its ASSIGN (beating meanwhile), streams "ok", ends it.
  static std::optional<protocol::Assign> serve_one_job(zmq::socket_t& worker_socket) {
    for (int i = 0; i < 100; ++i) {
      send(worker_socket, protocol::WorkerHeartbeat{.load = 0});
      std::optional<protocol::WireMessage> message = receive(worker_socket, 50ms);
      if (!message || message->type != protocol::MessageType::kAssign) continue;
      protocol::Assign assign = protocol::from_wire<protocol::Assign>(*message);
      send(worker_socket,
           protocol::Tokens{
               .id = assign.job.id, .attempt = assign.attempt, .seq = 0, .token_ids = {7, 8}, .text = "ok"});
      send(worker_socket, protocol::Final{.id = assign.job.id,
                                          .attempt = assign.attempt,
                                          .result = {.finish_reason = protocol::FinishReason::kLength}});
      return assign;
    }
    return std::nullopt;
  }
  static protocol::Job job(const std::string& id) {
    protocol::Job j;
    j.id = id;
    j.prompt = std::string("hello");
    j.max_tokens = 2;
    j.stream = true;
    return j;
  }
  // Whether `metrics` (the Prometheus text) has the line "<name> <value>".
  static bool has_metric(const std::string& metrics, const std::string& name, const std::string& value) {
    return metrics.find("\n" + name + " " + value + "\n") != std::string::npos;
  }

  TempDir dir_;
  CurveKeyPair broker_keys_, producer_keys_, worker_keys_, stranger_keys_;
  zmq::context_t context_;
  std::unique_ptr<Broker> broker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashq::testing
