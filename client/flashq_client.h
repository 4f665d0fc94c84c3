// The producer's side of the wire (docs/protocol.md, "Producer messages"): one DEALER socket to the
// broker's frontend, over which a producer submits jobs, asks their status, cancels them,
// receives their EVENTs and asks which models are served (MODELS). A Client is meant for one thread; use one per thread.
//
// Every blocking call takes a timeout in milliseconds. A timeout is an Error with code kIo that
// says which endpoint did not answer; the socket stays usable, and a reply that arrives after its
// request timed out is recognised by its id and dropped.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "client/stream_subscriber.h"
#include "shared/curve/curve_socket.h"
#include "shared/error.h"
#include "shared/protocol/final_result.h"
#include "shared/protocol/job.h"
#include "shared/protocol/model_messages.h"
#include "shared/protocol/producer_messages.h"
#include "shared/protocol/wire.h"

namespace flashq {

inline constexpr std::string_view kDefaultFrontendEndpoint = "tcp://127.0.0.1:5555";
inline constexpr std::string_view kDefaultStreamEndpoint = "tcp://127.0.0.1:5557";
inline constexpr int kDefaultRequestTimeoutMs = 5000;

// The broker answered SUBMIT with REJECTED. The code is kInvalidArgument (the job was not
// taken); reason and retry hint are kept for a producer that wants to retry. The broker's
// message, when it sent one (unknown_model: the models served), is part of what() only.
class JobRejected : public Error {
 public:
  JobRejected(std::string id, std::string reason, std::int64_t retry_after_ms, const std::string& message = "");

  const std::string& id() const { return id_; }
  const std::string& reason() const { return reason_; }    // overloaded, shutting_down, ...
  std::int64_t retry_after_ms() const { return retry_after_ms_; }  // 0: do not retry

 private:
  std::string id_;
  std::string reason_;
  std::int64_t retry_after_ms_;
};

// The broker answered with ERROR. code() is the wire code when it names one of ours (not_found
// stays kNotFound); a broker-side `internal` or an unknown code becomes kIo, since it is not a bug
// of this process. wire_code() is the code as sent.
class BrokerError : public Error {
 public:
  explicit BrokerError(const protocol::ErrorReply& reply);

  const std::string& wire_code() const { return wire_code_; }
  const std::optional<std::string>& id() const { return id_; }

 private:
  std::string wire_code_;
  std::optional<std::string> id_;
};

// kInvalidArgument unless `id` is a valid job id (1..128 printable ASCII bytes, no space).
void check_job_id(const std::string& id);

class Client {
 public:
  Client();
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Connects the DEALER to the broker's frontend; `stream_endpoint` is kept for subscribe(). May
  // be called once. ZeroMQ connects in the background, so a broker that is not there yet shows
  // up as a timeout of the first request. With `curve` both sockets speak CurveZMQ
  // (docs/security.md); a broker that refuses our key also shows up only as timeouts.
  void connect(const std::string& frontend_endpoint,
               const std::string& stream_endpoint = std::string(kDefaultStreamEndpoint),
               std::optional<CurveClientKeys> curve = std::nullopt);

  // Sends SUBMIT and returns the id the broker accepted (the job's own id when it had one).
  // Throws kInvalidArgument for a job that breaks the protocol's rules (checked here, before
  // sending), JobRejected, BrokerError, or kIo on timeout. With job.stream the job's EVENTs
  // follow on this socket; without it only the final one does. Take them with wait().
  std::string submit(const protocol::Job& job, int timeout_ms = kDefaultRequestTimeoutMs);

  // Consumes job `id`'s EVENTs from this socket, calling `on_event` for each (in seq order,
  // duplicates dropped), until the final one; returns its result. Events of other jobs that
  // arrive meanwhile are kept for their own wait(). timeout_ms bounds the whole wait (0: wait
  // forever). Throws BrokerError when the broker reports an error about this job.
  protocol::FinalResult wait(const std::string& id, const std::function<void(const protocol::Event&)>& on_event,
                             int timeout_ms = 0);

  // Asks the broker for job `id`'s events from seq `from_seq` on (its bounded replay buffer),
  // calling `on_event` for each in order, then returns the job's status, asked right after as a
  // barrier. Throws BrokerError `replay_unavailable` when the broker no longer keeps them, or
  // `not_found`.
  protocol::StatusReply replay(const std::string& id, std::int64_t from_seq,
                               const std::function<void(const protocol::Event&)>& on_event,
                               int timeout_ms = kDefaultRequestTimeoutMs);

  // Sends STATUS and returns STATUS_REPLY (state unknown for a job the broker does not know).
  protocol::StatusReply status(const std::string& id, int timeout_ms = kDefaultRequestTimeoutMs);

  // Sends CANCEL, which has no reply of its own, then STATUS as a barrier: the broker handles one
  // producer's messages in order, so an ERROR for the cancel (not_found for an unknown id) comes
  // before the status reply. Returns the job's status once the broker has taken the cancel
  // (a running job still ends later, with a final event saying cancelled). Throws BrokerError.
  protocol::StatusReply cancel(const std::string& id, int timeout_ms = kDefaultRequestTimeoutMs);

  // Sends MODELS and returns MODELS_REPLY: the models the broker's connected workers serve, with
  // each one's context length, output formats, workers and slots. MODELS_REPLY names no request:
  // one that arrives late for an earlier timed-out call is taken as this call's answer, which
  // is as recent a view. Throws BrokerError (an ERROR without a job id) or kIo on timeout.
  protocol::ModelsReply models(int timeout_ms = kDefaultRequestTimeoutMs);

  // A subscriber to job `id`'s events on the broker's stream socket, sharing this client's
  // ZeroMQ context (it may outlive the client).
  StreamSubscriber subscribe(const std::string& id) const;

 private:
  void send(const protocol::WireMessage& message);
  // The next message on the DEALER that is not an EVENT (EVENTs are kept in pending_events_), or
  // nothing once `deadline` passes.
  std::optional<protocol::WireMessage> receive_reply(std::int64_t deadline_ms);
  // One message from the DEALER, or nothing once `deadline` passes (no deadline: -1).
  std::optional<protocol::WireMessage> receive(std::int64_t deadline_ms);
  void keep_event(const protocol::WireMessage& message);
  [[noreturn]] void fail_timeout(const char* request, const std::string& id, int timeout_ms) const;

  std::shared_ptr<zmq::context_t> context_;
  zmq::socket_t dealer_;
  std::string frontend_endpoint_;
  std::string stream_endpoint_;
  std::optional<CurveClientKeys> curve_;
  // EVENTs that arrived while waiting for something else, per job, in arrival order.
  std::map<std::string, std::deque<protocol::Event>> pending_events_;
};

}  // namespace flashq
