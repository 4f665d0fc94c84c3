#include "worker/process/worker_broker_link.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "shared/error.h"
#include "shared/protocol/messages.h"
#include "shared/transport/frames.h"

namespace flashq {
namespace {

using protocol::MessageType;

int64_t ms_since(SteadyClock::time_point start, SteadyClock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
}

// Messages queued per connection before a send fails; a broker that far behind counts as lost.
constexpr int kSendHighWaterMark = 100000;

}  // namespace

WorkerBrokerLink::WorkerBrokerLink(zmq::context_t& context, LinkOptions options, WorkInbox& inbox,
                                   MessageOutbox& outbox, std::function<int64_t()> load)
    : context_(context),
      options_(std::move(options)),
      inbox_(inbox),
      outbox_(outbox),
      load_(std::move(load)),
      backoff_ms_(options_.reconnect_min_ms),
      jitter_(static_cast<unsigned>(::getpid()) ^
              static_cast<unsigned>(SteadyClock::now().time_since_epoch().count())) {}

WorkerBrokerLink::~WorkerBrokerLink() { close_socket(0); }

void WorkerBrokerLink::run(int shutdown_fd) {
  connect();
  while (true) {
    std::vector<zmq::pollitem_t> items = {{nullptr, shutdown_fd, ZMQ_POLLIN, 0},
                                          {nullptr, outbox_.wakeup_fd(), ZMQ_POLLIN, 0}};
    if (connected()) {
      items.push_back({socket_->handle(), 0, ZMQ_POLLIN, 0});
      items.push_back({monitor_->events_socket().handle(), 0, ZMQ_POLLIN, 0});
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

int WorkerBrokerLink::poll_timeout_ms() const {
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

void WorkerBrokerLink::connect() {
  socket_.emplace(context_, zmq::socket_type::dealer);
  configure_socket(*socket_, kSendHighWaterMark);
  if (options_.curve) make_curve_client(*socket_, *options_.curve);
  // The monitor tells at once when the TCP connection closes (a broker restart), instead of
  // after `liveness` silent heartbeats.
  monitor_.emplace(context_, *socket_, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  socket_->connect(options_.endpoint);

  const auto now = SteadyClock::now();
  last_heard_ = now;
  last_heartbeat_sent_ = now;
  spdlog::info("connecting to the broker at {} as {}", options_.endpoint, options_.ready.worker_id);
  send(protocol::to_wire(options_.ready));
}

void WorkerBrokerLink::close_socket(int64_t linger_ms) {
  if (!socket_) return;
  monitor_.reset();
  socket_->set(zmq::sockopt::linger, static_cast<int>(linger_ms));
  socket_.reset();
}

void WorkerBrokerLink::lose_link(const std::string& why) {
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

bool WorkerBrokerLink::send(const protocol::WireMessage& message) {
  if (!connected()) return false;
  if (!try_send_message(*socket_, message)) {
    lose_link("the broker stopped taking messages");
    return false;
  }
  return true;
}

void WorkerBrokerLink::receive_messages() {
  for (int budget = 0; budget < 1000 && connected(); ++budget) {
    std::optional<std::vector<std::string>> frames = try_receive_frames(*socket_);
    if (!frames) return;
    last_heard_ = SteadyClock::now();  // any message counts as a heartbeat
    try {
      on_message(protocol::from_frames(frame_views(*frames)));
    } catch (const Error& e) {
      spdlog::warn("bad message from the broker: {}", e.what());
      send(protocol::to_wire(protocol::error_reply(e)));
    }
  }
}

void WorkerBrokerLink::on_message(const protocol::WireMessage& message) {
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

void WorkerBrokerLink::read_monitor_events() {
  for (const std::uint16_t event : monitor_->take_events()) {
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      // Otherwise a refused key would only show as a reconnect loop.
      spdlog::error("the broker refused our CURVE key: is our public key on its allow-list?");
    }
    if (event == ZMQ_EVENT_DISCONNECTED) {
      lose_link("the connection closed");  // closes the monitor too
      return;
    }
  }
}

void WorkerBrokerLink::flush_outbox() {
  for (OutgoingMessage& out : outbox_.take()) {
    // Output of jobs from an earlier connection is dropped: the broker re-queued those jobs.
    if (out.link == link_) send(out.message);
  }
}

void WorkerBrokerLink::check_timers() {
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

void WorkerBrokerLink::begin_drain() {
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
