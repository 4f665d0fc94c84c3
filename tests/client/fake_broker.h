// A stand-in for the broker's producer side, for the client tests: a ROUTER (frontend) and an
// XPUB (stream) bound to free loopback ports, served by a thread that answers each request with
// whatever the test's script returns and publishes a job's scripted events as soon as someone
// subscribes to its topic. Everything it receives is recorded for the test to check.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "shared/protocol/producer_messages.h"
#include "shared/protocol/wire.h"

namespace flashq::testing {

class FakeBroker {
 public:
  // The replies to one request, sent in order to the peer that sent it (nothing: no answer).
  using Script = std::function<std::vector<protocol::WireMessage>(const protocol::WireMessage& request)>;

  explicit FakeBroker(Script script);
  ~FakeBroker();
  FakeBroker(const FakeBroker&) = delete;
  FakeBroker& operator=(const FakeBroker&) = delete;

  // Events to publish on the stream socket when a subscription to job `id` arrives.
  void publish_on_subscribe(const std::string& id, std::vector<protocol::Event> events);

  const std::string& frontend_endpoint() const { return frontend_endpoint_; }
  const std::string& stream_endpoint() const { return stream_endpoint_; }
  // "--broker ... --stream-endpoint ..." for the flashq command line.
  std::string cli_endpoints() const;

  std::vector<protocol::WireMessage> requests() const;

 private:
  void serve();
  void answer(zmq::socket_t& router);
  void publish(zmq::socket_t& xpub);

  zmq::context_t context_;
  zmq::socket_t router_;
  zmq::socket_t xpub_;
  std::string frontend_endpoint_;
  std::string stream_endpoint_;
  Script script_;
  mutable std::mutex mutex_;
  std::vector<protocol::WireMessage> requests_;
  std::map<std::string, std::vector<protocol::Event>> published_on_subscribe_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A script that answers like the broker: SUBMIT -> ACCEPTED (the job's id, else "job-1") then the
// job's `events` on the same socket (all of them with job.stream, else only the final one), with
// their ids set to the accepted one; STATUS -> `status` under the asked id; CANCEL -> nothing, or
// ERROR not_found when `status` says the job is unknown.
FakeBroker::Script broker_like(std::vector<protocol::Event> events, protocol::StatusReply status = {});

// Scripted replies.
protocol::WireMessage accepted(const std::string& id);
protocol::Event text_event(const std::string& id, std::int64_t seq, const std::string& text,
                           protocol::TokenIds token_ids);
protocol::Event final_event(const std::string& id, std::int64_t seq, const std::string& text,
                            protocol::TokenIds token_ids, protocol::FinalResult result);
protocol::FinalResult stop_result();  // finish_reason stop, with usage, spec stats and timings set

}  // namespace flashq::testing
