#include "broker/broker.h"

#include <algorithm>
#include <random>

#include <spdlog/spdlog.h>

#include "broker/cache_aware_dispatcher.h"
#include "broker/in_memory_job_store.h"
#include "broker/redis/redis_job_store.h"
#include "shared/curve/curve_allow_list.h"
#include "shared/curve/curve_keys.h"
#include "shared/curve/curve_socket.h"
#include "shared/error.h"

namespace flashq {
namespace {

using protocol::FinishReason;
using protocol::MessageType;

// How many messages one socket may hand the loop per turn before the others get theirs.
constexpr int kReceiveBudget = 1000;

int64_t ms_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// A figure of the final (docs/protocol.md: never negative). Its times come from one steady clock,
// or from Redis's clock for a job taken over from the store, so `to` is never before `from`
// unless that clock stepped back; such a figure is 0, not a message the peer must refuse.
int64_t elapsed_ms(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::max<int64_t>(0, ms_between(from, to));
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

}  // namespace

Broker::Broker(zmq::context_t& context, BrokerOptions options)
    : options_(std::move(options)),
      frontend_(context, zmq::socket_type::router),
      backend_(context, zmq::socket_type::router),
      fanout_(context, options_, frontend_, jobs_),
      queue_(options_.queue),
      // With Redis a model another broker's workers serve is served (docs/redis.md).
      models_(options_.unknown_model_grace_ms, SteadyClock::now(), !options_.redis.url.empty()),
      dispatcher_(options_.routing.cache_aware
                      ? std::unique_ptr<Dispatcher>(std::make_unique<CacheAwareDispatcher>(options_.routing))
                      : std::make_unique<LeastLoadedDispatcher>()) {
  configure_router(frontend_, options_.send_high_water_mark);
  configure_router(backend_, options_.send_high_water_mark);
  if (!options_.curve_secret_key.empty() || !options_.curve_allowed_keys.empty()) {
    zap_ = secure_with_curve(context, options_, {&frontend_, &backend_, &fanout_.socket()});
  }
  bind_or_throw(frontend_, options_.frontend);
  bind_or_throw(backend_, options_.backend);
  bind_or_throw(fanout_.socket(), options_.stream);
  if (!options_.http.empty()) http_ = std::make_unique<HttpEndpoint>(
        options_.http, HttpPages{[this] { return metrics_.render(); }, [this] { return metrics_.ready(); }});
  if (options_.redis.url.empty()) {
    store_ = std::make_unique<InMemoryJobStore>();
  } else {
    store_ = std::make_unique<RedisJobStore>(options_, frontend_endpoint());
  }
}

std::string Broker::frontend_endpoint() const { return frontend_.get(zmq::sockopt::last_endpoint); }
std::string Broker::backend_endpoint() const { return backend_.get(zmq::sockopt::last_endpoint); }
std::string Broker::stream_endpoint() const { return fanout_.endpoint(); }

void Broker::run(const std::atomic<bool>& stop) {
  SteadyClock::time_point drain_started;
  while (true) {
    if (stop.load() && !draining_) {
      draining_ = true;
      drain_started = SteadyClock::now();
      spdlog::info("broker draining: no new jobs");
    }
    if (draining_) {
      // A durable store keeps queued jobs pending for another broker (or our restart) to take.
      const bool durable = store_->keeps_queued_jobs();
      const bool busy = std::any_of(jobs_.jobs.begin(), jobs_.jobs.end(), [durable](const auto& entry) {
        const JobPhase phase = entry.second.phase;
        return phase == JobPhase::kRunning || (phase == JobPhase::kQueued && !durable);
      });
      if (!busy) break;
      if (ms_between(drain_started, SteadyClock::now()) > options_.drain_timeout_ms) {
        for (auto& [id, job] : jobs_.jobs) {
          if (durable || job.phase == JobPhase::kFinished || job.phase == JobPhase::kRemote) continue;
          finish(job, final_with(FinishReason::kError, "broker shut down"));
        }
        break;
      }
    }
    // The store's socket wakes the loop too (replies), and the store may need the loop to come
    // round sooner than timers would.
    const int store_fd = store_->poll_fd();
    zmq::pollitem_t items[] = {{frontend_.handle(), 0, ZMQ_POLLIN, 0},
                               {backend_.handle(), 0, ZMQ_POLLIN, 0},
                               {fanout_.socket().handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, store_fd, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, store_fd >= 0 ? 4 : 3, store_->poll_timeout());
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // a signal (SIGTERM starts the drain): look at `stop` again
    }
    if (items[0].revents & ZMQ_POLLIN) serve_frontend();
    if (items[1].revents & ZMQ_POLLIN) serve_backend();
    if (items[2].revents & ZMQ_POLLIN) {
      // A job held here is streamed from here; the store looks for the others.
      fanout_.receive_subscriptions([this](const std::string& id, bool subscribed) {
        if (!subscribed || !jobs_.contains(id)) store_->subscription_changed(id, subscribed);
      });
    }
    check_timers();
    // What the store's replies said, then its requests: the store reads its intake by the room
    // left after what it reported was applied.
    apply(store_->collect());
    store_->turn(store_->keeps_queued_jobs() ? store_turn() : StoreTurn{});
    note_store_state();
  }
  for (const auto& [identity, worker] : workers_.all()) send_to_peer(backend_, identity, protocol::Disconnect{});
  // Finals and events not yet stored: a last try, for as long as a drain may take. What their
  // replies bring (finals kept) still goes out, and may add writes of its own.
  const auto give_up = SteadyClock::now() + std::chrono::milliseconds(options_.drain_timeout_ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - SteadyClock::now());
    StoreOutcomes outcomes = store_->flush(std::max(std::chrono::milliseconds(0), left));
    if (outcomes.empty()) break;
    apply(std::move(outcomes));
    if (SteadyClock::now() >= give_up) break;
  }
}

void Broker::serve_frontend() {
  receive_from_peers(
      frontend_, kReceiveBudget,
      [this](const std::string& producer, protocol::WireMessage message) {
        switch (message.type) {
          case MessageType::kSubmit: on_submit(producer, protocol::from_wire<protocol::Submit>(message)); break;
          case MessageType::kCancel: on_cancel(producer, protocol::from_wire<protocol::Cancel>(message)); break;
          case MessageType::kStatus: on_status(producer, protocol::from_wire<protocol::Status>(message)); break;
          case MessageType::kReplay: on_replay(producer, protocol::from_wire<protocol::Replay>(message)); break;
          case MessageType::kModels:
            (void)protocol::from_wire<protocol::Models>(message);  // strict: an empty map
            reply_with(producer, served_models_reply(workers_));
            break;
          case MessageType::kHeartbeat: break;
          default:
            throw Error(ErrorCode::kProtocol, std::string(protocol::message_type_name(message.type)) +
                                                  " is not a message producers send");
        }
      },
      [this](const std::string& producer, const Error& e) { reply_with(producer, protocol::error_reply(e)); });
}

void Broker::on_submit(const std::string& producer, protocol::Submit submit) {
  protocol::Job& job = submit.job;
  if (job.id.empty()) job.id = new_job_id(++next_job_number_);
  if (const JobRecord* existing = jobs_.find(job.id)) {  // idempotent: the same id is the same job
    reply_with(producer, protocol::Accepted{job.id});
    if (existing->final_result) {
      reply_with(producer,
                 protocol::Event{.id = job.id, .seq = existing->next_seq - 1, .final_result = existing->final_result});
    }
    return;
  }
  if (draining_) {
    reply_with(producer, protocol::Rejected{job.id, "shutting_down", 0});
    metrics_.job_rejected("shutting_down");
    return;
  }
  if (job.deadline_ms < 0 || job.deadline_ms > options_.max_deadline_ms) {
    reply_with(producer, protocol::Rejected{job.id, "bad_deadline", 0});
    metrics_.job_rejected("bad_deadline");
    return;
  }
  if (std::optional<ModelRefusal> refusal = models_.refusal(job, workers_, SteadyClock::now())) {
    metrics_.job_rejected(refusal->reason);
    reply_with(producer, protocol::Rejected{job.id, refusal->reason, 0, refusal->message});
    return;
  }
  // Admitted here, or into a store any broker takes jobs from.
  if (std::optional<IntakeAnswer> answer = store_->submit(producer, std::move(job))) on_intake(std::move(*answer));
}

void Broker::on_intake(IntakeAnswer answer) {
  const std::string& producer = answer.producer;
  protocol::Job& job = answer.job;
  switch (answer.kind) {
    case IntakeAnswer::Kind::kAdmit: admit(producer, std::move(job)); return;
    case IntakeAnswer::Kind::kRefused:
      reply_with(producer, protocol::Rejected{job.id, "unavailable", options_.retry_after_ms});
      metrics_.job_rejected("unavailable");
      return;
    case IntakeAnswer::Kind::kFinished:  // idempotent resubmission of a finished job: its final again
      reply_with(producer, protocol::Accepted{job.id});
      if (answer.final_result) reply_with(producer, protocol::Event{.id = job.id, .final_result = answer.final_result});
      return;
    case IntakeAnswer::Kind::kStored: break;
  }
  reply_with(producer, protocol::Accepted{job.id});
  if (answer.first_time) metrics_.job_admitted();
  if (jobs_.contains(job.id)) return;
  // Run by whichever broker takes it; its producer is here, so its stream is relayed from the store.
  const auto now = SteadyClock::now();
  JobRecord record;
  record.producer = producer;
  record.submitted_at = now;
  record.deadline_at = now + std::chrono::milliseconds(job.deadline_ms > 0 ? job.deadline_ms : options_.default_deadline_ms);
  const std::string id = job.id;
  record.job = std::move(job);
  hold_remote(jobs_.jobs.emplace(id, std::move(record)).first->second);
}

void Broker::admit(const std::string& producer, protocol::Job job) {
  const int64_t prompt_tokens = estimate_prompt_tokens(job);
  if (!queue_.push_back(job.id, job.priority, prompt_tokens)) {
    reply_with(producer, protocol::Rejected{job.id, "overloaded", options_.retry_after_ms});
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
  jobs_.jobs.emplace(id, std::move(record));
  reply_with(producer, protocol::Accepted{id});
  metrics_.job_admitted();
  dispatch();
}

void Broker::on_cancel(const std::string& producer, const protocol::Cancel& request) {
  JobRecord* job = jobs_.find(request.id);
  // A job run elsewhere is cancelled by the broker that runs it, told through the store.
  if (!job || job->phase == JobPhase::kRemote) {
    const std::optional<RemoteCancel> answer = store_->cancel_elsewhere(request.id);
    apply_reported();
    if (answer) {
      if (answer->kind == RemoteCancel::Kind::kUnavailable) {
        reply_with(producer, protocol::ErrorReply{"unavailable", "job '" + request.id + "': redis: " + answer->error,
                                                  request.id});
      } else if (answer->kind == RemoteCancel::Kind::kNotFound) {
        reply_with(producer, protocol::ErrorReply{"not_found", "no job '" + request.id + "'", request.id});
      }
      return;
    }
    job = jobs_.find(request.id);
  }
  if (!job) {
    reply_with(producer, protocol::ErrorReply{"not_found", "no job '" + request.id + "'", request.id});
    return;
  }
  cancel(*job);
}

void Broker::cancel(JobRecord& job) {
  if (job.phase == JobPhase::kQueued) {
    queue_.remove(job.job.id);
    finish(job, final_with(FinishReason::kCancelled));
  } else if (job.phase == JobPhase::kRunning && !job.cancel_requested) {
    job.cancel_requested = true;
    send_to_peer(backend_, job.worker, protocol::Cancel{job.job.id});
  }
}

void Broker::on_status(const std::string& producer, const protocol::Status& status) {
  protocol::StatusReply answer{.id = status.id};
  const JobRecord* job = jobs_.find(status.id);
  const bool store_knows_more = !job || job->phase == JobPhase::kRemote || job->known_by_id_only;
  if (store_knows_more) {
    std::optional<protocol::StatusReply> stored = store_->status(status.id);
    apply_reported();
    if (stored) {
      reply_with(producer, *stored);
      return;
    }
    job = jobs_.find(status.id);
  }
  if (job) {
    answer.state = job->phase == JobPhase::kQueued    ? protocol::JobState::kQueued
                   : job->phase == JobPhase::kRunning ? protocol::JobState::kRunning
                                                      : protocol::JobState::kFinished;
    answer.attempt = job->attempt;
    answer.seq = job->next_seq;
    answer.final_result = job->final_result;
    answer.metadata = job->job.metadata;
  }
  reply_with(producer, answer);
}

void Broker::on_replay(const std::string& producer, const protocol::Replay& replay) {
  const JobRecord* job = jobs_.find(replay.id);
  const bool held_here = job && StreamFanout::holds(*job, replay.from_seq);
  if (!held_here) {
    StoredReplay stored = store_->replay(replay);
    apply_reported();
    for (const protocol::Event& event : stored.events) reply_with(producer, event);
    if (stored.answered) return;
    job = jobs_.find(replay.id);
  }
  if (!job) {
    reply_with(producer, protocol::ErrorReply{"not_found", "no job '" + replay.id + "'", replay.id});
    return;
  }
  fanout_.replay(producer, *job, replay);
}

void Broker::serve_backend() {
  receive_from_peers(
      backend_, kReceiveBudget,
      [this](const std::string& identity, protocol::WireMessage message) {
        if (message.type == MessageType::kReady) {
          on_ready(identity, protocol::from_wire<protocol::Ready>(message));
          return;
        }
        WorkerRecord* worker = workers_.find(identity);
        if (!worker) {  // traffic from a worker we do not know (e.g. after our restart): re-register
          send_to_peer(backend_, identity, protocol::Disconnect{});
          return;
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
      },
      [this](const std::string& identity, const Error& e) {
        // docs/protocol.md 9.3: a registered worker that breaks the protocol is not trusted with jobs.
        spdlog::warn("backend: bad message from a worker: {}", e.what());
        send_to_peer(backend_, identity, protocol::error_reply(e));
        if (workers_.find(identity)) {
          send_to_peer(backend_, identity, protocol::Disconnect{});
          lose_worker(identity, std::string("malformed message: ") + e.what());
        }
      });
}

void Broker::on_ready(const std::string& identity, protocol::Ready ready) {
  if (ready.slots <= 0 || ready.slots > 4096) {
    throw Error(ErrorCode::kProtocol, "READY slots must be in 1..4096, got " + std::to_string(ready.slots));
  }
  if (workers_.find(identity)) lose_worker(identity, "it registered again");  // it restarted: its jobs are gone
  spdlog::info("worker {} ready: model {}, {} slots, backend {}, context {}, tool calls {}, reasoning {}",
               ready.worker_id, ready.model, ready.slots, ready.backend, ready.max_model_len,
               protocol::tool_call_format_name(ready.tool_call_format),
               protocol::reasoning_format_name(ready.reasoning_format));
  workers_.add(identity, std::move(ready), SteadyClock::now());
  dispatch();
}

void Broker::on_tokens(WorkerRecord& worker, const protocol::Tokens& tokens) {
  JobRecord* found = jobs_.find(tokens.id);
  if (!found) return;
  JobRecord& job = *found;
  // Late traffic of an attempt we already gave up on is dropped: subscribers see one stream.
  if (job.phase != JobPhase::kRunning || job.worker != worker.identity || job.attempt != tokens.attempt) return;
  if (tokens.seq != job.worker_seq) {
    // A gap loses this attempt (docs/protocol.md 9.5): cancel it and continue from what arrived.
    spdlog::warn("job {}: TOKENS seq {} from worker {}, expected {}; re-queueing", job.job.id, tokens.seq,
                 worker.ready.worker_id, job.worker_seq);
    send_to_peer(backend_, worker.identity, protocol::Cancel{job.job.id});
    worker.jobs.erase(job.job.id);
    requeue_as_continuation(job);
    dispatch();
    return;
  }
  job.worker_seq = tokens.seq + 1;
  if (tokens.spec) metrics_.speculation(*tokens.spec);
  // Only speculation counts: a step whose tokens were all cut streams nothing.
  if (tokens.token_ids.empty() && tokens.text.empty()) return;
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
  publish(job, protocol::Event{
                   .id = job.job.id, .token_ids = tokens.token_ids, .text = tokens.text, .logprobs = tokens.logprobs});
}

void Broker::on_final(WorkerRecord& worker, const protocol::Final& final_message) {
  JobRecord* found = jobs_.find(final_message.id);
  if (!found) return;
  JobRecord& job = *found;
  if (job.phase != JobPhase::kRunning || job.worker != worker.identity || job.attempt != final_message.attempt) return;
  worker.jobs.erase(job.job.id);
  protocol::FinalResult result = final_message.result;
  if (job.deadline_expired && result.finish_reason == FinishReason::kCancelled) result.finish_reason = FinishReason::kDeadline;
  // Figures for the whole job, across attempts, as the producer sees it.
  const auto now = SteadyClock::now();
  result.usage.completion_tokens = static_cast<int64_t>(job.streamed.size());
  const SteadyClock::time_point assigned = job.first_assigned_at.value_or(now);
  result.timings.queue_ms = elapsed_ms(job.submitted_at, assigned) + result.timings.queue_ms;
  result.timings.ttft_ms = job.first_token_at ? elapsed_ms(job.submitted_at, *job.first_token_at) : 0;
  result.timings.total_ms = elapsed_ms(job.submitted_at, now);
  finish(job, std::move(result));
  dispatch();
}

void Broker::dispatch() {
  while (std::optional<Assignment> assignment = dispatcher_->next(queue_, workers_, jobs_)) {
    metrics_.job_routed(std::string(routing_reason_name(assignment->reason)));
    start(jobs_.jobs.at(assignment->job_id), *assignment->worker);
  }
}

void Broker::start(JobRecord& job, WorkerRecord& worker) {
  job.phase = JobPhase::kRunning;
  job.worker = worker.identity;
  job.worker_seq = 0;
  job.attempt += 1;
  // The first attempt anywhere: a job taken over from Redis brings its first assignment along.
  if (!job.first_assigned_at) {
    job.first_assigned_at = SteadyClock::now();
    metrics_.job_started(std::chrono::duration<double>(*job.first_assigned_at - job.submitted_at).count());
  }
  protocol::Assign assign{.job = job.job,
                          .attempt = job.attempt,
                          .resume_tokens = job.streamed,
                          .resume_text_bytes = job.streamed_text_bytes};
  assign.job.deadline_ms = std::max<int64_t>(1, ms_between(SteadyClock::now(), job.deadline_at));
  worker.jobs.insert(job.job.id);
  store_->job_started(job.job.id, job.attempt);
  if (!send_to_peer(backend_, worker.identity, assign)) lose_worker(worker.identity, "it cannot be reached");
}

void Broker::check_timers() {
  const auto now = SteadyClock::now();
  // Timers need millisecond resolution, not a scan of every job after every burst of messages.
  if (now - last_timer_check_ < std::chrono::milliseconds(10)) return;
  last_timer_check_ = now;
  if (ms_between(last_heartbeat_sent_, now) >= options_.heartbeat_ms) {
    last_heartbeat_sent_ = now;
    for (const auto& [identity, worker] : workers_.all()) send_to_peer(backend_, identity, protocol::BrokerHeartbeat{});
  }
  const auto oldest_allowed = now - std::chrono::milliseconds(options_.heartbeat_ms * options_.liveness);
  for (const std::string& identity : workers_.expired(oldest_allowed)) lose_worker(identity, "its heartbeats stopped");
  models_.note_connected(workers_, now);

  for (auto& [id, job] : jobs_.jobs) {
    // A queued job whose model no worker has served for the grace period ends now, not at its
    // deadline (model_catalog.h).
    if (job.phase == JobPhase::kQueued && job.job.model) {
      if (std::optional<ModelRefusal> refusal = models_.refusal(job.job, workers_, now)) {
        queue_.remove(id);
        finish(job, final_with(FinishReason::kRejected, refusal->message));
        continue;
      }
    }
    // A remote job's deadline is its owner's to enforce.
    if (job.phase == JobPhase::kFinished || job.phase == JobPhase::kRemote || job.deadline_at > now) continue;
    if (job.phase == JobPhase::kQueued) {
      queue_.remove(id);
      finish(job, final_with(FinishReason::kDeadline));
    } else if (!job.deadline_expired) {
      job.deadline_expired = true;  // the worker's cancelled FINAL becomes `deadline`
      send_to_peer(backend_, job.worker, protocol::Cancel{id});
    } else if (now > job.deadline_at + std::chrono::seconds(1)) {
      // docs/protocol.md 9.4: a worker that does not answer the cancel does not hold the job open.
      send_to_peer(backend_, job.worker, protocol::Cancel{id});
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
  gauges.routing_sessions = static_cast<int64_t>(dispatcher_->sessions_known());
  gauges.routing_prefix_blocks = static_cast<int64_t>(dispatcher_->prefix_blocks_known());
  gauges.draining = draining_;
  gauges.redis_connected = store_->connected();
  store_connected_ = gauges.redis_connected;
  metrics_.set_gauges(std::move(gauges));
}

void Broker::lose_worker(std::string identity, const std::string& why) {
  WorkerRecord* worker = workers_.find(identity);
  if (!worker) return;
  // A worker that says goodbye with nothing running is routine; anything else deserves a warning.
  const auto level = worker->jobs.empty() && why == "it disconnected" ? spdlog::level::info : spdlog::level::warn;
  spdlog::log(level, "worker {} lost: {}; re-queueing {} jobs", worker->ready.worker_id, why, worker->jobs.size());
  const std::set<std::string> jobs = workers_.remove(identity);
  dispatcher_->worker_left(identity);  // its caches went with it
  for (const std::string& id : jobs) {
    JobRecord* job = jobs_.find(id);
    if (job && job->phase == JobPhase::kRunning) requeue_as_continuation(*job);
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
  metrics_.job_ended(std::chrono::duration<double>(SteadyClock::now() - job.submitted_at).count());
  publish(job, protocol::Event{.id = job.job.id, .final_result = std::move(result)});
  jobs_.finished_order.push_back(job.job.id);
}

void Broker::withdraw(JobRecord& job) {
  const std::string& id = job.job.id;
  if (job.phase == JobPhase::kQueued) queue_.remove(id);
  if (job.phase == JobPhase::kRunning) {
    send_to_peer(backend_, job.worker, protocol::Cancel{id});
    if (WorkerRecord* worker = workers_.find(job.worker)) worker->jobs.erase(id);
    job.worker.clear();
  }
  if (job.phase == JobPhase::kFinished) {  // its final was refused: the new owner's comes instead
    job.final_result.reset();
    std::erase(jobs_.finished_order, id);
  }
}

void Broker::publish(JobRecord& job, protocol::Event event) {
  event.seq = job.next_seq++;
  if (std::optional<protocol::Event> kept = store_->keep_event(std::move(event), job.dead_reason)) deliver(job, *kept);
}

void Broker::relay(JobRecord& job, protocol::Event event) {
  event.seq = job.next_seq++;
  deliver(job, event);
}

void Broker::deliver(JobRecord& job, const protocol::Event& event) {
  // Only stored events are delivered: what went out is the prefix the store holds, where the job
  // goes back to if another broker takes it over.
  job.stored_next_seq = event.seq + 1;
  job.stored_tokens += event.token_ids.size();
  job.stored_text_bytes += static_cast<int64_t>(event.text.size());
  fanout_.deliver(job, event);
}

void Broker::forget_old_jobs() {
  while (static_cast<int64_t>(jobs_.finished_order.size()) > options_.finished_jobs_kept) {
    fanout_.forget(jobs_.jobs.at(jobs_.finished_order.front()));
    jobs_.jobs.erase(jobs_.finished_order.front());
    jobs_.finished_order.pop_front();
  }
}

}  // namespace flashq
