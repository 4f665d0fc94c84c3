#include "worker/process/broker_link.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shared/error.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/messages.h"

namespace flashq {
namespace {

using protocol::MessageType;

int64_t ms_since(SteadyClock::time_point start, SteadyClock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
}

// Messages queued per connection before a send fails; a broker that far behind counts as lost.
constexpr int kSendHighWaterMark = 100000;

}  // namespace

BrokerLink::BrokerLink(zmq::context_t& context, LinkOptions options, WorkInbox& inbox, MessageOutbox& outbox,
                       std::function<int64_t()> load)
    : context_(context),
      options_(std::move(options)),
      inbox_(inbox),
      outbox_(outbox),
      load_(std::move(load)),
      backoff_ms_(options_.reconnect_min_ms),
      jitter_(static_cast<unsigned>(::getpid()) ^
              static_cast<unsigned>(SteadyClock::now().time_since_epoch().count())) {}

BrokerLink::~BrokerLink() { close_socket(0); }

void BrokerLink::run(int shutdown_fd) {
  connect();
  while (true) {
    std::vector<zmq::pollitem_t> items = {{nullptr, shutdown_fd, ZMQ_POLLIN, 0},
                                          {nullptr, outbox_.wakeup_fd(), ZMQ_POLLIN, 0}};
    if (connected()) {
      items.push_back({socket_->handle(), 0, ZMQ_POLLIN, 0});
      items.push_back({monitor_->handle(), 0, ZMQ_POLLIN, 0});
    }
    // A shutdown signal interrupts the poll (EINTR); its eventfd is then readable.
    if (zmq_poll(items.data(), static_cast<int>(items.size()), poll_timeout_ms()) < 0 && zmq_errno() != EINTR) {
      throw Error(ErrorCode::kIo, std::string("zmq_poll: ") + zmq_strerror(zmq_errno()));
    }
    if (items[0].revents & ZMQ_POLLIN) {
      char buffer[256];  // an eventfd counter (or a signalfd_siginfo)
      [[maybe_unused]] ssize_t got = ::read(shutdown_fd, buffer, sizeof buffer);
      begin_drain();
    }
    if (items.size() > 2 && (items[2].revents & ZMQ_POLLIN)) receive_messages();
    if (connected() && items.size() > 3 && (items[3].revents & ZMQ_POLLIN)) read_monitor_events();
    flush_outbox();
    check_timers();
    if (draining_ && outbox_.drained()) {
      flush_outbox();  // the FINALs pushed before the drain was reported
      if (connected()) {
        send(protocol::to_wire(protocol::Disconnect{}));
        if (!held_.empty()) spdlog::info("handing {} unstarted jobs back to the broker", held_.size());
      }
      close_socket(options_.goodbye_linger_ms);
      return;
    }
  }
}

int BrokerLink::poll_timeout_ms() const {
  const auto now = SteadyClock::now();
  int64_t wait = 1000;
  if (connected()) {
    wait = std::min(wait, options_.heartbeat_ms - ms_since(last_heartbeat_sent_, now));
    wait = std::min(wait, options_.heartbeat_ms * options_.liveness - ms_since(last_heard_, now));
  } else if (!draining_) {
    wait = std::min(wait, -ms_since(reconnect_at_, now));
  }
  return static_cast<int>(std::clamp<int64_t>(wait, 0, 1000));
}

void BrokerLink::connect() {
  socket_.emplace(context_, zmq::socket_type::dealer);
  socket_->set(zmq::sockopt::linger, 0);
  socket_->set(zmq::sockopt::sndhwm, kSendHighWaterMark);
  socket_->set(zmq::sockopt::maxmsgsize, protocol::kMaxFrameBytes);
  if (options_.curve) make_curve_client(*socket_, *options_.curve);
  socket_->connect(options_.endpoint);
  // The monitor tells at once when the TCP connection closes (a broker restart), instead of
  // after `liveness` silent heartbeats.
  const std::string monitor_endpoint = "inproc://flashq-worker-monitor-" + std::to_string(link_);
  if (zmq_socket_monitor(socket_->handle(), monitor_endpoint.c_str(),
                         ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0) {
    throw Error(ErrorCode::kIo, std::string("zmq_socket_monitor: ") + zmq_strerror(zmq_errno()));
  }
  monitor_.emplace(context_, zmq::socket_type::pair);
  monitor_->set(zmq::sockopt::linger, 0);
  monitor_->connect(monitor_endpoint);

  const auto now = SteadyClock::now();
  last_heard_ = now;
  last_heartbeat_sent_ = now;
  spdlog::info("connecting to the broker at {} as {}", options_.endpoint, options_.ready.worker_id);
  send(protocol::to_wire(options_.ready));
}

void BrokerLink::close_socket(int64_t linger_ms) {
  if (!socket_) return;
  zmq_socket_monitor(socket_->handle(), nullptr, 0);
  monitor_.reset();
  socket_->set(zmq::sockopt::linger, static_cast<int>(linger_ms));
  socket_.reset();
}

void BrokerLink::lose_link(const std::string& why) {
  if (!connected()) return;
  close_socket(0);
  ++link_;
  inbox_.push(LinkLost{link_});
  held_.clear();  // the broker re-queues them with the rest
  if (draining_) {
    spdlog::warn("lost the broker ({}) while shutting down; not reconnecting", why);
    return;
  }
  // Jitter keeps a pool of workers that lost the same broker from reconnecting in lockstep.
  const int64_t delay_ms = std::uniform_int_distribution<int64_t>(backoff_ms_ * 4 / 5, backoff_ms_ * 6 / 5)(jitter_);
  spdlog::warn("lost the broker ({}); reconnecting in {} ms", why, delay_ms);
  reconnect_at_ = SteadyClock::now() + std::chrono::milliseconds(delay_ms);
  backoff_ms_ = std::min(backoff_ms_ * 2, options_.reconnect_max_ms);
}

bool BrokerLink::send(const protocol::WireMessage& message) {
  if (!connected()) return false;
  const std::vector<std::string> frames = protocol::to_frames(message);
  std::vector<zmq::const_buffer> buffers;
  for (const std::string& frame : frames) buffers.push_back(zmq::buffer(frame));
  if (!zmq::send_multipart(*socket_, buffers, zmq::send_flags::dontwait)) {
    lose_link("the broker stopped taking messages");
    return false;
  }
  return true;
}

void BrokerLink::receive_messages() {
  for (int budget = 0; budget < 1000 && connected(); ++budget) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(*socket_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    last_heard_ = SteadyClock::now();  // any message counts as a heartbeat
    std::vector<std::string_view> frames;
    for (const zmq::message_t& part : parts) frames.push_back(part.to_string_view());
    try {
      on_message(protocol::from_frames(frames));
    } catch (const Error& e) {
      spdlog::warn("bad message from the broker: {}", e.what());
      send(protocol::to_wire(protocol::error_reply(e)));
    }
  }
}

void BrokerLink::on_message(const protocol::WireMessage& message) {
  switch (message.type) {
    case MessageType::kHeartbeat:
      (void)protocol::from_wire<protocol::BrokerHeartbeat>(message);
      backoff_ms_ = options_.reconnect_min_ms;  // the broker knows us: the connection works
      return;
    case MessageType::kAssign: {
      protocol::Assign assign = protocol::from_wire<protocol::Assign>(message);
      backoff_ms_ = options_.reconnect_min_ms;
      if (draining_) {
        spdlog::info("job {}: assigned while shutting down; not started, handed back at DISCONNECT", assign.job.id);
        held_.push_back(std::move(assign));
      } else {
        inbox_.push(AssignWork{std::move(assign), SteadyClock::now(), link_});
      }
      return;
    }
    case MessageType::kCancel: {
      protocol::Cancel cancel = protocol::from_wire<protocol::Cancel>(message);
      auto held =
          std::find_if(held_.begin(), held_.end(), [&](const protocol::Assign& a) { return a.job.id == cancel.id; });
      if (held != held_.end()) {
        protocol::Final final_message{.id = held->job.id, .attempt = held->attempt};
        final_message.result.finish_reason = protocol::FinishReason::kCancelled;
        held_.erase(held);
        send(protocol::to_wire(final_message));
      } else {
        inbox_.push(CancelWork{std::move(cancel.id)});
      }
      return;
    }
    case MessageType::kDisconnect:
      (void)protocol::from_wire<protocol::Disconnect>(message);
      lose_link("the broker sent DISCONNECT");
      return;
    case MessageType::kError: {
      protocol::ErrorReply error = protocol::from_wire<protocol::ErrorReply>(message);
      spdlog::warn("the broker reports an error: {}: {}", error.code, error.message);
      return;  // never answered, so two peers cannot bounce errors forever
    }
    default:
      throw Error(ErrorCode::kProtocol, std::string(protocol::message_type_name(message.type)) +
                                            " is not a message the broker sends to workers");
  }
}

void BrokerLink::read_monitor_events() {
  while (connected()) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(*monitor_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    uint16_t event = 0;
    if (!parts.empty() && parts[0].size() >= sizeof event) std::memcpy(&event, parts[0].data(), sizeof event);
    if (event == ZMQ_EVENT_DISCONNECTED) lose_link("the connection closed");
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      // Otherwise a refused key would only show as a reconnect loop.
      spdlog::error("the broker refused our CURVE key: is our public key on its allow-list?");
    }
  }
}

void BrokerLink::flush_outbox() {
  for (OutgoingMessage& out : outbox_.take()) {
    // Output of jobs from an earlier connection is dropped: the broker re-queued those jobs.
    if (out.link == link_) send(out.message);
  }
}

void BrokerLink::check_timers() {
  const auto now = SteadyClock::now();
  if (connected()) {
    if (ms_since(last_heard_, now) >= options_.heartbeat_ms * options_.liveness) {
      lose_link("no message for " + std::to_string(ms_since(last_heard_, now)) + " ms");
    } else if (ms_since(last_heartbeat_sent_, now) >= options_.heartbeat_ms) {
      last_heartbeat_sent_ = now;
      send(protocol::to_wire(protocol::WorkerHeartbeat{.load = load_()}));
    }
  } else if (!draining_ && now >= reconnect_at_) {
    connect();
  }
}

void BrokerLink::begin_drain() {
  const auto now = SteadyClock::now();
  if (draining_) {
    spdlog::warn("second shutdown signal: cancelling the running jobs now");
    inbox_.push(Drain{now});
    return;
  }
  draining_ = true;
  spdlog::info("shutting down: no new jobs; running ones may take {} ms to finish", options_.drain_timeout_ms);
  inbox_.push(Drain{now + std::chrono::milliseconds(options_.drain_timeout_ms)});
}

}  // namespace flashq
