// The broker's side of Redis (DESIGN.md §4, docs/redis.md): intake into flashq:jobs, taking
// entries as capacity allows, results into flashq:out:<id>, finals with acknowledgement, claims
// of a dead broker's entries, and relaying jobs that another broker runs. Everything goes through
// one pipeline per loop turn; nothing here blocks on Redis except STATUS and REPLAY of jobs this
// broker does not hold.
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <chrono>

#include "broker/broker.h"
#include "shared/error.h"

namespace flashq {
namespace {

using protocol::FinishReason;
using OnFailure = RedisPipeline::OnFailure;
namespace schema = redis_schema;

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool connection_lost(const RedisReply& reply) { return reply.is_error() && reply.text.rfind("connection lost", 0) == 0; }

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

int64_t Broker::free_capacity() const {
  int64_t free = 0;
  for (const auto& [identity, worker] : workers_.all()) free += std::max<int64_t>(0, worker.free_slots());
  if (workers_.all().empty()) return 0;  // leave the jobs to brokers that have workers
  return free + options_.redis.prefetch - queue_.size();
}

void Broker::redis_turn() {
  if (!redis_) return;
  if (!redis_->connected()) {
    redis_ready_ = false;
    redis_fetching_ = redis_relaying_ = redis_checking_awaited_ = false;
    if (!redis_->ensure_connected()) return;  // backs off by itself
    spdlog::info("redis {}: connected", redis_->url().describe());
  }
  if (!redis_ready_) redis_on_connect();
  if (!redis_ready_) return;
  // Replies that came in run their handlers (which add follow-ups: take after read, catch-up
  // after take); then this turn's commands go out, and the loop goes on without waiting.
  bool ok = redis_pipeline_.receive(*redis_);
  if (ok) {
    const auto now = SteadyClock::now();
    if (!draining_) redis_fetch(now);
    redis_relay(now);
    redis_check_awaited(now);
    redis_keep_claimed();
    while (!redis_events_.empty()) redis_store_events(redis_events_.begin()->first);
    ok = redis_pipeline_.send(*redis_);
  }
  if (!ok) redis_connection_lost();
}

void Broker::redis_connection_lost() {
  spdlog::warn("redis {}: {}; {} writes kept for when it is back", redis_->url().describe(), redis_->last_error(),
               redis_pipeline_.retained());
  redis_ready_ = false;
  update_gauges();
}

// Before a request answered at once: the replies outstanding come first (they are in order).
bool Broker::redis_settled() {
  if (!redis_ || !redis_->connected()) return false;
  if (redis_pipeline_.settle(*redis_)) return true;
  redis_connection_lost();
  return false;
}

// After every (re)connect: the consumer group may be new (or Redis lost its data), and entries
// delivered to this consumer before a restart are ours to run.
void Broker::redis_on_connect() {
  if (!redis_settled()) return;
  try {
    const RedisReply group = redis_->command(schema::create_group());
    if (group.is_error() && group.text.rfind("BUSYGROUP", 0) != 0) {
      spdlog::error("redis: cannot create consumer group: {}", group.text);
      return;
    }
    std::string after = "0";
    while (true) {
      RedisCommand read = schema::read_own_pending(options_.redis.consumer, 500);
      read.back() = after;
      const RedisReply reply = redis_->command(read);
      if (reply.is_error()) {
        spdlog::error("redis: cannot read pending entries: {}", reply.text);
        return;
      }
      int64_t count = 0;
      for (const auto& [stream, entries] : schema::streams_of(reply)) {
        for (const schema::Entry& entry : entries) {
          redis_take(entry, true);
          after = entry.id;
          ++count;
        }
      }
      if (count < 500) break;
    }
    if (redis_control_from_.empty()) {  // requests made before this broker started are not ours
      const RedisReply last = redis_->command({"XREVRANGE", schema::kControl, "+", "-", "COUNT", "1"});
      const std::vector<schema::Entry> entries = schema::entries_of(last);
      redis_control_from_ = entries.empty() ? "0-0" : entries.front().id;
    }
  } catch (const Error& e) {
    spdlog::warn("redis: {}", e.what());
    return;
  }
  redis_ready_ = true;
  update_gauges();  // /readyz and flashq_redis_connected follow at once, not at the next sweep
}

void Broker::redis_submit(const std::string& producer, protocol::Job job) {
  if (!redis_ready_) {
    send_to(frontend_, producer, protocol::Rejected{job.id, "unavailable", options_.retry_after_ms});
    metrics_.job_rejected("unavailable");
    return;
  }
  RedisCommand command = schema::intake(job);  // before the handler takes the job
  redis_pipeline_.add(
      std::move(command),
      [this, producer, job = std::move(job)](const RedisReply& reply) mutable {
        if (reply.is_error() || reply.elements.size() < 2) {
          // Not stored, so not accepted: the producer may try again.
          send_to(frontend_, producer, protocol::Rejected{job.id, "unavailable", options_.retry_after_ms});
          metrics_.job_rejected("unavailable");
          return;
        }
        send_to(frontend_, producer, protocol::Accepted{job.id});
        const std::string& state = reply.elements[0].text;
        if (state == "finished") {  // idempotent resubmission of a finished job: its final again
          try {
            send_to(frontend_, producer,
                    protocol::Event{.id = job.id, .final_result = schema::final_from_json(reply.elements[1].text)});
          } catch (const Error& e) {
            spdlog::warn("job {}: stored final unreadable: {}", job.id, e.what());
          }
          return;
        }
        if (state == "new") metrics_.job_admitted();
        if (jobs_.count(job.id)) return;
        const auto now = SteadyClock::now();
        JobRecord record;
        record.producer = producer;
        record.phase = JobPhase::kRemote;
        record.prompt_tokens_estimate = 0;
        record.submitted_at = now;
        record.deadline_at = now + std::chrono::milliseconds(job.deadline_ms > 0 ? job.deadline_ms
                                                                                 : options_.default_deadline_ms);
        const std::string id = job.id;
        record.job = std::move(job);
        jobs_.emplace(id, std::move(record));
      },
      OnFailure::kDrop);
}

// New entries do not wake the loop: the intake is read every few ms, and at once again while
// reads come back full.
void Broker::redis_fetch(SteadyClock::time_point now) {
  if (redis_fetching_ || (!redis_fetch_again_ && now - redis_last_fetch_ < kRedisReadInterval)) return;
  const int64_t count = free_capacity();
  if (count <= 0) return;
  redis_fetching_ = true;
  redis_fetch_again_ = false;
  redis_last_fetch_ = now;
  redis_pipeline_.add(
      schema::read_new(options_.redis.consumer, count),
      [this, count](const RedisReply& reply) {
        redis_fetching_ = false;
        if (reply.is_error()) {
          if (!connection_lost(reply)) spdlog::warn("redis: reading flashq:jobs: {}", reply.text);
          if (reply.text.rfind("NOGROUP", 0) == 0) redis_ready_ = false;  // Redis lost it: make it again
          return;
        }
        for (const auto& [stream, entries] : schema::streams_of(reply)) {
          redis_fetch_again_ = static_cast<int64_t>(entries.size()) >= count;
          for (const schema::Entry& entry : entries) redis_take(entry, false);
        }
      },
      OnFailure::kDrop);
}

void Broker::redis_take(const schema::Entry& entry, bool own_pending) {
  protocol::Job job;
  try {
    job = job_from_fields(entry.fields);
  } catch (const Error& e) {
    const auto id = entry.fields.find("id");
    const std::string job_id = id == entry.fields.end() ? std::string() : id->second;
    spdlog::warn("redis: entry {} is not a job ({}); filed under {}", entry.id, e.what(), schema::kDead);
    redis_pipeline_.add(schema::dead_letter(entry.id, job_id, std::string("malformed job: ") + e.what(),
                                            options_.redis.dead_letters_kept, options_.redis.retention_s),
                        nullptr, OnFailure::kRetry);
    metrics_.job_rejected("malformed");
    return;
  }
  if (job.id.empty()) job.id = "redis-" + entry.id;
  auto known = jobs_.find(job.id);
  if (own_pending && known != jobs_.end() && known->second.redis_entry == entry.id &&
      (known->second.phase == JobPhase::kQueued || known->second.phase == JobPhase::kRunning)) {
    return;  // a reconnect, not a restart: we hold it already
  }
  RedisCommand command = schema::take(options_.redis.consumer, job.id, entry.id);
  redis_pipeline_.add(
      std::move(command),
      [this, job = std::move(job), entry_id = entry.id](const RedisReply& reply) mutable {
        if (reply.is_error()) {
          // It stays pending for us: read again after a reconnect, or claimed by another broker.
          if (!connection_lost(reply)) spdlog::warn("redis: taking {}: {}", entry_id, reply.text);
          return;
        }
        try {
          redis_admit(std::move(job), entry_id, schema::take_of(reply));
        } catch (const Error& e) {
          spdlog::warn("redis: taking {}: {}", entry_id, e.what());
        }
      },
      OnFailure::kDrop);
}

void Broker::redis_admit(protocol::Job job, const std::string& entry, const schema::Take& take) {
  if (take.outcome != schema::Take::Outcome::kRun) return;  // finished or a duplicate: acknowledged
  auto it = jobs_.find(job.id);
  if (it != jobs_.end() && it->second.phase != JobPhase::kRemote) return;  // ours already
  const auto now = SteadyClock::now();
  if (it == jobs_.end()) {
    JobRecord record;
    record.phase = JobPhase::kRemote;  // until admitted below
    record.submitted_at = now;
    it = jobs_.emplace(job.id, std::move(record)).first;
  }
  JobRecord& record = it->second;
  const std::string id = job.id;
  const int64_t deadline = job.deadline_ms > 0 ? job.deadline_ms : options_.default_deadline_ms;
  record.deadline_at = now + std::chrono::milliseconds(schema::entry_time_ms(entry) + deadline - wall_ms());
  record.prompt_tokens_estimate = estimate_prompt_tokens(job);
  record.job = std::move(job);
  record.redis_entry = entry;
  record.redis_owner_lost = false;
  record.attempt = std::max(record.attempt, take.attempt);
  if (take.cancel_requested) {  // cancelled while it waited in Redis
    record.next_seq = std::max(record.next_seq, take.next_seq);
    finish(record, protocol::FinalResult{.finish_reason = FinishReason::kCancelled});
    return;
  }
  if (take.deliveries > options_.redis.max_deliveries) {
    record.dead_reason = "delivered " + std::to_string(take.deliveries) + " times";
    record.next_seq = std::max(record.next_seq, take.next_seq);
    finish(record, error_result("the job was delivered " + std::to_string(take.deliveries) +
                                " times without finishing (its brokers died)"));
    return;
  }
  if (take.next_seq > record.next_seq) {
    record.phase = JobPhase::kQueued;  // not in the queue until its stream is caught up
    redis_catch_up(id, take.next_seq);
    return;
  }
  record.phase = JobPhase::kQueued;
  const bool continuation = !record.streamed.empty();
  if (continuation) {
    queue_.push_front(id, record.job.priority, record.prompt_tokens_estimate + static_cast<int64_t>(record.streamed.size()));
  } else if (!queue_.push_back(id, record.job.priority, record.prompt_tokens_estimate)) {
    record.phase = JobPhase::kRemote;  // full: left pending; another broker (or we) claims it later
    return;
  }
  dispatch();
}

// A previous owner streamed part of the job: its tokens are the continuation's prefix, and the
// events this broker has not published yet are published now.
void Broker::redis_catch_up(const std::string& id, int64_t next_seq) {
  redis_pipeline_.add(
      schema::read_results(id),
      [this, id, next_seq](const RedisReply& reply) {
        auto it = jobs_.find(id);
        if (it == jobs_.end() || it->second.phase != JobPhase::kQueued) return;
        JobRecord& job = it->second;
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
            publish(job, protocol::Event{.id = id, .token_ids = stored.token_ids, .text = stored.text}, false);
          }
        } catch (const Error& e) {
          spdlog::warn("job {}: result stream unreadable ({}); running it from the start", id, e.what());
        }
        job.next_seq = std::max(job.next_seq, next_seq);
        queue_.push_front(id, job.job.priority, job.prompt_tokens_estimate + static_cast<int64_t>(job.streamed.size()));
        dispatch();
      },
      OnFailure::kDrop);
}

// Jobs accepted or followed here and run elsewhere: their result streams, read from where we
// are; and flashq:control, for cancel requests of jobs that run here.
void Broker::redis_relay(SteadyClock::time_point now) {
  if (redis_relaying_ || (!redis_relay_again_ && now - redis_last_relay_ < kRedisReadInterval)) return;
  redis_relay_again_ = false;
  redis_last_relay_ = now;
  RedisCommand read = {"XREAD", "COUNT", "1000", "STREAMS", schema::kControl};
  std::vector<std::string> positions = {redis_control_from_};
  for (const auto& [id, job] : jobs_) {
    if (job.phase != JobPhase::kRemote) continue;
    read.push_back(schema::out_key(id));
    positions.push_back(job.relayed_up_to);
    if (positions.size() > 512) break;
  }
  read.insert(read.end(), positions.begin(), positions.end());
  redis_relaying_ = true;
  redis_pipeline_.add(
      std::move(read),
      [this](const RedisReply& reply) {
        redis_relaying_ = false;
        if (reply.is_error()) return;
        for (const auto& [key, entries] : schema::streams_of(reply)) {
          redis_relay_again_ = redis_relay_again_ || !entries.empty();  // more may be on the way
          if (key == schema::kControl) {
            if (!entries.empty()) redis_control_from_ = entries.back().id;
            for (const std::string& id : schema::cancelled_ids(entries)) {
              auto job = jobs_.find(id);
              if (job != jobs_.end() && job->second.phase != JobPhase::kRemote) cancel_job(job->second);
            }
            continue;
          }
          auto it = jobs_.find(key.substr(std::string("flashq:out:").size()));
          if (it == jobs_.end() || it->second.phase != JobPhase::kRemote) continue;
          JobRecord& job = it->second;
          for (const schema::Entry& entry : entries) {
            job.relayed_up_to = entry.id;
            schema::StoredEvent stored;
            try {
              stored = schema::event_of(entry);
            } catch (const Error& e) {
              spdlog::warn("job {}: unreadable result entry {}: {}", job.job.id, entry.id, e.what());
              continue;
            }
            if (stored.seq < job.next_seq) continue;
            job.next_seq = stored.seq;
            if (stored.final_result) {
              job.phase = JobPhase::kFinished;
              job.final_result = stored.final_result;
              publish(job, protocol::Event{.id = job.job.id, .final_result = stored.final_result}, false);
              finished_order_.push_back(job.job.id);
              break;
            }
            job.streamed.insert(job.streamed.end(), stored.token_ids.begin(), stored.token_ids.end());
            job.streamed_text_bytes += static_cast<int64_t>(stored.text.size());
            publish(job, protocol::Event{.id = job.job.id, .token_ids = stored.token_ids, .text = stored.text}, false);
          }
        }
      },
      OnFailure::kDrop);
}

// CANCEL of a job this broker does not run: whoever runs it (or takes it later) cancels it, and
// the cancelled final reaches us like any of its events. Answered at once, like STATUS, so that a
// producer's next request finds the cancel taken (Client::cancel relies on that order).
void Broker::redis_cancel(const std::string& producer, const std::string& id) {
  RedisReply reply{.type = RedisReply::Type::kError, .text = "not connected"};
  try {
    if (redis_settled()) reply = redis_->command(schema::cancel(id, options_.redis.control_kept));
  } catch (const Error& e) {
    reply.text = e.what();
  }
  if (reply.is_error()) {
    send_to(frontend_, producer, protocol::ErrorReply{"unavailable", "job '" + id + "': redis: " + reply.text, id});
  } else if (reply.text == "not_found") {
    send_to(frontend_, producer, protocol::ErrorReply{"not_found", "no job '" + id + "'", id});
  } else if (reply.text == "requested") {
    redis_follow(id);  // a submitter or subscriber here gets the cancelled final
  }
}

// Relays the stream of a job that another broker runs (for a subscriber here) once Redis knows
// it. Until then (no broker took it yet, or it is not submitted yet) its id stays awaited.
void Broker::redis_follow(const std::string& id) {
  redis_pipeline_.add(
      {"HEXISTS", schema::job_key(id), "state"},
      [this, id](const RedisReply& reply) {
        const bool known_here = jobs_.count(id) > 0;
        const bool known_to_redis = !reply.is_error() && reply.integer == 1;
        if (known_here || known_to_redis) redis_awaited_.erase(id);
        if (known_here || !known_to_redis) return;
        JobRecord record;
        record.job.id = id;
        record.phase = JobPhase::kRemote;
        record.submitted_at = SteadyClock::now();
        jobs_.emplace(id, std::move(record));
      },
      OnFailure::kDrop);
}

// Subscriptions to jobs Redis did not know yet are asked about again, a few times a second, until
// the job appears or its last subscriber leaves.
void Broker::redis_check_awaited(SteadyClock::time_point now) {
  if (redis_awaited_.empty() || redis_checking_awaited_ || now - redis_last_await_check_ < kAwaitedCheckInterval) {
    return;
  }
  redis_last_await_check_ = now;
  for (auto it = redis_awaited_.begin(); it != redis_awaited_.end();) {
    if (jobs_.count(*it)) {
      it = redis_awaited_.erase(it);  // submitted here meanwhile: streamed like any job of ours
    } else {
      redis_follow(*it++);
    }
  }
  // Replies come in order: this one ends the round, so a slow Redis never has two rounds queued.
  redis_checking_awaited_ = true;
  redis_pipeline_.add({"PING"}, [this](const RedisReply&) { redis_checking_awaited_ = false; }, OnFailure::kDrop);
}

// Entries this broker holds are claimed again now and then, so they never look idle to the
// others; entries idle past the timeout (their broker died) are claimed for ourselves.
void Broker::redis_keep_claimed() {
  const auto now = SteadyClock::now();
  if (now - redis_last_keep_ < std::chrono::milliseconds(std::max<int64_t>(options_.redis.claim_idle_ms / 3, 10))) {
    return;
  }
  redis_last_keep_ = now;
  std::vector<std::string> entries;
  for (const auto& [id, job] : jobs_) {
    if ((job.phase == JobPhase::kQueued || job.phase == JobPhase::kRunning) && !job.redis_entry.empty()) {
      entries.push_back(job.redis_entry);
    }
    if (entries.size() >= 1000) {
      redis_pipeline_.add(schema::keep_claimed(options_.redis.consumer, entries), nullptr, OnFailure::kDrop);
      entries.clear();
    }
  }
  if (!entries.empty()) redis_pipeline_.add(schema::keep_claimed(options_.redis.consumer, entries), nullptr, OnFailure::kDrop);
  const int64_t capacity = free_capacity();
  if (draining_ || capacity <= 0) return;
  redis_pipeline_.add(
      schema::claim_idle(options_.redis.consumer, options_.redis.claim_idle_ms, capacity),
      [this](const RedisReply& reply) {
        if (reply.is_error() || reply.elements.size() < 2) return;
        for (const schema::Entry& entry : schema::entries_of(reply.elements[1])) {
          spdlog::info("redis: claimed entry {} of a silent broker", entry.id);
          redis_take(entry, false);
        }
      },
      OnFailure::kDrop);
}

// Events wait for the end of the loop turn, to go to Redis as one script call per job.
void Broker::redis_event(JobRecord& job, protocol::Event event) {
  if (!job.redis_owner_lost) redis_events_[job.job.id].push_back(std::move(event));
}

void Broker::redis_store_events(const std::string& id) {
  auto it = redis_events_.find(id);
  if (it == redis_events_.end()) return;
  RedisCommand command = schema::events(options_.redis.consumer, id, it->second, options_.redis.max_events_per_job);
  redis_pipeline_.add(std::move(command),
                      [this, id, events = std::move(it->second)](const RedisReply& reply) {
                        const int64_t first = events.front().seq;
                        if (reply.is_error()) {
                          spdlog::warn("job {}: storing events from {}: {}", id, first, reply.text);
                        } else if (reply.integer == -1) {
                          redis_lost_ownership(id);
                        } else if (reply.integer == -2) {
                          spdlog::warn("job {}: events from {} out of order in redis", id, first);
                        } else if (auto owned = jobs_.find(id); owned != jobs_.end() && !owned->second.redis_owner_lost) {
                          for (const protocol::Event& event : events) deliver(owned->second, event);
                        }
                      },
                      OnFailure::kRetry);
  redis_events_.erase(it);
}

void Broker::redis_final(JobRecord& job, protocol::Event final_event) {
  if (job.redis_owner_lost) return;
  redis_store_events(job.job.id);  // before the final
  redis_pipeline_.add(schema::final(options_.redis.consumer, job.job.id, job.redis_entry, final_event.seq,
                                    *final_event.final_result, options_.redis.retention_s, job.dead_reason,
                                    options_.redis.dead_letters_kept),
                      [this, final_event = std::move(final_event)](const RedisReply& reply) {
                        const std::string& id = final_event.id;
                        if (reply.is_error()) {
                          spdlog::warn("job {}: storing the final: {}", id, reply.text);
                          return;
                        }
                        auto owned = jobs_.find(id);
                        if (owned == jobs_.end() || owned->second.redis_owner_lost) return;
                        if (reply.integer == 1) {
                          deliver(owned->second, final_event);
                        } else {
                          // -1: another broker owns the job; 0: a final is stored already (another
                          // broker's, or ours when this was a retry): the stored one is relayed.
                          spdlog::warn("job {}: {}; relaying the stored final", id,
                                       reply.integer == 0 ? "already finished in redis" : "another broker owns it");
                          redis_lost_ownership(id);
                        }
                      },
                      OnFailure::kRetry);
}

// Another broker took the job (we were silent too long): stop running it and relay instead, from
// where Redis holds its stream (what our subscribers have seen).
void Broker::redis_lost_ownership(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.redis_owner_lost) return;
  JobRecord& job = it->second;
  spdlog::warn("job {}: another broker took it over; relaying its results", id);
  job.redis_owner_lost = true;
  if (job.phase == JobPhase::kQueued) queue_.remove(id);
  if (job.phase == JobPhase::kRunning) {
    send_to(backend_, job.worker, protocol::Cancel{id});
    if (WorkerRecord* worker = workers_.find(job.worker)) worker->jobs.erase(id);
    job.worker.clear();
  }
  if (job.phase == JobPhase::kFinished) {  // its final was refused: the new owner's comes instead
    job.final_result.reset();
    std::erase(finished_order_, id);
  }
  job.phase = JobPhase::kRemote;
  job.next_seq = job.stored_next_seq;
  job.streamed.resize(job.stored_tokens);
  job.streamed_text_bytes = job.stored_text_bytes;
  redis_events_.erase(id);
}

bool Broker::redis_status(const std::string& producer, const protocol::Status& status) {
  if (!redis_settled()) return false;
  try {
    const RedisReply reply = redis_->command(schema::status(status.id));
    if (reply.is_error() || reply.elements.empty()) return false;
    RedisFields fields = schema::fields_of(reply);
    protocol::StatusReply out{.id = status.id};
    const std::string state = fields["state"];
    out.state = state == "finished" ? protocol::JobState::kFinished
                : state == "running" ? protocol::JobState::kRunning
                                     : protocol::JobState::kQueued;
    out.attempt = fields.count("attempt") ? std::stoll(fields["attempt"]) : 0;
    out.seq = fields.count("next_seq") ? std::stoll(fields["next_seq"]) : 0;
    if (fields.count("final")) out.final_result = schema::final_from_json(fields["final"]);
    send_to(frontend_, producer, out);
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("redis: status of {}: {}", status.id, e.what());
    return false;
  }
}

bool Broker::redis_replay(const std::string& producer, const protocol::Replay& replay) {
  if (!redis_settled()) return false;
  try {
    const RedisReply reply = redis_->command(schema::read_results(replay.id));
    if (reply.is_error() || reply.elements.empty()) return false;
    for (const schema::Entry& entry : schema::entries_of(reply)) {
      schema::StoredEvent stored = schema::event_of(entry);
      if (stored.seq < replay.from_seq) continue;
      send_to(frontend_, producer,
              protocol::Event{.id = replay.id,
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

}  // namespace flashq
