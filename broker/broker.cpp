#include "broker/broker.h"

#include <algorithm>
#include <array>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

#include "shared/curve/curve_allow_list.h"
#include "shared/curve/curve_keys.h"
#include "shared/curve/curve_socket.h"
#include "broker/redis/redis_url.h"
#include "shared/error.h"
#include "shared/protocol/limits.h"

namespace flashq {
namespace {

using protocol::FinishReason;
using protocol::MessageType;

int64_t ms_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

void configure_router(zmq::socket_t& socket, int high_water_mark) {
  socket.set(zmq::sockopt::router_mandatory, 1);
  socket.set(zmq::sockopt::sndhwm, high_water_mark);
  socket.set(zmq::sockopt::rcvhwm, high_water_mark);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, protocol::kMaxFrameBytes);
}

void bind_or_throw(zmq::socket_t& socket, const std::string& endpoint) {
  try {
    socket.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw Error(ErrorCode::kIo, "cannot bind " + endpoint + ": " + e.what());
  }
}

// CURVE on the given sockets, with the ZAP handler bound first: a handshake that finds no handler
// is let through. An open CURVE server (no allow-list) would take any key, so it is refused.
std::unique_ptr<ZapHandler> secure_with_curve(zmq::context_t& context, const BrokerOptions& options,
                                              std::initializer_list<zmq::socket_t*> sockets) {
  if (options.curve_secret_key.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "--curve-allowed-keys needs --curve-secret-key (the broker's own key)");
  }
  if (options.curve_allowed_keys.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "--curve-secret-key needs --curve-allowed-keys: without an allow-list any client key would get in");
  }
  check_curve_available();
  const std::string secret_key = load_curve_key(options.curve_secret_key, "--curve-secret-key");
  std::set<std::string> allowed = load_curve_allow_list(options.curve_allowed_keys);
  spdlog::info("broker: CURVE on; public key {}, {} client keys allowed", curve_public_key_of(secret_key),
               allowed.size());
  auto zap = std::make_unique<ZapHandler>(context, std::move(allowed));
  for (zmq::socket_t* socket : sockets) make_curve_server(*socket, secret_key);
  return zap;
}

std::string new_job_id(uint64_t number) {
  static const uint64_t salt = std::random_device{}();
  char text[40];
  std::snprintf(text, sizeof text, "job-%012llx-%llu", static_cast<unsigned long long>(salt & 0xffffffffffffull),
                static_cast<unsigned long long>(number));
  return text;
}

protocol::FinalResult final_with(FinishReason reason, std::optional<std::string> error = std::nullopt) {
  protocol::FinalResult result;
  result.finish_reason = reason;
  result.error = std::move(error);
  return result;
}

}  // namespace

int64_t estimate_prompt_tokens(const protocol::Job& job) {
  if (const auto* text = std::get_if<std::string>(&job.prompt)) return static_cast<int64_t>(text->size()) / 4 + 1;
  if (const auto* ids = std::get_if<protocol::TokenIds>(&job.prompt)) return static_cast<int64_t>(ids->size());
  int64_t bytes = 0;
  for (const auto& m : std::get<std::vector<protocol::ChatMessage>>(job.prompt)) bytes += static_cast<int64_t>(m.content.size());
  return bytes / 4 + 1;
}

Broker::Broker(zmq::context_t& context, BrokerOptions options)
    : options_(std::move(options)),
      frontend_(context, zmq::socket_type::router),
      backend_(context, zmq::socket_type::router),
      stream_(context, zmq::socket_type::xpub),
      queue_(options_.queue) {
  configure_router(frontend_, options_.send_high_water_mark);
  configure_router(backend_, options_.send_high_water_mark);
  stream_.set(zmq::sockopt::sndhwm, options_.send_high_water_mark);
  stream_.set(zmq::sockopt::linger, 0);
  stream_.set(zmq::sockopt::maxmsgsize, protocol::kMaxSubscriptionBytes);
  if (!options_.curve_secret_key.empty() || !options_.curve_allowed_keys.empty()) {
    zap_ = secure_with_curve(context, options_, {&frontend_, &backend_, &stream_});
  }
  bind_or_throw(frontend_, options_.frontend);
  bind_or_throw(backend_, options_.backend);
  bind_or_throw(stream_, options_.stream);
  if (!options_.http.empty()) http_ = std::make_unique<HttpEndpoint>(options_.http, metrics_);
  if (!options_.redis.url.empty()) {
    if (options_.redis.consumer.empty()) options_.redis.consumer = default_redis_consumer(frontend_endpoint());
    redis_ = std::make_unique<RedisConnection>(parse_redis_url(options_.redis.url));
    for (const std::string& script : redis_schema::scripts()) redis_->register_script(script);
    spdlog::info("broker: redis {} as consumer '{}'", redis_->url().describe(), options_.redis.consumer);
  }
}

std::string Broker::frontend_endpoint() const { return frontend_.get(zmq::sockopt::last_endpoint); }
std::string Broker::backend_endpoint() const { return backend_.get(zmq::sockopt::last_endpoint); }
std::string Broker::stream_endpoint() const { return stream_.get(zmq::sockopt::last_endpoint); }

void Broker::run(const std::atomic<bool>& stop) {
  SteadyClock::time_point drain_started;
  while (true) {
    if (stop.load() && !draining_) {
      draining_ = true;
      drain_started = SteadyClock::now();
      spdlog::info("broker draining: no new jobs");
    }
    if (draining_) {
      // With Redis, queued jobs stay pending there for another broker (or our restart) to take.
      const bool durable = redis_ != nullptr;
      const bool busy = std::any_of(jobs_.begin(), jobs_.end(), [durable](const auto& entry) {
        const JobPhase phase = entry.second.phase;
        return phase == JobPhase::kRunning || (phase == JobPhase::kQueued && !durable);
      });
      if (!busy) break;
      if (ms_between(drain_started, SteadyClock::now()) > options_.drain_timeout_ms) {
        for (auto& [id, job] : jobs_) {
          if (durable || job.phase == JobPhase::kFinished || job.phase == JobPhase::kRemote) continue;
          finish(job, final_with(FinishReason::kError, "broker shut down"));
        }
        break;
      }
    }
    // With Redis, replies wake the loop too; and it reads the intake stream, so it comes round often.
    const int redis_fd = redis_ ? redis_->fd() : -1;
    zmq::pollitem_t items[] = {{frontend_.handle(), 0, ZMQ_POLLIN, 0},
                               {backend_.handle(), 0, ZMQ_POLLIN, 0},
                               {stream_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, redis_fd, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, redis_fd >= 0 ? 4 : 3, std::chrono::milliseconds(redis_ ? 5 : 50));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // a signal (SIGTERM starts the drain): look at `stop` again
    }
    if (items[0].revents & ZMQ_POLLIN) serve_frontend();
    if (items[1].revents & ZMQ_POLLIN) serve_backend();
    if (items[2].revents & ZMQ_POLLIN) {
      zmq::message_t subscription;
      while (stream_.recv(subscription, zmq::recv_flags::dontwait)) on_subscription(subscription);
    }
    check_timers();
    redis_turn();
  }
  for (const auto& [identity, worker] : workers_.all()) send_to(backend_, identity, protocol::Disconnect{});
  // Finals and events not yet in Redis: a last try, for as long as a drain may take.
  while (!redis_events_.empty()) redis_store_events(redis_events_.begin()->first);
  const auto give_up = SteadyClock::now() + std::chrono::milliseconds(options_.drain_timeout_ms);
  while (redis_ && redis_pipeline_.retained() > 0 && SteadyClock::now() < give_up) {
    if (redis_->ensure_connected() && redis_pipeline_.flush(*redis_)) continue;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool Broker::send(zmq::socket_t& socket, const std::string& identity, const protocol::WireMessage& message) {
  std::vector<zmq::const_buffer> frames;
  std::vector<std::string> parts = protocol::to_frames(message);
  frames.push_back(zmq::buffer(identity));
  for (const std::string& part : parts) frames.push_back(zmq::buffer(part));
  try {
    return zmq::send_multipart(socket, frames, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    return false;  // EHOSTUNREACH: the peer is gone; its loss is found by other means
  }
}

void Broker::serve_frontend() {
  for (int budget = 0; budget < 1000; ++budget) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(frontend_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    const std::string producer = parts.empty() ? std::string() : parts[0].to_string();
    std::vector<std::string_view> frames;
    for (size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string_view());
    try {
      protocol::WireMessage message = protocol::from_frames(frames);
      switch (message.type) {
        case MessageType::kSubmit: on_submit(producer, protocol::from_wire<protocol::Submit>(message)); break;
        case MessageType::kCancel: on_cancel(producer, protocol::from_wire<protocol::Cancel>(message)); break;
        case MessageType::kStatus: on_status(producer, protocol::from_wire<protocol::Status>(message)); break;
        case MessageType::kReplay: on_replay(producer, protocol::from_wire<protocol::Replay>(message)); break;
        case MessageType::kHeartbeat: break;
        default:
          throw Error(ErrorCode::kProtocol, std::string(protocol::message_type_name(message.type)) +
                                                " is not a message producers send");
      }
    } catch (const Error& e) {
      send_to(frontend_, producer, protocol::error_reply(e));
    }
  }
}

void Broker::on_submit(const std::string& producer, protocol::Submit submit) {
  protocol::Job& job = submit.job;
  if (job.id.empty()) job.id = new_job_id(++next_job_number_);
  auto existing = jobs_.find(job.id);
  if (existing != jobs_.end()) {  // idempotent: the same id is the same job
    send_to(frontend_, producer, protocol::Accepted{job.id});
    if (existing->second.final_result) {
      protocol::Event last{.id = job.id, .seq = existing->second.next_seq - 1, .final_result = existing->second.final_result};
      send_to(frontend_, producer, last);
    }
    return;
  }
  if (draining_) {
    send_to(frontend_, producer, protocol::Rejected{job.id, "shutting_down", 0});
    metrics_.job_rejected("shutting_down");
    return;
  }
  if (job.deadline_ms < 0 || job.deadline_ms > options_.max_deadline_ms) {
    send_to(frontend_, producer, protocol::Rejected{job.id, "bad_deadline", 0});
    metrics_.job_rejected("bad_deadline");
    return;
  }
  if (redis_) {
    redis_submit(producer, std::move(job));  // into flashq:jobs; any broker may run it
    return;
  }
  const int64_t prompt_tokens = estimate_prompt_tokens(job);
  if (!queue_.push_back(job.id, job.priority, prompt_tokens)) {
    send_to(frontend_, producer, protocol::Rejected{job.id, "overloaded", options_.retry_after_ms});
    metrics_.job_rejected("overloaded");
    return;
  }
  const auto now = SteadyClock::now();
  JobRecord record;
  record.producer = producer;
  record.prompt_tokens_estimate = prompt_tokens;
  record.submitted_at = now;
  record.deadline_at = now + std::chrono::milliseconds(job.deadline_ms > 0 ? job.deadline_ms : options_.default_deadline_ms);
  const std::string id = job.id;
  record.job = std::move(job);
  jobs_.emplace(id, std::move(record));
  send_to(frontend_, producer, protocol::Accepted{id});
  metrics_.job_admitted();
  dispatch();
}

void Broker::on_cancel(const std::string& producer, const protocol::Cancel& cancel) {
  auto it = jobs_.find(cancel.id);
  if (redis_ && (it == jobs_.end() || it->second.phase == JobPhase::kRemote)) {
    redis_cancel(producer, cancel.id);  // the broker that runs it hears of it through Redis
    return;
  }
  if (it == jobs_.end()) {
    send_to(frontend_, producer, protocol::ErrorReply{"not_found", "no job '" + cancel.id + "'", cancel.id});
    return;
  }
  cancel_job(it->second);
}

// A queued job ends now; a running one when its worker has stopped it (its FINAL says cancelled).
void Broker::cancel_job(JobRecord& job) {
  if (job.phase == JobPhase::kQueued) {
    queue_.remove(job.job.id);
    finish(job, final_with(FinishReason::kCancelled));
  } else if (job.phase == JobPhase::kRunning && !job.cancel_requested) {
    job.cancel_requested = true;
    send_to(backend_, job.worker, protocol::Cancel{job.job.id});
  }
}

// A subscriber's first subscription to a job this broker knows nothing of: with Redis, the job may
// run on another broker (or be submitted there later), and its stream is relayed from there (from
// its start: the subscriber may be late). The last subscriber leaving ends the wait for a job
// that never came. Without Redis there is nothing to follow.
void Broker::on_subscription(const zmq::message_t& subscription) {
  const std::string_view message = subscription.to_string_view();
  if (!redis_ || message.size() <= 1 || message[0] > 1) return;
  const bool subscribed = message[0] == 1;
  const std::string_view topic = message.substr(1);
  if (topic.substr(0, protocol::kStreamTopicPrefix.size()) != protocol::kStreamTopicPrefix) return;
  const std::string id(topic.substr(protocol::kStreamTopicPrefix.size()));
  if (!subscribed) {
    redis_awaited_.erase(id);
  } else if (protocol::is_valid_id(id) && !jobs_.count(id)) {
    if (redis_awaited_.size() < kMaxAwaitedSubscriptions) redis_awaited_.insert(id);
    redis_follow(id);
  }
}

void Broker::on_status(const std::string& producer, const protocol::Status& status) {
  protocol::StatusReply reply{.id = status.id};
  auto it = jobs_.find(status.id);
  if ((it == jobs_.end() || it->second.phase == JobPhase::kRemote) && redis_status(producer, status)) return;
  if (it != jobs_.end()) {
    const JobRecord& job = it->second;
    reply.state = job.phase == JobPhase::kQueued    ? protocol::JobState::kQueued
                  : job.phase == JobPhase::kRunning ? protocol::JobState::kRunning
                                                    : protocol::JobState::kFinished;
    reply.attempt = job.attempt;
    reply.seq = job.next_seq;
    reply.final_result = job.final_result;
  }
  send_to(frontend_, producer, reply);
}

void Broker::on_replay(const std::string& producer, const protocol::Replay& replay) {
  auto it = jobs_.find(replay.id);
  const bool held_here = it != jobs_.end() && replay.from_seq >= it->second.replay_first_seq;
  if (!held_here && redis_replay(producer, replay)) return;
  if (it == jobs_.end()) {
    send_to(frontend_, producer, protocol::ErrorReply{"not_found", "no job '" + replay.id + "'", replay.id});
    return;
  }
  JobRecord& job = it->second;
  if (replay.from_seq < job.replay_first_seq) {
    send_to(frontend_, producer,
            protocol::ErrorReply{"replay_unavailable",
                                 "job '" + replay.id + "': events are kept from seq " +
                                     std::to_string(job.replay_first_seq) + " on",
                                 replay.id});
    return;
  }
  // Only events delivered are kept: with Redis, the newest may still be on their way there.
  for (size_t i = static_cast<size_t>(replay.from_seq - job.replay_first_seq); i < job.replay.size(); ++i) {
    send(frontend_, producer, {protocol::MessageType::kEvent, job.replay[i]});
  }
}

void Broker::keep_for_replay(JobRecord& job, std::string body) {
  replay_bytes_ += static_cast<int64_t>(body.size());
  job.replay.push_back(std::move(body));
  if (static_cast<int64_t>(job.replay.size()) > options_.replay_events_per_job) {
    replay_bytes_ -= static_cast<int64_t>(job.replay.front().size());
    job.replay.pop_front();
    ++job.replay_first_seq;
  }
  // Over the total: the oldest finished jobs lose their replay first.
  for (const std::string& id : finished_order_) {
    if (replay_bytes_ <= options_.replay_bytes_total) break;
    JobRecord& old = jobs_.at(id);
    for (const std::string& kept : old.replay) replay_bytes_ -= static_cast<int64_t>(kept.size());
    old.replay_first_seq = old.next_seq;
    old.replay.clear();
  }
}

void Broker::serve_backend() {
  for (int budget = 0; budget < 1000; ++budget) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(backend_, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
    const std::string identity = parts.empty() ? std::string() : parts[0].to_string();
    std::vector<std::string_view> frames;
    for (size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string_view());
    try {
      protocol::WireMessage message = protocol::from_frames(frames);
      if (message.type == MessageType::kReady) {
        on_ready(identity, protocol::from_wire<protocol::Ready>(message));
        continue;
      }
      WorkerRecord* worker = workers_.find(identity);
      if (!worker) {  // traffic from a worker we do not know (e.g. after our restart): re-register
        send_to(backend_, identity, protocol::Disconnect{});
        continue;
      }
      worker->last_seen = SteadyClock::now();  // any message counts as a heartbeat
      switch (message.type) {
        case MessageType::kHeartbeat: (void)protocol::from_wire<protocol::WorkerHeartbeat>(message); break;
        case MessageType::kTokens: on_tokens(*worker, protocol::from_wire<protocol::Tokens>(message)); break;
        case MessageType::kFinal: on_final(*worker, protocol::from_wire<protocol::Final>(message)); break;
        case MessageType::kDisconnect: lose_worker(identity, "it disconnected"); break;
        default:
          throw Error(ErrorCode::kProtocol, std::string(protocol::message_type_name(message.type)) +
                                                " is not a message workers send");
      }
    } catch (const Error& e) {
      // docs/protocol.md 9.3: a registered worker that breaks the protocol is not trusted with jobs.
      spdlog::warn("backend: bad message from a worker: {}", e.what());
      send_to(backend_, identity, protocol::error_reply(e));
      if (workers_.find(identity)) {
        send_to(backend_, identity, protocol::Disconnect{});
        lose_worker(identity, std::string("malformed message: ") + e.what());
      }
    }
  }
}

void Broker::on_ready(const std::string& identity, protocol::Ready ready) {
  if (ready.slots <= 0 || ready.slots > 4096) {
    throw Error(ErrorCode::kProtocol, "READY slots must be in 1..4096, got " + std::to_string(ready.slots));
  }
  if (workers_.find(identity)) lose_worker(identity, "it registered again");  // it restarted: its jobs are gone
  spdlog::info("worker {} ready: model {}, {} slots, backend {}", ready.worker_id, ready.model, ready.slots, ready.backend);
  workers_.add(identity, std::move(ready), SteadyClock::now());
  dispatch();
}

void Broker::on_tokens(WorkerRecord& worker, const protocol::Tokens& tokens) {
  auto it = jobs_.find(tokens.id);
  if (it == jobs_.end()) return;
  JobRecord& job = it->second;
  // Late traffic of an attempt we already gave up on is dropped: subscribers see one stream.
  if (job.phase != JobPhase::kRunning || job.worker != worker.identity || job.attempt != tokens.attempt) return;
  if (tokens.seq != job.worker_seq) {
    // A gap loses this attempt (docs/protocol.md 9.5): cancel it and continue from what arrived.
    spdlog::warn("job {}: TOKENS seq {} from worker {}, expected {}; re-queueing", job.job.id, tokens.seq,
                 worker.ready.worker_id, job.worker_seq);
    send_to(backend_, worker.identity, protocol::Cancel{job.job.id});
    worker.jobs.erase(job.job.id);
    requeue_as_continuation(job);
    dispatch();
    return;
  }
  job.worker_seq = tokens.seq + 1;
  const auto now = SteadyClock::now();
  if (!tokens.token_ids.empty()) {
    const bool first = !job.first_token_at;
    if (first) job.first_token_at = now;
    const auto since = first ? job.submitted_at : job.last_token_at;
    metrics_.token_event(static_cast<int64_t>(tokens.token_ids.size()), first,
                         std::chrono::duration<double>(now - since).count());
    job.last_token_at = now;
  }
  job.streamed.insert(job.streamed.end(), tokens.token_ids.begin(), tokens.token_ids.end());
  job.streamed_text_bytes += static_cast<int64_t>(tokens.text.size());
  publish(job, protocol::Event{.id = job.job.id, .token_ids = tokens.token_ids, .text = tokens.text});
}

void Broker::on_final(WorkerRecord& worker, const protocol::Final& final_message) {
  auto it = jobs_.find(final_message.id);
  if (it == jobs_.end()) return;
  JobRecord& job = it->second;
  if (job.phase != JobPhase::kRunning || job.worker != worker.identity || job.attempt != final_message.attempt) return;
  worker.jobs.erase(job.job.id);
  protocol::FinalResult result = final_message.result;
  if (job.deadline_expired && result.finish_reason == FinishReason::kCancelled) result.finish_reason = FinishReason::kDeadline;
  // Figures for the whole job, across attempts, as the producer sees it.
  const auto now = SteadyClock::now();
  result.usage.completion_tokens = static_cast<int64_t>(job.streamed.size());
  result.timings.queue_ms = ms_between(job.submitted_at, job.first_assigned_at) + result.timings.queue_ms;
  result.timings.ttft_ms = job.first_token_at ? ms_between(job.submitted_at, *job.first_token_at) : 0;
  result.timings.total_ms = ms_between(job.submitted_at, now);
  metrics_.speculation(result.spec_stats.draft_steps, result.spec_stats.accepted_tokens);
  finish(job, std::move(result));
  dispatch();
}

// Jobs in queue order, each to the least-loaded worker serving its model; a job whose model no
// free worker serves waits without holding up the jobs behind it.
void Broker::dispatch() {
  while (!queue_.empty() && workers_.least_loaded()) {
    WorkerRecord* worker = nullptr;
    const std::optional<std::string> id = queue_.pop_first([&](const std::string& candidate) {
      worker = workers_.least_loaded(jobs_.at(candidate).job.model);
      return worker != nullptr;
    });
    if (!id) return;
    JobRecord& job = jobs_.at(*id);
    job.phase = JobPhase::kRunning;
    job.worker = worker->identity;
    job.worker_seq = 0;
    job.attempt += 1;
    if (job.attempt == 1) job.first_assigned_at = SteadyClock::now();
    protocol::Assign assign{.job = job.job,
                            .attempt = job.attempt,
                            .resume_tokens = job.streamed,
                            .resume_text_bytes = job.streamed_text_bytes};
    assign.job.deadline_ms = std::max<int64_t>(1, ms_between(SteadyClock::now(), job.deadline_at));
    worker->jobs.insert(*id);
    if (redis_) redis_pipeline_.add(redis_schema::mark_running(*id, job.attempt), nullptr, RedisPipeline::OnFailure::kDrop);
    if (!send_to(backend_, worker->identity, assign)) {
      lose_worker(worker->identity, "it cannot be reached");
    }
  }
}

void Broker::check_timers() {
  const auto now = SteadyClock::now();
  // Timers need millisecond resolution, not a scan of every job after every burst of messages.
  if (now - last_timer_check_ < std::chrono::milliseconds(10)) return;
  last_timer_check_ = now;
  if (ms_between(last_heartbeat_sent_, now) >= options_.heartbeat_ms) {
    last_heartbeat_sent_ = now;
    for (const auto& [identity, worker] : workers_.all()) send_to(backend_, identity, protocol::BrokerHeartbeat{});
  }
  const auto oldest_allowed = now - std::chrono::milliseconds(options_.heartbeat_ms * options_.liveness);
  for (const std::string& identity : workers_.expired(oldest_allowed)) lose_worker(identity, "its heartbeats stopped");

  for (auto& [id, job] : jobs_) {
    // A remote job's deadline is its owner's to enforce.
    if (job.phase == JobPhase::kFinished || job.phase == JobPhase::kRemote || job.deadline_at > now) continue;
    if (job.phase == JobPhase::kQueued) {
      queue_.remove(id);
      finish(job, final_with(FinishReason::kDeadline));
    } else if (!job.deadline_expired) {
      job.deadline_expired = true;  // the worker's cancelled FINAL becomes `deadline`
      send_to(backend_, job.worker, protocol::Cancel{id});
    } else if (now > job.deadline_at + std::chrono::seconds(1)) {
      // docs/protocol.md 9.4: a worker that does not answer the cancel does not hold the job open.
      send_to(backend_, job.worker, protocol::Cancel{id});
      finish(job, final_with(FinishReason::kDeadline));
    }
  }
  forget_old_jobs();
  update_gauges();
}

void Broker::update_gauges() {
  BrokerGauges gauges;
  for (const auto& [priority, ids] : queue_.levels()) gauges.queue_depth[priority] = static_cast<int64_t>(ids.size());
  gauges.queued_prompt_tokens = queue_.prompt_tokens();
  for (const auto& [identity, worker] : workers_.all()) {
    gauges.jobs_running += static_cast<int64_t>(worker.jobs.size());
    gauges.worker_slots += worker.ready.slots;
  }
  gauges.workers = static_cast<int64_t>(workers_.all().size());
  gauges.draining = draining_;
  if (redis_) gauges.redis_connected = redis_ready_;
  metrics_.set_gauges(std::move(gauges));
}

void Broker::lose_worker(const std::string& identity, const std::string& why) {
  WorkerRecord* worker = workers_.find(identity);
  if (!worker) return;
  // A worker that says goodbye with nothing running is routine; anything else deserves a warning.
  const auto level = worker->jobs.empty() && why == "it disconnected" ? spdlog::level::info : spdlog::level::warn;
  spdlog::log(level, "worker {} lost: {}; re-queueing {} jobs", worker->ready.worker_id, why, worker->jobs.size());
  for (const std::string& id : workers_.remove(identity)) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.phase == JobPhase::kRunning) requeue_as_continuation(it->second);
  }
  dispatch();
}

void Broker::requeue_as_continuation(JobRecord& job) {
  job.worker.clear();
  if (job.cancel_requested) {
    finish(job, final_with(FinishReason::kCancelled));
    return;
  }
  if (job.attempt >= options_.max_attempts) {
    job.dead_reason = "its worker was lost " + std::to_string(job.attempt) + " times";
    finish(job, final_with(FinishReason::kError, "the job's worker was lost " + std::to_string(job.attempt) + " times"));
    return;
  }
  job.phase = JobPhase::kQueued;
  metrics_.job_retried();
  queue_.push_front(job.job.id, job.job.priority, job.prompt_tokens_estimate + static_cast<int64_t>(job.streamed.size()));
}

void Broker::finish(JobRecord& job, protocol::FinalResult result) {
  job.phase = JobPhase::kFinished;
  if (!job.worker.empty()) {
    if (WorkerRecord* worker = workers_.find(job.worker)) worker->jobs.erase(job.job.id);
    job.worker.clear();
  }
  job.final_result = result;
  metrics_.job_finished(std::string(protocol::finish_reason_name(result.finish_reason)));
  publish(job, protocol::Event{.id = job.job.id, .final_result = std::move(result)});
  finished_order_.push_back(job.job.id);
}

void Broker::publish(JobRecord& job, protocol::Event event, bool store) {
  event.seq = job.next_seq++;
  if (redis_ && store) {
    event.final_result ? redis_final(job, std::move(event)) : redis_event(job, std::move(event));
    return;
  }
  deliver(job, event);
}

void Broker::deliver(JobRecord& job, const protocol::Event& event) {
  if (redis_) {  // only stored events are delivered: the stored prefix grows
    job.stored_next_seq = event.seq + 1;
    job.stored_tokens += event.token_ids.size();
    job.stored_text_bytes += static_cast<int64_t>(event.text.size());
  }
  // Encoded once, for the stream socket and for the submitter.
  const protocol::WireMessage wire = protocol::to_wire(event);
  const std::string topic = protocol::stream_topic(job.job.id);
  const std::string type(1, static_cast<char>(wire.type));
  const std::array<zmq::const_buffer, 4> frames = {zmq::buffer(topic), zmq::buffer(protocol::kProtocolTag),
                                                   zmq::buffer(type), zmq::buffer(wire.body)};
  (void)zmq::send_multipart(stream_, frames, zmq::send_flags::dontwait);  // XPUB drops for slow subscribers
  // The submitter gets every event when it asked to stream, and always the final one.
  if (!job.producer.empty() && (job.job.stream || event.final_result)) send(frontend_, job.producer, wire);
  keep_for_replay(job, wire.body);
}

void Broker::forget_old_jobs() {
  while (static_cast<int64_t>(finished_order_.size()) > options_.finished_jobs_kept) {
    for (const std::string& kept : jobs_.at(finished_order_.front()).replay) replay_bytes_ -= static_cast<int64_t>(kept.size());
    jobs_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

}  // namespace flashq
