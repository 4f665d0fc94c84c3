// Test harness for flashq-worker: the test plays the broker (a ROUTER on a free loopback port)
// and runs the real executable (FLASHQ_BIN/flashq-worker) as a child process.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "shared/protocol/messages.h"
#include "shared/protocol/wire.h"
#include "tests/support/child_process.h"

namespace flashq::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The real flashq-worker (FLASHQ_BIN/flashq-worker), started with `args`; killed (SIGKILL) at
// scope exit if still running.
class WorkerProcess : public ChildProcess {
 public:
  WorkerProcess(const std::vector<std::string>& args, const std::filesystem::path& log_path)
      : ChildProcess("flashq-worker", args, log_path) {}
};

// The broker's backend socket, played by the test. While waiting for messages it sends the
// worker it knows a heartbeat every 50 ms (unless told to fall silent), as a broker does.
class FakeBroker {
 public:
  struct Message {
    std::string identity;
    protocol::WireMessage wire;
    Clock::time_point at;
  };

  FakeBroker() : socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }

  const std::string& endpoint() const { return endpoint_; }
  const std::string& worker() const { return worker_; }
  void set_keep_alive(bool on) { keep_alive_ = on; }

  // A broker restart: the ROUTER closes (the worker's connection drops) and a new one binds the
  // same port, knowing no worker.
  void restart() {
    socket_.close();
    worker_.clear();
    for (int tries = 0;; ++tries) {
      socket_ = zmq::socket_t(context_, zmq::socket_type::router);
      socket_.set(zmq::sockopt::linger, 0);
      try {
        socket_.bind(endpoint_);
        return;
      } catch (const zmq::error_t&) {
        if (tries == 50) throw;
        socket_.close();
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
  }

  // The next message from any worker, or nothing after `timeout`.
  std::optional<Message> next(milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    while (true) {
      const auto now = Clock::now();
      if (keep_alive_ && !worker_.empty() && now - last_heartbeat_ >= milliseconds(50)) {
        last_heartbeat_ = now;
        send(protocol::BrokerHeartbeat{});
      }
      if (now >= until) return std::nullopt;
      const auto slice =
          std::min<milliseconds>(milliseconds(50), std::chrono::duration_cast<milliseconds>(until - now));
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, slice);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(socket_, std::back_inserter(parts))) continue;
      std::vector<std::string_view> frames;
      for (size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string_view());
      Message m{parts.at(0).to_string(), protocol::from_frames(frames), Clock::now()};
      if (m.wire.type == protocol::MessageType::kHeartbeat) heartbeats_.push_back(m);
      if (m.wire.type == protocol::MessageType::kReady) worker_ = m.identity;  // from now on, talk to it
      return m;
    }
  }

  // The next message that is not a HEARTBEAT.
  std::optional<Message> next_non_heartbeat(milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
      if (left <= milliseconds(0)) return std::nullopt;
      std::optional<Message> m = next(left);
      if (!m || m->wire.type != protocol::MessageType::kHeartbeat) return m;
    }
  }

  // Waits for READY (next() then talks to the worker that sent it).
  std::optional<protocol::Ready> expect_ready(milliseconds timeout = milliseconds(10000)) {
    const auto until = Clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
      if (left <= milliseconds(0)) return std::nullopt;
      std::optional<Message> m = next(left);
      if (!m) return std::nullopt;
      if (m->wire.type == protocol::MessageType::kReady) return protocol::from_wire<protocol::Ready>(m->wire);
    }
  }

  template <typename M>
  void send(const M& message) {
    std::vector<std::string> frames = protocol::to_frames(protocol::to_wire(message));
    std::vector<zmq::const_buffer> buffers = {zmq::buffer(worker_)};
    for (const std::string& f : frames) buffers.push_back(zmq::buffer(f));
    (void)zmq::send_multipart(socket_, buffers, zmq::send_flags::dontwait);
  }

  std::vector<Message>& heartbeats() { return heartbeats_; }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::string worker_;
  bool keep_alive_ = true;
  Clock::time_point last_heartbeat_;
  std::vector<Message> heartbeats_;
};

// What one job attempt streamed.
struct AttemptOutput {
  std::vector<protocol::Tokens> tokens;
  std::optional<protocol::Final> final_message;
  std::vector<std::string> problems;  // anything out of protocol, for the failure message

  std::vector<int32_t> ids() const {
    std::vector<int32_t> out;
    for (const protocol::Tokens& t : tokens) out.insert(out.end(), t.token_ids.begin(), t.token_ids.end());
    return out;
  }
  std::string text() const {
    std::string out;
    for (const protocol::Tokens& t : tokens) out += t.text;
    return out;
  }
};

// Reads messages until the FINAL of job `id`, checking TOKENS seq as they come. `on_tokens` is
// called after each TOKENS (to cancel or signal mid-stream).
template <typename OnTokens>
AttemptOutput collect_attempt(FakeBroker& broker, const std::string& id, int64_t attempt, milliseconds timeout,
                              OnTokens on_tokens) {
  AttemptOutput out;
  const auto until = Clock::now() + timeout;
  while (!out.final_message) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    std::optional<FakeBroker::Message> m = left > milliseconds(0) ? broker.next_non_heartbeat(left) : std::nullopt;
    if (!m) {
      out.problems.push_back("no FINAL within the timeout");
      return out;
    }
    if (m->wire.type == protocol::MessageType::kTokens) {
      protocol::Tokens t = protocol::from_wire<protocol::Tokens>(m->wire);
      if (t.id != id) continue;
      if (t.attempt != attempt) out.problems.push_back("TOKENS attempt " + std::to_string(t.attempt));
      if (t.seq != static_cast<int64_t>(out.tokens.size())) {
        out.problems.push_back("TOKENS seq " + std::to_string(t.seq) + ", expected " +
                               std::to_string(out.tokens.size()));
      }
      out.tokens.push_back(std::move(t));
      on_tokens(out);
    } else if (m->wire.type == protocol::MessageType::kFinal) {
      protocol::Final f = protocol::from_wire<protocol::Final>(m->wire);
      if (f.id != id) continue;
      if (f.attempt != attempt) out.problems.push_back("FINAL attempt " + std::to_string(f.attempt));
      out.final_message = std::move(f);
    } else {
      out.problems.push_back("unexpected " + std::string(protocol::message_type_name(m->wire.type)));
    }
  }
  return out;
}

inline AttemptOutput collect_attempt(FakeBroker& broker, const std::string& id, int64_t attempt = 1,
                                     milliseconds timeout = milliseconds(10000)) {
  return collect_attempt(broker, id, attempt, timeout, [](const AttemptOutput&) {});
}

inline std::string describe(const AttemptOutput& out) {
  std::string s = std::to_string(out.tokens.size()) + " TOKENS";
  for (const std::string& p : out.problems) s += "; " + p;
  if (out.final_message) {
    const protocol::FinalResult& r = out.final_message->result;
    s += "; FINAL " + std::string(protocol::finish_reason_name(r.finish_reason));
    if (r.error) s += " (" + *r.error + ")";
  }
  return s;
}

}  // namespace flashq::testing
