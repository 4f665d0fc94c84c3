#include "client/flashq_client.h"

#include <spdlog/spdlog.h>

#include "shared/protocol/message_type.h"
#include "shared/transport/frames.h"

namespace flashq {
namespace {

// The ErrorCode a wire code names, other than internal (a broker bug is not one of ours).
ErrorCode local_code(std::string_view wire_code) {
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kBadConfig, ErrorCode::kBadCheckpoint,
                         ErrorCode::kBadTokenizer, ErrorCode::kUnsupported, ErrorCode::kNotFound, ErrorCode::kIo,
                         ErrorCode::kProtocol}) {
    if (wire_code == error_code_name(code)) return code;
  }
  return ErrorCode::kIo;
}

std::string rejection_text(const std::string& id, const std::string& reason, std::int64_t retry_after_ms,
                           const std::string& message) {
  std::string text = "job " + id + " rejected: " + reason;
  if (!message.empty()) text += " (" + message + ")";
  if (retry_after_ms > 0) text += " (retry after " + std::to_string(retry_after_ms) + " ms)";
  return text;
}

std::string broker_error_text(const protocol::ErrorReply& reply) {
  std::string text = "broker: " + reply.code;
  if (reply.id) text += " (job " + *reply.id + ")";
  return text + ": " + reply.message;
}

// Whether an ERROR may be the answer to a request about `id`: one naming another job answers an
// earlier request that timed out.
bool error_concerns(const protocol::ErrorReply& reply, const std::string& id) {
  return !reply.id || id.empty() || *reply.id == id;
}

// The job as the broker will read it: the same strict checks, before anything is sent.
void check_job(const protocol::Job& job) {
  try {
    protocol::decode_body<protocol::Submit>(protocol::encode_body(protocol::Submit{job}));
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string("invalid job: ") + e.what());
  }
}

}  // namespace

void check_job_id(const std::string& id) {
  if (!protocol::is_valid_id(id)) {
    throw Error(ErrorCode::kInvalidArgument,
                "job id '" + id + "': must be 1..128 printable ASCII characters without spaces");
  }
}

JobRejected::JobRejected(std::string id, std::string reason, std::int64_t retry_after_ms, const std::string& message)
    : Error(ErrorCode::kInvalidArgument, rejection_text(id, reason, retry_after_ms, message)),
      id_(std::move(id)),
      reason_(std::move(reason)),
      retry_after_ms_(retry_after_ms) {}

BrokerError::BrokerError(const protocol::ErrorReply& reply)
    : Error(local_code(reply.code), broker_error_text(reply)), wire_code_(reply.code), id_(reply.id) {}

Client::Client() : context_(std::make_shared<zmq::context_t>()), dealer_(*context_, zmq::socket_type::dealer) {
  // Nothing we send needs to outlive the client: every request waits for its answer.
  configure_socket(dealer_);
}

Client::~Client() = default;

void Client::connect(const std::string& frontend_endpoint, const std::string& stream_endpoint,
                     std::optional<CurveClientKeys> curve) {
  if (!frontend_endpoint_.empty()) throw Error(ErrorCode::kInvalidArgument, "client already connected");
  if (curve) make_curve_client(dealer_, *curve);
  try {
    dealer_.connect(frontend_endpoint);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::kInvalidArgument, "broker endpoint " + frontend_endpoint + ": " + e.what());
  }
  frontend_endpoint_ = frontend_endpoint;
  stream_endpoint_ = stream_endpoint;
  curve_ = std::move(curve);
}

std::string Client::submit(const protocol::Job& job, int timeout_ms) {
  check_job(job);
  send(protocol::to_wire(protocol::Submit{job}));
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  while (std::optional<protocol::WireMessage> reply = receive_reply(deadline)) {
    switch (reply->type) {
      case protocol::MessageType::kAccepted: {
        auto accepted = protocol::from_wire<protocol::Accepted>(*reply);
        if (job.id.empty() || accepted.id == job.id) return accepted.id;
        break;
      }
      case protocol::MessageType::kRejected: {
        auto rejected = protocol::from_wire<protocol::Rejected>(*reply);
        if (job.id.empty() || rejected.id == job.id) {
          throw JobRejected(rejected.id, rejected.reason, rejected.retry_after_ms, rejected.message.value_or(""));
        }
        break;
      }
      case protocol::MessageType::kError: {
        auto error = protocol::from_wire<protocol::ErrorReply>(*reply);
        if (error_concerns(error, job.id)) throw BrokerError(error);
        break;
      }
      default:
        break;
    }
    spdlog::debug("submit: dropped a late {} reply", protocol::message_type_name(reply->type));
  }
  fail_timeout("SUBMIT", job.id, timeout_ms);
}

protocol::FinalResult Client::wait(const std::string& id, const std::function<void(const protocol::Event&)>& on_event,
                                   int timeout_ms) {
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  std::optional<std::int64_t> last_seq;
  while (true) {
    auto& queue = pending_events_[id];
    if (queue.empty()) {
      pending_events_.erase(id);
      std::optional<protocol::WireMessage> message = receive(deadline);
      if (!message) {
        throw Error(ErrorCode::kIo, "job " + id + " did not finish within " + std::to_string(timeout_ms) +
                                        " ms (broker " + frontend_endpoint_ + ")");
      }
      if (message->type == protocol::MessageType::kEvent) {
        keep_event(*message);
      } else if (message->type == protocol::MessageType::kError) {
        auto error = protocol::from_wire<protocol::ErrorReply>(*message);
        if (error.id == id) throw BrokerError(error);
        spdlog::warn("{}", broker_error_text(error));
      } else {
        spdlog::debug("wait: dropped a late {} reply", protocol::message_type_name(message->type));
      }
      continue;
    }
    protocol::Event event = std::move(queue.front());
    queue.pop_front();
    // A job's seq only grows on this socket; an event at or below the last one shown is a repeat.
    if (last_seq && event.seq <= *last_seq) continue;
    last_seq = event.seq;
    if (on_event) on_event(event);
    if (event.final_result) {
      if (queue.empty()) pending_events_.erase(id);
      return *event.final_result;
    }
  }
}

protocol::StatusReply Client::replay(const std::string& id, std::int64_t from_seq,
                                     const std::function<void(const protocol::Event&)>& on_event, int timeout_ms) {
  check_job_id(id);
  send(protocol::to_wire(protocol::Replay{id, from_seq}));
  send(protocol::to_wire(protocol::Status{id}));  // answered after every replayed event
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  while (std::optional<protocol::WireMessage> message = receive(deadline)) {
    if (message->type == protocol::MessageType::kEvent) {
      protocol::Event event = protocol::from_wire<protocol::Event>(*message);
      if (event.id == id) {
        if (on_event) on_event(event);
      } else {
        pending_events_[event.id].push_back(std::move(event));
      }
    } else if (message->type == protocol::MessageType::kStatusReply) {
      auto status_reply = protocol::from_wire<protocol::StatusReply>(*message);
      if (status_reply.id == id) return status_reply;
    } else if (message->type == protocol::MessageType::kError) {
      auto error = protocol::from_wire<protocol::ErrorReply>(*message);
      if (error_concerns(error, id)) throw BrokerError(error);
    }
  }
  fail_timeout("REPLAY", id, timeout_ms);
}

protocol::StatusReply Client::status(const std::string& id, int timeout_ms) {
  check_job_id(id);
  send(protocol::to_wire(protocol::Status{id}));
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  while (std::optional<protocol::WireMessage> reply = receive_reply(deadline)) {
    if (reply->type == protocol::MessageType::kStatusReply) {
      auto status_reply = protocol::from_wire<protocol::StatusReply>(*reply);
      if (status_reply.id == id) return status_reply;
    } else if (reply->type == protocol::MessageType::kError) {
      auto error = protocol::from_wire<protocol::ErrorReply>(*reply);
      if (error_concerns(error, id)) throw BrokerError(error);
    }
    spdlog::debug("status: dropped a late {} reply", protocol::message_type_name(reply->type));
  }
  fail_timeout("STATUS", id, timeout_ms);
}

protocol::StatusReply Client::cancel(const std::string& id, int timeout_ms) {
  check_job_id(id);
  send(protocol::to_wire(protocol::Cancel{id}));
  std::optional<BrokerError> cancel_error;
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  send(protocol::to_wire(protocol::Status{id}));
  while (std::optional<protocol::WireMessage> reply = receive_reply(deadline)) {
    if (reply->type == protocol::MessageType::kStatusReply) {
      auto status_reply = protocol::from_wire<protocol::StatusReply>(*reply);
      if (status_reply.id != id) continue;
      if (cancel_error) throw *cancel_error;
      return status_reply;
    }
    if (reply->type == protocol::MessageType::kError) {
      auto error = protocol::from_wire<protocol::ErrorReply>(*reply);
      if (!error_concerns(error, id)) continue;
      // The first ERROR answers the CANCEL; a second one answers the STATUS and ends the exchange.
      if (cancel_error) throw *cancel_error;
      cancel_error.emplace(error);
    }
  }
  if (cancel_error) throw *cancel_error;
  fail_timeout("CANCEL", id, timeout_ms);
}

StreamSubscriber Client::subscribe(const std::string& id) const {
  if (stream_endpoint_.empty()) throw Error(ErrorCode::kInvalidArgument, "client not connected");
  return StreamSubscriber(context_, stream_endpoint_, id, curve_);
}

protocol::ModelsReply Client::models(int timeout_ms) {
  send(protocol::to_wire(protocol::Models{}));
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  while (std::optional<protocol::WireMessage> reply = receive_reply(deadline)) {
    if (reply->type == protocol::MessageType::kModelsReply) return protocol::from_wire<protocol::ModelsReply>(*reply);
    if (reply->type == protocol::MessageType::kError) {
      auto error = protocol::from_wire<protocol::ErrorReply>(*reply);
      if (!error.id) throw BrokerError(error);  // one naming a job answers an earlier request
    }
    spdlog::debug("models: dropped a late {} reply", protocol::message_type_name(reply->type));
  }
  fail_timeout("MODELS", "", timeout_ms);
}

void Client::send(const protocol::WireMessage& message) {
  if (frontend_endpoint_.empty()) throw Error(ErrorCode::kInvalidArgument, "client not connected");
  send_message(dealer_, message, frontend_endpoint_);
}

std::optional<protocol::WireMessage> Client::receive_reply(std::int64_t deadline_ms) {
  while (std::optional<protocol::WireMessage> message = receive(deadline_ms)) {
    if (message->type != protocol::MessageType::kEvent) return message;
    keep_event(*message);
  }
  return std::nullopt;
}

std::optional<protocol::WireMessage> Client::receive(std::int64_t deadline_ms) {
  while (std::optional<std::vector<std::string>> frames = receive_frames(dealer_, deadline_ms)) {
    try {
      return protocol::from_frames(frame_views(*frames));
    } catch (const Error& e) {
      // The broker is trusted more than a stranger, but a bad message must not end the client.
      spdlog::warn("dropped a malformed message from {}: {}", frontend_endpoint_, e.what());
    }
  }
  return std::nullopt;
}

void Client::keep_event(const protocol::WireMessage& message) {
  try {
    protocol::Event event = protocol::from_wire<protocol::Event>(message);
    pending_events_[event.id].push_back(std::move(event));
  } catch (const Error& e) {
    spdlog::warn("dropped a malformed EVENT from {}: {}", frontend_endpoint_, e.what());
  }
}

void Client::fail_timeout(const char* request, const std::string& id, int timeout_ms) const {
  std::string what = std::string(request) + (id.empty() ? "" : " " + id);
  // A refused CURVE handshake looks exactly like this from here.
  const char* hint = curve_ ? " (CURVE: is the server key right, and our public key on its allow-list?)" : "";
  throw Error(ErrorCode::kIo, "no answer to " + what + " from broker " + frontend_endpoint_ + " within " +
                                  std::to_string(timeout_ms) + " ms" + hint);
}

}  // namespace flashq
