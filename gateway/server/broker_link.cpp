#include "gateway/server/broker_link.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/socket_frames.h"
#include "shared/error.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/stream.h"
#include "shared/protocol/wire.h"

namespace flashq::gateway {
namespace {

constexpr int kPollIntervalMs = 100;  // how often answers awaited are checked for their timeout

protocol::ErrorReply unavailable(const std::string& what, std::optional<std::string> id = std::nullopt) {
  return {"unavailable", what, std::move(id)};
}

}  // namespace

// A job the link hears about: its listener, the next seq it expects, and events that came
// early (a watched job's live events overtaking its replay), held until the gap is filled.
struct BrokerLink::TrackedJob {
  std::shared_ptr<JobListener> listener;
  std::int64_t next_seq = 0;
  std::map<std::int64_t, protocol::Event> early;
  std::int64_t answer_deadline_ms = 0;  // SUBMIT or REPLAY not yet answered: when it fails; 0 once answered
  bool watched = false;                 // subscribed on the stream socket
};

BrokerLink::BrokerLink(BrokerEndpoints endpoints)
    : endpoints_(std::move(endpoints)), dealer_(context_, zmq::socket_type::dealer), sub_(context_, zmq::socket_type::sub) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw Error(ErrorCode::kIo, "eventfd failed for the broker link");
  for (zmq::socket_t* socket : {&dealer_, &sub_}) {
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::maxmsgsize, protocol::kMaxFrameBytes);
    if (endpoints_.curve) make_curve_client(*socket, *endpoints_.curve);
  }
  // A broker that is away: sends fail at once instead of queueing behind a connection that
  // may never come, so a request hears "unavailable" now rather than at its timeout.
  dealer_.set(zmq::sockopt::immediate, 1);
  dealer_.connect(endpoints_.frontend);
  sub_.connect(endpoints_.stream);
  thread_ = std::thread([this] { run(); });
}

BrokerLink::~BrokerLink() {
  stopping_ = true;
  post([] {});
  thread_.join();
  for (auto& [id, job] : jobs_) job->listener->failed(unavailable("the gateway is shutting down", id));
  for (auto& [id, waiter] : status_waiters_) waiter.second(unavailable("the gateway is shutting down", id));
  for (auto& waiter : models_waiters_) waiter.second(unavailable("the gateway is shutting down"));
  close(wake_fd_);
}

void BrokerLink::post(Command command) {
  {
    std::lock_guard lock(mutex_);
    commands_.push_back(std::move(command));
  }
  const std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

bool BrokerLink::send(const protocol::WireMessage& message) {
  try {
    send_frames(dealer_, protocol::to_frames(message), endpoints_.frontend);
    return true;
  } catch (const Error& e) {
    spdlog::warn("broker link {}: {}", endpoints_.frontend, e.what());
    return false;
  }
}

void BrokerLink::submit(protocol::Job job, std::shared_ptr<JobListener> listener) {
  post([this, job = std::move(job), listener = std::move(listener)]() mutable {
    const std::string id = job.id;
    if (jobs_.count(id)) {
      listener->failed({"invalid_argument", "job id " + id + " is already in use by this gateway", id});
      return;
    }
    auto tracked = std::make_unique<TrackedJob>();
    tracked->listener = listener;
    tracked->answer_deadline_ms = steady_now_ms() + kAnswerTimeoutMs;
    jobs_.emplace(id, std::move(tracked));
    if (!send(protocol::to_wire(protocol::Submit{std::move(job)}))) {
      fail_job(id, unavailable("no broker at " + endpoints_.frontend, id));
    }
  });
}

void BrokerLink::watch(const std::string& id, std::shared_ptr<JobListener> listener) {
  post([this, id, listener = std::move(listener)] {
    if (jobs_.count(id)) {
      listener->failed({"invalid_argument", "job " + id + " is already followed by this gateway", id});
      return;
    }
    auto tracked = std::make_unique<TrackedJob>();
    tracked->listener = listener;
    tracked->watched = true;
    tracked->answer_deadline_ms = steady_now_ms() + kAnswerTimeoutMs;
    jobs_.emplace(id, std::move(tracked));
    sub_.set(zmq::sockopt::subscribe, protocol::stream_topic(id));
    if (!send(protocol::to_wire(protocol::Replay{id, 0}))) fail_job(id, unavailable("no broker at " + endpoints_.frontend, id));
  });
}

void BrokerLink::forget(const std::string& id) {
  post([this, id] { finish_job(id); });
}

void BrokerLink::cancel(const std::string& id) {
  post([this, id] { send(protocol::to_wire(protocol::Cancel{id})); });
}

void BrokerLink::status(const std::string& id, std::function<void(const StatusOutcome&)> done) {
  post([this, id, done = std::move(done)] {
    if (!send(protocol::to_wire(protocol::Status{id}))) {
      done(unavailable("no broker at " + endpoints_.frontend, id));
      return;
    }
    status_waiters_.emplace(id, std::make_pair(steady_now_ms() + kAnswerTimeoutMs, done));
  });
}

void BrokerLink::models(std::function<void(const ModelsOutcome&)> done) {
  post([this, done = std::move(done)] {
    if (!send(protocol::to_wire(protocol::Models{}))) {
      done(unavailable("no broker at " + endpoints_.frontend));
      return;
    }
    models_waiters_.emplace_back(steady_now_ms() + kAnswerTimeoutMs, done);
  });
}

void BrokerLink::finish_job(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  if (it->second->watched) sub_.set(zmq::sockopt::unsubscribe, protocol::stream_topic(id));
  jobs_.erase(it);
}

void BrokerLink::fail_job(const std::string& id, const protocol::ErrorReply& error) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  const std::shared_ptr<JobListener> listener = it->second->listener;
  finish_job(id);
  listener->failed(error);
}

void BrokerLink::deliver(const protocol::Event& event) {
  auto it = jobs_.find(event.id);
  if (it == jobs_.end()) return;  // a job forgotten, or another producer's on the stream socket
  TrackedJob& job = *it->second;
  job.answer_deadline_ms = 0;  // an event answers a REPLAY (and proves a SUBMIT was taken)
  if (event.seq < job.next_seq) return;  // seen already (replayed and published both)
  if (event.seq > job.next_seq) {
    job.early.emplace(event.seq, event);
    return;
  }
  const std::shared_ptr<JobListener> listener = job.listener;
  const std::string id = event.id;
  listener->event(event);
  ++job.next_seq;
  bool final = event.final_result.has_value();
  while (!final) {
    auto next = job.early.find(job.next_seq);
    if (next == job.early.end()) break;
    listener->event(next->second);
    final = next->second.final_result.has_value();
    ++job.next_seq;
    job.early.erase(next);
  }
  if (final) finish_job(id);
}

void BrokerLink::handle(const protocol::WireMessage& message) {
  using protocol::MessageType;
  switch (message.type) {
    case MessageType::kAccepted: {
      const auto reply = protocol::from_wire<protocol::Accepted>(message);
      auto it = jobs_.find(reply.id);
      if (it == jobs_.end()) return;
      it->second->answer_deadline_ms = 0;
      it->second->listener->accepted();
      return;
    }
    case MessageType::kRejected: {
      const auto reply = protocol::from_wire<protocol::Rejected>(message);
      auto it = jobs_.find(reply.id);
      if (it == jobs_.end()) return;
      const std::shared_ptr<JobListener> listener = it->second->listener;
      finish_job(reply.id);
      listener->rejected(reply);
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
      if (jobs_.count(*reply.id)) fail_job(*reply.id, reply);
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

void BrokerLink::expire_answers(std::int64_t now_ms) {
  const std::string no_answer = "the broker at " + endpoints_.frontend + " did not answer in time";
  std::vector<std::string> late;
  for (const auto& [id, job] : jobs_) {
    if (job->answer_deadline_ms != 0 && now_ms > job->answer_deadline_ms) late.push_back(id);
  }
  for (const std::string& id : late) fail_job(id, unavailable(no_answer, id));
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

void BrokerLink::run() {
  while (!stopping_) {
    zmq::pollitem_t items[] = {{dealer_.handle(), 0, ZMQ_POLLIN, 0},
                               {sub_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    zmq::poll(items, 3, std::chrono::milliseconds(kPollIntervalMs));
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
    // Everything waiting on each socket, so one busy job cannot starve the rest.
    while (auto frames = receive_frames(dealer_, 0)) {
      try {
        handle(protocol::from_frames(frame_views(*frames)));
      } catch (const Error& e) {
        spdlog::warn("broker {} sent a message that breaks the protocol: {}", endpoints_.frontend, e.what());
      }
    }
    while (auto frames = receive_frames(sub_, 0)) {
      try {
        deliver(protocol::from_stream_frames(frame_views(*frames)));
      } catch (const Error& e) {
        spdlog::warn("broker stream {} sent a message that breaks the protocol: {}", endpoints_.stream, e.what());
      }
    }
    expire_answers(steady_now_ms());
  }
}

}  // namespace flashq::gateway
