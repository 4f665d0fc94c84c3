#include "gateway/server/gateway_broker_link.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "shared/error.h"
#include "shared/protocol/stream.h"
#include "shared/protocol/wire.h"
#include "shared/transport/frames.h"

namespace flashq::gateway {
namespace {

constexpr int kPollIntervalMs = 100;  // how often answers awaited are checked for their timeout
constexpr int kSocketQueueMessages = 1'000'000;
// Messages read from one socket per round of the loop: a stream flooding in as fast as it is
// read must not starve the other socket, the requests posted to the link, or the timeouts.
constexpr int kMessagesPerRound = 256;

protocol::ErrorReply unavailable(const std::string& what, std::optional<std::string> id = std::nullopt) {
  return {"unavailable", what, std::move(id)};
}

}  // namespace

// A job the link hears about: its listener, the next seq it expects, and events that came
// early (a watched job's live events overtaking its replay), held until the gap is filled.
struct GatewayBrokerLink::TrackedJob {
  std::shared_ptr<JobListener> listener;
  std::int64_t next_seq = 0;
  std::map<std::int64_t, protocol::Event> early;
  std::int64_t answer_deadline_ms = 0;  // SUBMIT or REPLAY not yet answered: when it fails; 0 once answered
  bool watched = false;                 // subscribed on the stream socket
  bool awaiting_accept = false;         // submitted here, ACCEPTED or REJECTED not yet heard
  std::int64_t replay_asked_from = -1;  // the seq of the last REPLAY sent for it; -1: none
};

GatewayBrokerLink::GatewayBrokerLink(BrokerEndpoints endpoints)
    : endpoints_(std::move(endpoints)),
      dealer_(context_, zmq::socket_type::dealer),
      sub_(context_, zmq::socket_type::sub) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw Error(ErrorCode::kIo, "eventfd failed for the broker link");
  // Every request of the gateway shares these sockets: their queues are not the bound (the
  // HTTP side bounds each client); an event the broker still drops is replayed (deliver()).
  for (zmq::socket_t* socket : {&dealer_, &sub_}) {
    configure_socket(*socket, kSocketQueueMessages);
    if (endpoints_.curve) make_curve_client(*socket, *endpoints_.curve);
  }
  // A broker that is away: sends fail at once instead of queueing behind a connection that
  // may never come, so a request hears "unavailable" now rather than at its timeout.
  dealer_.set(zmq::sockopt::immediate, 1);
  // The monitor tells at once when the connection closes (the broker died or restarted).
  monitor_.emplace(context_, dealer_, ZMQ_EVENT_DISCONNECTED);
  dealer_.connect(endpoints_.frontend);
  sub_.connect(endpoints_.stream);
  thread_ = std::thread([this] { run(); });
}

GatewayBrokerLink::~GatewayBrokerLink() {
  stopping_ = true;
  post([] {});
  thread_.join();
  zmq_socket_monitor(dealer_.handle(), nullptr, 0);
  for (auto& [id, job] : jobs_) job->listener->failed(unavailable("the gateway is shutting down", id));
  for (auto& [id, waiter] : status_waiters_) waiter.second(unavailable("the gateway is shutting down", id));
  for (auto& waiter : models_waiters_) waiter.second(unavailable("the gateway is shutting down"));
  close(wake_fd_);
}

void GatewayBrokerLink::post(Command command) {
  {
    std::lock_guard lock(mutex_);
    commands_.push_back(std::move(command));
  }
  const std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

bool GatewayBrokerLink::send(const protocol::WireMessage& message) {
  try {
    send_message(dealer_, message, endpoints_.frontend);
    return true;
  } catch (const Error& e) {
    spdlog::warn("broker link {}: {}", endpoints_.frontend, e.what());
    return false;
  }
}

void GatewayBrokerLink::submit(protocol::Job job, std::shared_ptr<JobListener> listener) {
  post([this, job = std::move(job), listener = std::move(listener)]() mutable {
    const std::string id = job.id;
    auto tracked = std::make_unique<TrackedJob>();
    tracked->listener = listener;
    tracked->answer_deadline_ms = steady_now_ms() + kAnswerTimeoutMs;
    tracked->awaiting_accept = true;
    jobs_.emplace(id, std::move(tracked));
    if (!send(protocol::to_wire(protocol::Submit{std::move(job)}))) {
      fail_waiting(id, unavailable("no broker at " + endpoints_.frontend, id));
    }
  });
}

void GatewayBrokerLink::watch(const std::string& id, std::shared_ptr<JobListener> listener) {
  post([this, id, listener = std::move(listener)] {
    auto tracked = std::make_unique<TrackedJob>();
    tracked->listener = listener;
    tracked->watched = true;
    tracked->replay_asked_from = 0;
    tracked->answer_deadline_ms = steady_now_ms() + kAnswerTimeoutMs;
    jobs_.emplace(id, std::move(tracked));
    // Subscribed first, then replayed: an event published in between comes both ways, and the
    // second copy is dropped by seq.
    sub_.set(zmq::sockopt::subscribe, protocol::stream_topic(id));
    if (!send(protocol::to_wire(protocol::Replay{id, 0}))) {
      fail_waiting(id, unavailable("no broker at " + endpoints_.frontend, id));
    }
  });
}

void GatewayBrokerLink::forget(const std::string& id, const JobListener* listener) {
  post([this, id, listener] { drop(id, listener); });
}

void GatewayBrokerLink::cancel(const std::string& id) {
  post([this, id] { send(protocol::to_wire(protocol::Cancel{id})); });
}

void GatewayBrokerLink::status(const std::string& id, std::function<void(const StatusOutcome&)> done) {
  post([this, id, done = std::move(done)] {
    if (!send(protocol::to_wire(protocol::Status{id}))) {
      done(unavailable("no broker at " + endpoints_.frontend, id));
      return;
    }
    status_waiters_.emplace(id, std::make_pair(steady_now_ms() + kAnswerTimeoutMs, done));
  });
}

void GatewayBrokerLink::models(std::function<void(const ModelsOutcome&)> done) {
  post([this, done = std::move(done)] {
    if (!send(protocol::to_wire(protocol::Models{}))) {
      done(unavailable("no broker at " + endpoints_.frontend));
      return;
    }
    models_waiters_.emplace_back(steady_now_ms() + kAnswerTimeoutMs, done);
  });
}

void GatewayBrokerLink::drop(const std::string& id, const JobListener* listener) {
  auto [first, last] = jobs_.equal_range(id);
  for (auto it = first; it != last; ++it) {
    if (it->second->listener.get() != listener) continue;
    if (it->second->watched) sub_.set(zmq::sockopt::unsubscribe, protocol::stream_topic(id));
    jobs_.erase(it);
    return;
  }
}

void GatewayBrokerLink::fail_waiting(const std::string& id, const protocol::ErrorReply& error) {
  std::vector<std::shared_ptr<JobListener>> failed;
  auto [first, last] = jobs_.equal_range(id);
  for (auto it = first; it != last; ++it) {
    if (it->second->answer_deadline_ms != 0) failed.push_back(it->second->listener);
  }
  for (const auto& listener : failed) {
    drop(id, listener.get());
    listener->failed(error);
  }
}

void GatewayBrokerLink::deliver(const protocol::Event& event) {
  // Listeners are called after the walk: a call may queue commands, never change jobs_ now,
  // but a listener that ends is dropped here.
  std::vector<std::pair<std::shared_ptr<JobListener>, std::vector<protocol::Event>>> calls;
  std::vector<protocol::Replay> replays;
  auto [first, last] = jobs_.equal_range(event.id);  // none: forgotten, or another producer's job
  for (auto it = first; it != last;) {
    TrackedJob& job = *it->second;
    if (event.seq < job.next_seq) {  // seen already (replayed and published both)
      ++it;
      continue;
    }
    if (event.seq > job.next_seq) {  // early: held until the events before it come
      job.early.emplace(event.seq, event);
      if (job.replay_asked_from != job.next_seq) {
        // A gap no REPLAY covers yet: events were lost on the way (a queue overflowed), so the
        // broker is asked for them again. Its answer fills the gap, or fails the job.
        job.replay_asked_from = job.next_seq;
        job.answer_deadline_ms = steady_now_ms() + kAnswerTimeoutMs;
        replays.push_back({event.id, job.next_seq});
      }
      ++it;
      continue;
    }
    // In order: this answers a REPLAY (and shows a SUBMIT was taken).
    job.answer_deadline_ms = 0;
    std::vector<protocol::Event> ready = {event};
    ++job.next_seq;
    bool final = event.final_result.has_value();
    while (!final) {
      auto next = job.early.find(job.next_seq);
      if (next == job.early.end()) break;
      final = next->second.final_result.has_value();
      ready.push_back(std::move(next->second));
      job.early.erase(next);
      ++job.next_seq;
    }
    calls.emplace_back(job.listener, std::move(ready));
    if (final) {
      if (job.watched) sub_.set(zmq::sockopt::unsubscribe, protocol::stream_topic(event.id));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  for (const protocol::Replay& replay : replays) send(protocol::to_wire(replay));
  for (auto& [listener, events] : calls) {
    for (const protocol::Event& e : events) listener->event(e);
  }
}

void GatewayBrokerLink::handle(const protocol::WireMessage& message) {
  using protocol::MessageType;
  switch (message.type) {
    case MessageType::kAccepted: {
      const auto reply = protocol::from_wire<protocol::Accepted>(message);
      std::vector<std::shared_ptr<JobListener>> submitters;
      auto [first, last] = jobs_.equal_range(reply.id);
      for (auto it = first; it != last; ++it) {
        if (!it->second->awaiting_accept) continue;
        it->second->awaiting_accept = false;
        it->second->answer_deadline_ms = 0;
        submitters.push_back(it->second->listener);
      }
      for (const auto& listener : submitters) listener->accepted();
      return;
    }
    case MessageType::kRejected: {
      const auto reply = protocol::from_wire<protocol::Rejected>(message);
      std::vector<std::shared_ptr<JobListener>> submitters;
      auto [first, last] = jobs_.equal_range(reply.id);
      for (auto it = first; it != last; ++it) {
        if (it->second->awaiting_accept) submitters.push_back(it->second->listener);
      }
      for (const auto& listener : submitters) {
        drop(reply.id, listener.get());
        listener->rejected(reply);
      }
      return;
    }
    case MessageType::kEvent:
      deliver(protocol::from_wire<protocol::Event>(message));
      return;
    case MessageType::kStatusReply: {
      const auto reply = protocol::from_wire<protocol::StatusReply>(message);
      auto it = status_waiters_.find(reply.id);
      if (it == status_waiters_.end()) return;
      auto done = std::move(it->second.second);
      status_waiters_.erase(it);
      done(reply);
      return;
    }
    case MessageType::kModelsReply: {
      const auto reply = protocol::from_wire<protocol::ModelsReply>(message);
      if (models_waiters_.empty()) return;
      auto done = std::move(models_waiters_.front().second);
      models_waiters_.pop_front();
      done(reply);
      return;
    }
    case MessageType::kError: {
      const auto reply = protocol::from_wire<protocol::ErrorReply>(message);
      if (!reply.id) {
        spdlog::warn("broker {} answered an error about no job: {} {}", endpoints_.frontend, reply.code, reply.message);
        return;
      }
      fail_waiting(*reply.id, reply);
      auto waiter = status_waiters_.find(*reply.id);
      if (waiter != status_waiters_.end()) {
        auto done = std::move(waiter->second.second);
        status_waiters_.erase(waiter);
        done(reply);
      }
      return;
    }
    default:
      spdlog::warn("broker {} sent an unexpected {}", endpoints_.frontend, protocol::message_type_name(message.type));
  }
}

void GatewayBrokerLink::expire_answers(std::int64_t now_ms) {
  const std::string no_answer = "the broker at " + endpoints_.frontend + " did not answer in time";
  std::vector<std::pair<std::string, std::shared_ptr<JobListener>>> late;
  for (const auto& [id, job] : jobs_) {
    if (job->answer_deadline_ms != 0 && now_ms > job->answer_deadline_ms) late.emplace_back(id, job->listener);
  }
  for (const auto& [id, listener] : late) {
    drop(id, listener.get());
    listener->failed(unavailable(no_answer, id));
  }
  for (auto it = status_waiters_.begin(); it != status_waiters_.end();) {
    if (now_ms <= it->second.first) {
      ++it;
      continue;
    }
    auto done = std::move(it->second.second);
    const std::string id = it->first;
    it = status_waiters_.erase(it);
    done(unavailable(no_answer, id));
  }
  while (!models_waiters_.empty() && now_ms > models_waiters_.front().first) {
    auto done = std::move(models_waiters_.front().second);
    models_waiters_.pop_front();
    done(unavailable(no_answer));
  }
}

void GatewayBrokerLink::read_monitor_events() {
  for (const std::uint16_t event : monitor_->take_events()) {
    if (event == ZMQ_EVENT_DISCONNECTED) follow_after_disconnect();
  }
}

void GatewayBrokerLink::follow_after_disconnect() {
  // Jobs still waiting for ACCEPTED keep their SUBMIT's deadline: the broker may not have them.
  const std::int64_t deadline_ms = steady_now_ms() + kAnswerTimeoutMs;
  std::size_t followed = 0;
  for (auto& [id, job] : jobs_) {
    if (job->awaiting_accept) continue;
    if (!job->watched) {
      job->watched = true;
      sub_.set(zmq::sockopt::subscribe, protocol::stream_topic(id));
    }
    job->answer_deadline_ms = deadline_ms;
    rejoining_.insert(id);
    ++followed;
  }
  spdlog::warn("lost the connection to the broker at {}; {} jobs under way there are followed again",
               endpoints_.frontend, followed);
}

void GatewayBrokerLink::send_rejoins() {
  for (auto it = rejoining_.begin(); it != rejoining_.end();) {
    auto [first, last] = jobs_.equal_range(*it);
    if (first == last) {  // ended or forgotten meanwhile
      it = rejoining_.erase(it);
      continue;
    }
    // One REPLAY serves every listener of the job: each drops what it has seen (deliver()).
    std::int64_t from_seq = first->second->next_seq;
    for (auto job = first; job != last; ++job) from_seq = std::min(from_seq, job->second->next_seq);
    try {
      send_message(dealer_, protocol::to_wire(protocol::Replay{*it, from_seq}), endpoints_.frontend);
    } catch (const Error&) {
      return;  // no connection takes it yet: sent again next round
    }
    for (auto job = first; job != last; ++job) job->second->replay_asked_from = from_seq;
    it = rejoining_.erase(it);
  }
}

void GatewayBrokerLink::run() {
  while (!stopping_) {
    zmq::pollitem_t items[] = {{dealer_.handle(), 0, ZMQ_POLLIN, 0},
                               {sub_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                               {monitor_->events_socket().handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 4, std::chrono::milliseconds(kPollIntervalMs));
    if (items[3].revents & ZMQ_POLLIN) read_monitor_events();
    if (items[2].revents & ZMQ_POLLIN) {
      std::uint64_t count = 0;
      (void)!read(wake_fd_, &count, sizeof count);
      std::deque<Command> commands;
      {
        std::lock_guard lock(mutex_);
        commands.swap(commands_);
      }
      for (Command& command : commands) command();
    }
    // A bounded batch from each socket (ZeroMQ's poll reports the rest at once next round), so
    // neither socket, nor the commands, nor the timeouts wait behind a flood on the other.
    for (int n = 0; n < kMessagesPerRound; ++n) {
      auto frames = try_receive_frames(dealer_);
      if (!frames) break;
      try {
        handle(protocol::from_frames(frame_views(*frames)));
      } catch (const Error& e) {
        spdlog::warn("broker {} sent a message that breaks the protocol: {}", endpoints_.frontend, e.what());
      }
    }
    for (int n = 0; n < kMessagesPerRound; ++n) {
      auto frames = try_receive_frames(sub_);
      if (!frames) break;
      try {
        deliver(protocol::from_stream_frames(frame_views(*frames)));
      } catch (const Error& e) {
        spdlog::warn("broker stream {} sent a message that breaks the protocol: {}", endpoints_.stream, e.what());
      }
    }
    if (!rejoining_.empty()) send_rejoins();
    expire_answers(steady_now_ms());
  }
}

}  // namespace flashq::gateway
