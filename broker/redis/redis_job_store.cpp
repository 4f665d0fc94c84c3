#include "broker/redis/redis_job_store.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <thread>

#include <spdlog/spdlog.h>

#include "broker/redis/redis_url.h"
#include "shared/error.h"

namespace flashq {
namespace {

using protocol::FinishReason;
using OnFailure = RedisPipeline::OnFailure;
using Replication = RedisPipeline::Replication;
namespace schema = redis_schema;

bool connection_lost_in(const RedisReply& reply) {
  return reply.is_error() && reply.text.rfind("connection lost", 0) == 0;
}

protocol::FinalResult error_result(const std::string& why) {
  protocol::FinalResult result;
  result.finish_reason = FinishReason::kError;
  result.error = why;
  return result;
}

}  // namespace

std::string default_redis_consumer(const std::string& frontend_endpoint) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + frontend_endpoint;
}

RedisJobStore::RedisJobStore(const BrokerOptions& options, const std::string& frontend_endpoint, BrokerCore& core,
                             JobTable& jobs, JobQueue& queue, const WorkerRegistry& workers, BrokerMetrics& metrics)
    : options_(options.redis),
      route_sessions_(options.routing.cache_aware),
      unknown_model_grace_ms_(options.unknown_model_grace_ms),
      default_deadline_ms_(options.default_deadline_ms),
      retry_after_ms_(options.retry_after_ms),
      core_(core),
      jobs_(jobs),
      queue_(queue),
      workers_(workers),
      metrics_(metrics),
      // A blocking read (STATUS answered from Redis) may wait behind a WAIT: it outlasts one.
      connection_(parse_redis_url(options.redis.url),
                  std::chrono::milliseconds(std::max<int64_t>(1000, options.redis.wait_timeout_ms + 1000))) {
  if (options_.consumer.empty()) options_.consumer = default_redis_consumer(frontend_endpoint);
  handover_ = schema::handover_key(options_.consumer);
  for (const std::string& script : schema::scripts()) connection_.register_script(script);
  // What anyone is told (ACCEPTED, an event, a final) is on the replicas first, when asked for.
  pipeline_.require_replicas(options_.wait_replicas, options_.wait_timeout_ms);
  spdlog::info("broker: redis {} as consumer '{}'", connection_.url().describe(), options_.consumer);
}

int64_t RedisJobStore::free_capacity() const {
  int64_t free = 0;
  for (const auto& [identity, worker] : workers_.all()) free += std::max<int64_t>(0, worker.free_slots());
  if (workers_.all().empty()) return 0;  // leave the jobs to brokers that have workers
  return free + options_.prefetch - queue_.size();
}

void RedisJobStore::turn() {
  if (!connection_.connected()) {
    ready_ = false;
    fetching_ = false;
    follower_.on_connection_lost();
    if (!connection_.ensure_connected()) return;  // backs off by itself
    spdlog::info("redis {}: connected", connection_.url().describe());
  }
  if (!ready_) on_connect();
  if (!ready_) return;
  // Replies that came in run their handlers (which add follow-ups: take after read, catch-up
  // after take); then this turn's commands go out, and the loop goes on without waiting.
  bool ok = pipeline_.receive(connection_);
  if (ok) {
    const auto now = SteadyClock::now();
    if (!core_.draining()) fetch(now);
    follower_.turn(now);
    announce_alive();
    announce_models();
    keep_claimed();
    while (!unstored_events_.empty()) store_events(unstored_events_.begin()->first);
    ok = pipeline_.send(connection_);
  }
  if (!ok) connection_lost();
}

void RedisJobStore::connection_lost() {
  spdlog::warn("redis {}: {}; {} writes kept for when it is back", connection_.url().describe(),
               connection_.last_error(), pipeline_.retained());
  ready_ = false;
  core_.store_state_changed();
}

// Before a request answered at once: the replies outstanding come first (they are in order).
bool RedisJobStore::settled() {
  if (!connection_.connected()) return false;
  if (pipeline_.settle(connection_)) return true;
  connection_lost();
  return false;
}

// After every (re)connect: the consumer group may be new (or Redis lost its data), and entries
// delivered to this consumer before a restart are ours to run.
void RedisJobStore::on_connect() {
  if (!settled()) return;
  try {
    const RedisReply group = connection_.command(schema::create_group());
    if (group.is_error() && group.text.rfind("BUSYGROUP", 0) != 0) {
      spdlog::error("redis: cannot create consumer group: {}", group.text);
      return;
    }
    const RedisReply handover = connection_.command(schema::create_handover_group(options_.consumer));
    if (handover.is_error() && handover.text.rfind("BUSYGROUP", 0) != 0) {
      spdlog::error("redis: cannot create consumer group of {}: {}", handover_, handover.text);
      return;
    }
    if (connection_.command(schema::register_broker(options_.consumer)).is_error()) return;
    read_own_pending(schema::kJobs);
    read_own_pending(handover_);
    // A restarted broker's jobs in the models' streams are its own too, served here or not yet
    // (its workers come back after it).
    model_groups_.clear();
    for (const RedisReply& model : connection_.command({"SMEMBERS", schema::kModels}).elements) {
      read_own_pending(schema::model_jobs_key(model.text));
    }
    follower_.on_connect(connection_);
  } catch (const Error& e) {
    spdlog::warn("redis: {}", e.what());
    return;
  }
  ready_ = true;
  alive_ = false;               // said again (Redis may have lost the key) by the turn's announce_alive
  core_.store_state_changed();  // /readyz and flashq_redis_connected follow at once, not at the next sweep
}

void RedisJobStore::submit(const std::string& producer, protocol::Job job) {
  if (!ready_) {
    reply(producer, protocol::Rejected{job.id, "unavailable", retry_after_ms_});
    metrics_.job_rejected("unavailable");
    return;
  }
  RedisCommand command = schema::intake(job);  // before the handler takes the job
  // With --redis-wait-replicas, ACCEPTED only once the replicas have the entry too, so that it
  // survives a failover to one of them (docs/redis.md, "Sentinel and failover"); else nothing is
  // kept of the job here, so a retry of the id asks Redis (and its replicas) again.
  pipeline_.add(
      std::move(command),
      [this, producer, job = std::move(job)](const RedisReply& stored) mutable {
        if (stored.is_error() || stored.elements.size() < 2) {
          // Not stored (or not on enough replicas), so not accepted: the producer may try again.
          if (!connection_lost_in(stored)) spdlog::warn("job {}: not accepted: {}", job.id, stored.text);
          reply(producer, protocol::Rejected{job.id, "unavailable", retry_after_ms_});
          metrics_.job_rejected("unavailable");
          return;
        }
        reply(producer, protocol::Accepted{job.id});
        const std::string& state = stored.elements[0].text;
        if (state == "finished") {  // idempotent resubmission of a finished job: its final again
          try {
            reply(producer,
                  protocol::Event{.id = job.id, .final_result = schema::final_from_json(stored.elements[1].text)});
          } catch (const Error& e) {
            spdlog::warn("job {}: stored final unreadable: {}", job.id, e.what());
          }
          return;
        }
        if (state == "new") metrics_.job_admitted();
        if (jobs_.contains(job.id)) return;
        const auto now = SteadyClock::now();
        JobRecord record;
        record.producer = producer;
        record.phase = JobPhase::kRemote;
        record.prompt_tokens_estimate = 0;
        record.submitted_at = now;
        record.deadline_at =
            now + std::chrono::milliseconds(job.deadline_ms > 0 ? job.deadline_ms : default_deadline_ms_);
        const std::string id = job.id;
        record.job = std::move(job);
        jobs_.jobs.emplace(id, std::move(record));
      },
      OnFailure::kDrop, Replication::kReplicas);
}

// Every entry pending for this broker in `stream` (taken, or handed to it, and not finished).
// Throws Error(kIo) when the connection breaks.
void RedisJobStore::read_own_pending(const std::string& stream) {
  std::string after = "0";
  while (true) {
    const RedisReply reply = connection_.command(schema::read_own_pending(stream, options_.consumer, 500, after));
    if (reply.is_error() && reply.text.rfind("NOGROUP", 0) == 0) return;  // a model's stream nobody read yet
    if (reply.is_error()) throw Error(ErrorCode::kIo, "cannot read pending entries of " + stream + ": " + reply.text);
    int64_t count = 0;
    for (const auto& [key, entries] : schema::streams_of(reply)) {
      for (const schema::Entry& entry : entries) {
        take(stream, entry, true);
        after = entry.id;
        ++count;
      }
    }
    if (count < 500) break;
  }
  if (stream == handover_ && after != "0") handed_after_ = after;
}

// New entries do not wake the loop: the intake is read every few ms, and at once again while
// reads come back full.
void RedisJobStore::fetch(SteadyClock::time_point now) {
  if (fetching_ || (!fetch_again_ && now - last_fetch_ < kReadInterval)) return;
  const int64_t count = free_capacity();
  if (count <= 0) return;
  fetching_ = true;
  fetch_again_ = false;
  last_fetch_ = now;
  pipeline_.add(
      schema::read_new(options_.consumer, count, handed_after_, model_streams_ready()),
      [this, count](const RedisReply& reply) {
        fetching_ = false;
        if (reply.is_error()) {
          if (!connection_lost_in(reply)) spdlog::warn("redis: reading flashq:jobs: {}", reply.text);
          if (reply.text.rfind("NOGROUP", 0) == 0) ready_ = false;  // Redis lost it: make it again
          return;
        }
        for (const auto& [stream, entries] : schema::streams_of(reply)) {
          fetch_again_ = fetch_again_ || static_cast<int64_t>(entries.size()) >= count;
          for (const schema::Entry& entry : entries) take(stream, entry, false);
          if (stream == handover_ && !entries.empty()) handed_after_ = entries.back().id;
        }
      },
      OnFailure::kDrop);
}

void RedisJobStore::take(const std::string& stream, const schema::Entry& entry, bool own_pending) {
  protocol::Job job;
  try {
    job = job_from_fields(entry.fields);
  } catch (const Error& e) {
    const auto id = entry.fields.find("id");
    const std::string job_id = id == entry.fields.end() ? std::string() : id->second;
    spdlog::warn("redis: entry {} is not a job ({}); filed under {}", entry.id, e.what(), schema::kDead);
    pipeline_.add(schema::dead_letter(stream, entry.id, job_id, std::string("malformed job: ") + e.what(),
                                      options_.dead_letters_kept, options_.retention_s),
                  nullptr, OnFailure::kRetry);
    metrics_.job_rejected("malformed");
    return;
  }
  if (job.id.empty()) job.id = "redis-" + entry.id;
  const JobRecord* known = jobs_.find(job.id);
  if (own_pending && known && known->redis_entry == entry.id && known->redis_stream == stream &&
      (known->phase == JobPhase::kQueued || known->phase == JobPhase::kRunning)) {
    return;  // a reconnect, not a restart: we hold it already
  }
  // A session's turn goes to the broker that ran its last one (it holds the session's cache), when
  // that broker is alive; else it runs here, and this broker owns the session from now on.
  const std::string session = route_sessions_ && job.session ? *job.session : std::string();
  // A sorted or handed entry was written when it moved: the job was submitted when the original was.
  int64_t submitted_ms = schema::entry_time_ms(entry.id);
  for (const char* original : {"sorted_entry", "handed_entry"}) {
    if (auto found = entry.fields.find(original); found != entry.fields.end()) {
      try {
        submitted_ms = std::min(submitted_ms, schema::entry_time_ms(found->second));
      } catch (const Error&) {
        // not one of ours: the moved entry's own time
      }
    }
  }
  const auto metadata = entry.fields.find("metadata");  // valid JSON: job_from_fields read it
  RedisCommand command = schema::take(
      stream, options_.consumer, job.id, entry.id,
      {.session = session,
       .session_ttl_ms = options_.session_ttl_s * 1000,
       .metadata_json = metadata == entry.fields.end() ? std::string() : metadata->second,
       .model = job.model.value_or(""),
       .model_served_here = job.model && models_here_.count(*job.model) > 0});
  // Kept claimed until the take's answer is in (with --redis-wait-replicas that waits for the
  // replicas), so that no claim takes it meanwhile and counts a delivery more.
  taking_[stream].insert(entry.id);
  pipeline_.add(
      std::move(command),
      [this, job = std::move(job), stream, entry_id = entry.id, submitted_ms](const RedisReply& reply) mutable {
        taking_[stream].erase(entry_id);
        if (reply.is_error()) {
          // It stays pending for us: read again after a reconnect, or claimed by another broker.
          if (!connection_lost_in(reply)) spdlog::warn("redis: taking {}: {}", entry_id, reply.text);
          return;
        }
        try {
          admit_taken(std::move(job), stream, entry_id, submitted_ms, schema::take_of(reply));
        } catch (const Error& e) {
          spdlog::warn("redis: taking {}: {}", entry_id, e.what());
        }
      },
      OnFailure::kRetry, Replication::kReplicas);
}

void RedisJobStore::admit_taken(protocol::Job job, const std::string& stream, const std::string& entry,
                                int64_t submitted_ms, const schema::Take& take) {
  if (take.outcome == schema::Take::Outcome::kHanded) {
    spdlog::debug("job {}: session '{}' handed to broker {}", job.id, job.session.value_or(""), take.moved_to);
    metrics_.job_handed_over();
    return;
  }
  if (take.outcome == schema::Take::Outcome::kSorted) {  // for the brokers serving its model
    spdlog::debug("job {}: no worker here for model '{}'; moved to {}", job.id, job.model.value_or(""), take.moved_to);
    return;
  }
  if (take.outcome != schema::Take::Outcome::kRun) return;  // finished or a duplicate: acknowledged
  auto it = jobs_.jobs.find(job.id);
  if (it != jobs_.jobs.end() && it->second.phase != JobPhase::kRemote) return;  // ours already
  const auto now = SteadyClock::now();
  if (it == jobs_.jobs.end()) {
    JobRecord record;
    record.phase = JobPhase::kRemote;  // until admitted below
    it = jobs_.jobs.emplace(job.id, std::move(record)).first;
  }
  JobRecord& record = it->second;
  // Its figures count from what Redis holds, on Redis's clock: submitted when its entry was added
  // (the id's milliseconds), first assigned and first streamed when the store says, under whichever
  // broker that was (this one before a restart, or a dead one). Never a time this process made up.
  const auto at = [&](int64_t redis_ms) {
    return now - std::chrono::milliseconds(std::max<int64_t>(0, take.redis_now_ms - redis_ms));
  };
  record.submitted_at = at(submitted_ms);
  if (take.first_assigned_ms > 0 && !record.first_assigned_at) record.first_assigned_at = at(take.first_assigned_ms);
  if (take.first_token_ms > 0 && !record.first_token_at) {
    record.first_token_at = at(take.first_token_ms);
    record.last_token_at = now;  // the gap across the takeover is not one inter-token interval
  }
  const std::string id = job.id;
  const int64_t deadline = job.deadline_ms > 0 ? job.deadline_ms : default_deadline_ms_;
  record.deadline_at = now + std::chrono::milliseconds(submitted_ms + deadline - take.redis_now_ms);
  record.prompt_tokens_estimate = estimate_prompt_tokens(job);
  record.job = std::move(job);
  record.known_by_id_only = false;
  record.redis_entry = entry;
  record.redis_stream = stream;
  record.redis_owner_lost = false;
  record.attempt = std::max(record.attempt, take.attempt);
  if (take.cancel_requested) {  // cancelled while it waited in Redis
    record.next_seq = std::max(record.next_seq, take.next_seq);
    core_.finish(record, protocol::FinalResult{.finish_reason = FinishReason::kCancelled});
    return;
  }
  if (take.deliveries > options_.max_deliveries) {
    record.dead_reason = "delivered " + std::to_string(take.deliveries) + " times";
    record.next_seq = std::max(record.next_seq, take.next_seq);
    core_.finish(record, error_result("the job was delivered " + std::to_string(take.deliveries) +
                                      " times without finishing (its brokers died)"));
    return;
  }
  if (take.next_seq > record.next_seq) {
    record.phase = JobPhase::kQueued;  // not in the queue until its stream is caught up
    catch_up(id, take.next_seq);
    return;
  }
  record.phase = JobPhase::kQueued;
  const bool continuation = !record.streamed.empty();
  if (continuation) {
    queue_.push_front(id, record.job.priority,
                      record.prompt_tokens_estimate + static_cast<int64_t>(record.streamed.size()));
  } else if (!queue_.push_back(id, record.job.priority, record.prompt_tokens_estimate)) {
    record.phase = JobPhase::kRemote;  // full: left pending; another broker (or we) claims it later
    return;
  }
  core_.dispatch();
}

// A previous owner streamed part of the job: its tokens are the continuation's prefix, and the
// events this broker has not published yet are published now.
void RedisJobStore::catch_up(const std::string& id, int64_t next_seq) {
  pipeline_.add(
      schema::read_results(id),
      [this, id, next_seq](const RedisReply& reply) {
        JobRecord* found = jobs_.find(id);
        if (!found || found->phase != JobPhase::kQueued) return;
        JobRecord& job = *found;
        if (reply.is_error()) {
          job.phase = JobPhase::kRemote;  // left pending; taken again after a reconnect
          return;
        }
        try {
          for (const schema::Entry& entry : schema::entries_of(reply)) {
            schema::StoredEvent stored = schema::event_of(entry);
            if (stored.final_result || stored.seq < job.next_seq || stored.seq >= next_seq) continue;
            job.next_seq = stored.seq;
            job.streamed.insert(job.streamed.end(), stored.token_ids.begin(), stored.token_ids.end());
            job.streamed_text_bytes += static_cast<int64_t>(stored.text.size());
            core_.relay(job, protocol::Event{.id = id, .token_ids = stored.token_ids, .text = stored.text});
          }
        } catch (const Error& e) {
          spdlog::warn("job {}: result stream unreadable ({}); running it from the start", id, e.what());
        }
        job.next_seq = std::max(job.next_seq, next_seq);
        queue_.push_front(id, job.job.priority, job.prompt_tokens_estimate + static_cast<int64_t>(job.streamed.size()));
        core_.dispatch();
      },
      OnFailure::kDrop);
}

// CANCEL of a job this broker does not run: whoever runs it (or takes it later) cancels it, and
// the cancelled final reaches us like any of its events. Answered at once, like STATUS, so that a
// producer's next request finds the cancel taken (Client::cancel relies on that order).
bool RedisJobStore::cancel_elsewhere(const std::string& producer, const std::string& id) {
  RedisReply answer{.type = RedisReply::Type::kError, .text = "not connected"};
  try {
    if (settled()) answer = connection_.command(schema::cancel(id, options_.control_kept));
  } catch (const Error& e) {
    answer.text = e.what();
  }
  if (answer.is_error()) {
    reply(producer, protocol::ErrorReply{"unavailable", "job '" + id + "': redis: " + answer.text, id});
  } else if (answer.text == "not_found") {
    reply(producer, protocol::ErrorReply{"not_found", "no job '" + id + "'", id});
  } else if (answer.text == "requested") {
    follower_.follow(id);  // a submitter or subscriber here gets the cancelled final
  }
  return true;
}

// Alive (sessions may be handed to us) while we have workers and are not draining: said at once
// when that changes, and refreshed with the claims (keep_claimed). The key lives one claim
// timeout, the time after which our entries go to other brokers too.
void RedisJobStore::announce_alive() {
  const bool alive = !core_.draining() && !workers_.all().empty();
  if (alive == alive_) return;
  alive_ = alive;
  pipeline_.add(alive ? schema::alive(options_.consumer, options_.claim_idle_ms) : schema::not_alive(options_.consumer),
                nullptr, OnFailure::kDrop);
}

// Entries this broker holds are claimed again now and then, so they never look idle to the
// others; entries idle past the timeout (their broker died) are claimed for ourselves.
void RedisJobStore::keep_claimed() {
  const auto now = SteadyClock::now();
  if (now - last_keep_ < std::chrono::milliseconds(std::max<int64_t>(options_.claim_idle_ms / 3, 10))) return;
  last_keep_ = now;
  if (alive_) pipeline_.add(schema::alive(options_.consumer, options_.claim_idle_ms), nullptr, OnFailure::kDrop);
  std::map<std::string, std::vector<std::string>> held;  // entries per stream
  auto keep = [&](const std::string& stream) {
    pipeline_.add(schema::keep_claimed(stream, options_.consumer, held[stream]), nullptr, OnFailure::kDrop);
    held[stream].clear();
  };
  for (const auto& [id, job] : jobs_.jobs) {
    if ((job.phase == JobPhase::kQueued || job.phase == JobPhase::kRunning) && !job.redis_entry.empty()) {
      const std::string& stream = job.redis_stream.empty() ? std::string(schema::kJobs) : job.redis_stream;
      held[stream].push_back(job.redis_entry);
      if (held[stream].size() >= 1000) keep(stream);
    }
  }
  for (const auto& [stream, entries] : taking_) {
    for (const std::string& entry : entries) held[stream].push_back(entry);
  }
  for (const auto& [stream, list] : held) {
    if (!list.empty()) keep(stream);
  }
  const int64_t capacity = free_capacity();
  if (core_.draining() || capacity <= 0) return;
  pipeline_.add(
      schema::claim_idle(options_.consumer, options_.claim_idle_ms, capacity, model_streams_ready()),
      [this](const RedisReply& reply) {
        if (reply.is_error()) return;
        for (const auto& [stream, entries] : schema::streams_of(reply)) {
          for (const schema::Entry& entry : entries) {
            spdlog::info("redis: claimed entry {} of {} from a silent broker", entry.id, stream);
            take(stream, entry, false);
          }
        }
      },
      OnFailure::kDrop);
}

// The models this broker's workers serve, leased in Redis while they do: said at once when the set
// changes, and renewed often enough that every broker's view of what is served stays fresh within
// the unknown-model grace period. The reply is that view: the models served anywhere go to the
// broker's catalog, and the streams of models nobody has served for the grace period are read
// here too, so that their jobs are rejected (a model no broker serves is read by every broker).
void RedisJobStore::announce_models() {
  const auto now = SteadyClock::now();
  std::set<std::string> here;  // none while draining: this broker takes no more jobs
  if (!core_.draining()) {
    for (const auto& [identity, worker] : workers_.all()) here.insert(worker.ready.model);
  }
  const auto interval = std::chrono::milliseconds(
      std::max<int64_t>(10, std::min(options_.claim_idle_ms, std::max<int64_t>(unknown_model_grace_ms_, 30)) / 3));
  if (here == models_here_ && (announcing_models_ || now - last_models_announced_ < interval)) return;
  models_here_ = std::move(here);
  last_models_announced_ = now;
  announcing_models_ = true;
  pipeline_.add(
      schema::served(options_.consumer, options_.claim_idle_ms, models_here_),
      [this](const RedisReply& reply) {
        announcing_models_ = false;
        if (reply.is_error()) return;
        schema::ServedModels view;
        try {
          view = schema::served_of(reply);
        } catch (const Error& e) {
          spdlog::warn("redis: {}", e.what());
          return;
        }
        const auto answered = SteadyClock::now();
        std::vector<std::pair<std::string, SteadyClock::time_point>> served;
        models_swept_.clear();
        for (const schema::ServedModel& model : view.models) {
          const int64_t unserved_ms = model.live ? 0
                                      : model.last_served_ms > 0 ? view.redis_now_ms - model.last_served_ms
                                                                 : std::numeric_limits<int64_t>::max();
          if (model.live || model.last_served_ms > 0) {
            served.emplace_back(model.name, answered - std::chrono::milliseconds(std::max<int64_t>(0, unserved_ms)));
          }
          if (unknown_model_grace_ms_ > 0 && unserved_ms >= unknown_model_grace_ms_ && !models_here_.count(model.name)) {
            models_swept_.insert(model.name);
          }
        }
        core_.models_served_elsewhere(served);
      },
      OnFailure::kDrop);
}

// The model streams this broker reads (those of its workers' models, and those nobody serves),
// once their consumer groups are known to exist; the rest get theirs made on the way.
std::vector<std::string> RedisJobStore::model_streams_ready() {
  std::vector<std::string> ready;
  auto add = [&](const std::string& model) {
    if (model_groups_.count(model)) {
      ready.push_back(model);
      return;
    }
    if (!making_groups_.insert(model).second) return;
    pipeline_.add(
        schema::create_model_group(model),
        [this, model](const RedisReply& reply) {
          making_groups_.erase(model);
          if (!reply.is_error() || reply.text.rfind("BUSYGROUP", 0) == 0) model_groups_.insert(model);
        },
        OnFailure::kDrop);
  };
  for (const std::string& model : models_here_) add(model);
  for (const std::string& model : models_swept_) add(model);
  return ready;
}

void RedisJobStore::job_started(const std::string& id, int64_t attempt) {
  pipeline_.add(schema::mark_running(id, attempt), nullptr, OnFailure::kDrop);
}

// Events go out once stored, so that what anyone sees is what a later owner of the job continues
// from. They wait for the end of the loop turn, to go to Redis as one script call per job.
void RedisJobStore::store_event(JobRecord& job, protocol::Event event) {
  if (event.final_result) {
    store_final(job, std::move(event));
  } else if (!job.redis_owner_lost) {
    unstored_events_[job.job.id].push_back(std::move(event));
  }
}

void RedisJobStore::store_events(const std::string& id) {
  auto it = unstored_events_.find(id);
  if (it == unstored_events_.end()) return;
  RedisCommand command = schema::events(options_.consumer, id, it->second, options_.max_events_per_job);
  pipeline_.add(std::move(command),
                [this, id, events = std::move(it->second)](const RedisReply& reply) {
                  const int64_t first = events.front().seq;
                  if (reply.is_error()) {
                    spdlog::warn("job {}: storing events from {}: {}", id, first, reply.text);
                  } else if (reply.integer == -1) {
                    lost_ownership(id);
                  } else if (reply.integer == -2) {
                    spdlog::warn("job {}: events from {} out of order in redis", id, first);
                  } else if (JobRecord* owned = jobs_.find(id); owned && !owned->redis_owner_lost) {
                    for (const protocol::Event& event : events) core_.deliver(*owned, event);
                  }
                },
                OnFailure::kRetry, Replication::kReplicas);
  unstored_events_.erase(it);
}

void RedisJobStore::store_final(JobRecord& job, protocol::Event final_event) {
  if (job.redis_owner_lost) return;
  store_events(job.job.id);  // before the final
  // Built before the handler takes the event: the order in which a call's arguments are
  // evaluated is unspecified, and a moved-from final would be stored without its error text.
  RedisCommand command =
      schema::final(options_.consumer, job.job.id, job.redis_stream, job.redis_entry, final_event.seq,
                    *final_event.final_result, options_.retention_s, job.dead_reason, options_.dead_letters_kept);
  pipeline_.add(
      std::move(command),
      [this, final_event = std::move(final_event)](const RedisReply& reply) {
        const std::string& id = final_event.id;
        if (reply.is_error()) {
          spdlog::warn("job {}: storing the final: {}", id, reply.text);
          return;
        }
        JobRecord* owned = jobs_.find(id);
        if (!owned || owned->redis_owner_lost) return;
        if (reply.integer == 1) {
          core_.deliver(*owned, final_event);
        } else {
          // -1: another broker owns the job; 0: a final is stored already (another
          // broker's, or ours when this was a retry): the stored one is relayed.
          spdlog::warn("job {}: {}; relaying the stored final", id,
                       reply.integer == 0 ? "already finished in redis" : "another broker owns it");
          lost_ownership(id);
        }
      },
      OnFailure::kRetry, Replication::kReplicas);
}

// Another broker took the job (we were silent too long): stop running it and relay instead, from
// where Redis holds its stream (what our subscribers have seen).
void RedisJobStore::lost_ownership(const std::string& id) {
  JobRecord* found = jobs_.find(id);
  if (!found || found->redis_owner_lost) return;
  JobRecord& job = *found;
  spdlog::warn("job {}: another broker took it over; relaying its results", id);
  job.redis_owner_lost = true;
  core_.withdraw(job);
  job.phase = JobPhase::kRemote;
  job.next_seq = job.stored_next_seq;
  job.streamed.resize(job.stored_tokens);
  job.streamed_text_bytes = job.stored_text_bytes;
  unstored_events_.erase(id);
}

bool RedisJobStore::answer_status(const std::string& producer, const protocol::Status& status) {
  if (!settled()) return false;
  try {
    const RedisReply stored = connection_.command(schema::status(status.id));
    if (stored.is_error() || stored.elements.empty()) return false;
    RedisFields fields = schema::fields_of(stored);
    protocol::StatusReply out{.id = status.id};
    const std::string state = fields["state"];
    out.state = state == "finished" ? protocol::JobState::kFinished
                : state == "running" ? protocol::JobState::kRunning
                                     : protocol::JobState::kQueued;
    out.attempt = fields.count("attempt") ? std::stoll(fields["attempt"]) : 0;
    out.seq = fields.count("next_seq") ? std::stoll(fields["next_seq"]) : 0;
    if (fields.count("final")) out.final_result = schema::final_from_json(fields["final"]);
    // What a gateway renders a response from, whichever broker ran the job (docs/gateway.md).
    if (fields.count("metadata")) out.metadata = metadata_from_json(fields["metadata"]);
    reply(producer, out);
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("redis: status of {}: {}", status.id, e.what());
    return false;
  }
}

bool RedisJobStore::answer_replay(const std::string& producer, const protocol::Replay& replay) {
  if (!settled()) return false;
  try {
    const RedisReply stored_events = connection_.command(schema::read_results(replay.id));
    if (stored_events.is_error() || stored_events.elements.empty()) return false;
    for (const schema::Entry& entry : schema::entries_of(stored_events)) {
      schema::StoredEvent stored = schema::event_of(entry);
      if (stored.seq < replay.from_seq) continue;
      reply(producer, protocol::Event{.id = replay.id,
                                      .seq = stored.seq,
                                      .token_ids = std::move(stored.token_ids),
                                      .text = std::move(stored.text),
                                      .final_result = std::move(stored.final_result)});
    }
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("redis: replay of {}: {}", replay.id, e.what());
    return false;
  }
}

void RedisJobStore::flush(std::chrono::milliseconds timeout) {
  while (!unstored_events_.empty()) store_events(unstored_events_.begin()->first);
  // No more sessions handed to a broker that is going away (else they wait for a claim), and its
  // models' leases given up (else a model only it served is rejected a lease later).
  if (alive_) pipeline_.add(schema::not_alive(options_.consumer), nullptr, OnFailure::kRetry);
  alive_ = false;
  if (!models_here_.empty()) pipeline_.add(schema::served(options_.consumer, 0, {}), nullptr, OnFailure::kRetry);
  models_here_.clear();
  const auto give_up = SteadyClock::now() + timeout;
  while (pipeline_.retained() > 0 && SteadyClock::now() < give_up) {
    if (connection_.ensure_connected() && pipeline_.flush(connection_)) continue;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace flashq
