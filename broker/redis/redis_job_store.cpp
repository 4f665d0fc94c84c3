#include "broker/redis/redis_job_store.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "broker/redis/redis_url.h"
#include "shared/error.h"

namespace flashq {
namespace {

using OnFailure = RedisPipeline::OnFailure;
using Replication = RedisPipeline::Replication;
namespace schema = redis_schema;

bool connection_lost_in(const RedisReply& reply) {
  return reply.is_error() && reply.text.rfind("connection lost", 0) == 0;
}

}  // namespace

std::string default_redis_consumer(const std::string& frontend_endpoint) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "/" + frontend_endpoint;
}

RedisJobStore::RedisJobStore(const BrokerOptions& options, const std::string& frontend_endpoint)
    : options_(options.redis),
      route_sessions_(options.routing.cache_aware),
      unknown_model_grace_ms_(options.unknown_model_grace_ms),
      default_deadline_ms_(options.default_deadline_ms),
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

int64_t RedisJobStore::free_capacity(const StoreTurn& broker) const {
  if (broker.workers == 0) return 0;  // leave the jobs to brokers that have workers
  return broker.free_slots + options_.prefetch - broker.queued;
}

// Replies that came in run their handlers, which note what happened; the broker applies that,
// then turn() sends this turn's commands (the follow-ups the broker asked for among them), and
// the loop goes on without waiting.
StoreOutcomes RedisJobStore::collect() {
  replies_read_ = false;
  if (!connection_.connected()) {
    ready_ = false;
    fetching_ = false;
    follower_.on_connection_lost();
    if (!connection_.ensure_connected()) return std::exchange(outcomes_, {});  // backs off by itself
    spdlog::info("redis {}: connected", connection_.url().describe());
  }
  if (!ready_) on_connect();
  if (ready_) {
    replies_read_ = pipeline_.receive(connection_);
    if (!replies_read_) connection_lost();
  }
  return std::exchange(outcomes_, {});
}

void RedisJobStore::turn(const StoreTurn& broker) {
  if (!replies_read_) return;
  replies_read_ = false;
  const auto now = SteadyClock::now();
  if (!broker.draining) fetch(now, broker);
  follower_.turn(now);
  announce_alive(broker);
  announce_models(broker);
  keep_claimed(broker);
  while (!unstored_events_.empty()) store_events(unstored_events_.begin()->first);
  if (!pipeline_.send(connection_)) connection_lost();
}

void RedisJobStore::connection_lost() {
  spdlog::warn("redis {}: {}; {} writes kept for when it is back", connection_.url().describe(),
               connection_.last_error(), pipeline_.retained());
  ready_ = false;
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
  alive_ = false;  // said again (Redis may have lost the key) by the turn's announce_alive
}

std::optional<IntakeAnswer> RedisJobStore::submit(const std::string& producer, protocol::Job job) {
  if (!ready_) return IntakeAnswer{.kind = IntakeAnswer::Kind::kRefused, .producer = producer, .job = std::move(job)};
  RedisCommand command = schema::intake(job);  // before the handler takes the job
  // With --redis-wait-replicas, ACCEPTED only once the replicas have the entry too, so that it
  // survives a failover to one of them (docs/redis.md, "Sentinel and failover"); else nothing is
  // kept of the job here, so a retry of the id asks Redis (and its replicas) again.
  pipeline_.add(
      std::move(command),
      [this, producer, job = std::move(job)](const RedisReply& stored) mutable {
        IntakeAnswer answer{.kind = IntakeAnswer::Kind::kStored, .producer = producer};
        if (stored.is_error() || stored.elements.size() < 2) {
          // Not stored (or not on enough replicas), so not accepted: the producer may try again.
          if (!connection_lost_in(stored)) spdlog::warn("job {}: not accepted: {}", job.id, stored.text);
          answer.kind = IntakeAnswer::Kind::kRefused;
        } else if (const std::string& state = stored.elements[0].text; state == "finished") {
          // An idempotent resubmission of a finished job: its final again.
          answer.kind = IntakeAnswer::Kind::kFinished;
          try {
            answer.final_result = schema::final_from_json(stored.elements[1].text);
          } catch (const Error& e) {
            spdlog::warn("job {}: stored final unreadable: {}", job.id, e.what());
          }
        } else {
          answer.first_time = state == "new";
        }
        answer.job = std::move(job);
        outcomes_.push_back(std::move(answer));
      },
      OnFailure::kDrop, Replication::kReplicas);
  return std::nullopt;
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
void RedisJobStore::fetch(SteadyClock::time_point now, const StoreTurn& broker) {
  if (fetching_ || (!fetch_again_ && now - last_fetch_ < kReadInterval)) return;
  const int64_t count = free_capacity(broker);
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
    outcomes_.push_back(EntryRefused{"malformed"});
    return;
  }
  if (job.id.empty()) job.id = "redis-" + entry.id;
  if (own_pending) {
    const auto held = held_.find(job.id);
    if (held != held_.end() && held->second.entry == entry.id && held->second.stream == stream) {
      return;  // a reconnect, not a restart: we hold it already
    }
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
          taken(std::move(job), stream, entry_id, submitted_ms, schema::take_of(reply));
        } catch (const Error& e) {
          spdlog::warn("redis: taking {}: {}", entry_id, e.what());
        }
      },
      OnFailure::kRetry, Replication::kReplicas);
}

void RedisJobStore::taken(protocol::Job job, const std::string& stream, const std::string& entry,
                          int64_t submitted_ms, const schema::Take& take) {
  if (take.outcome == schema::Take::Outcome::kHanded) {
    spdlog::debug("job {}: session '{}' handed to broker {}", job.id, job.session.value_or(""), take.moved_to);
    outcomes_.push_back(SessionHandedOver{});
    return;
  }
  if (take.outcome == schema::Take::Outcome::kSorted) {  // for the brokers serving its model
    spdlog::debug("job {}: no worker here for model '{}'; moved to {}", job.id, job.model.value_or(""), take.moved_to);
    return;
  }
  if (take.outcome != schema::Take::Outcome::kRun) return;  // finished or a duplicate: acknowledged
  // Held from now on, unless the broker leaves it pending; an entry held for the id already stays.
  held_.emplace(job.id, HeldEntry{stream, entry});
  lost_.erase(job.id);
  follower_.known_here(job.id);
  // Its figures count from what Redis holds, on Redis's clock: submitted when its entry was added
  // (the id's milliseconds), first assigned and first streamed when the store says, under whichever
  // broker that was (this one before a restart, or a dead one). Never a time this process made up.
  const auto now = SteadyClock::now();
  const auto at = [&](int64_t redis_ms) {
    return now - std::chrono::milliseconds(std::max<int64_t>(0, take.redis_now_ms - redis_ms));
  };
  TakenJob out{.entry = entry,
               .submitted_at = at(submitted_ms),
               .attempt = take.attempt,
               .next_seq = take.next_seq,
               .deliveries = take.deliveries,
               .cancel_requested = take.cancel_requested};
  if (take.first_assigned_ms > 0) out.first_assigned_at = at(take.first_assigned_ms);
  if (take.first_token_ms > 0) out.first_token_at = at(take.first_token_ms);
  const int64_t deadline = job.deadline_ms > 0 ? job.deadline_ms : default_deadline_ms_;
  out.deadline_at = now + std::chrono::milliseconds(submitted_ms + deadline - take.redis_now_ms);
  out.job = std::move(job);
  outcomes_.push_back(std::move(out));
}

void RedisJobStore::leave_pending(const std::string& id, const std::string& entry) {
  const auto held = held_.find(id);
  if (held != held_.end() && held->second.entry == entry) held_.erase(held);
}

// A previous owner streamed part of the job: its tokens are the continuation's prefix, and the
// events this broker has not published yet are published by the broker.
void RedisJobStore::catch_up(const std::string& id, int64_t next_seq) {
  pipeline_.add(
      schema::read_results(id),
      [this, id, next_seq](const RedisReply& reply) {
        CaughtUp caught{.id = id, .next_seq = next_seq, .read = !reply.is_error()};
        if (!caught.read) {
          held_.erase(id);  // left pending; taken again after a reconnect
        } else {
          try {
            for (const schema::Entry& entry : schema::entries_of(reply)) caught.events.push_back(schema::event_of(entry));
          } catch (const Error& e) {
            spdlog::warn("job {}: result stream unreadable ({}); running it from the start", id, e.what());
          }
        }
        outcomes_.push_back(std::move(caught));
      },
      OnFailure::kDrop);
}

// CANCEL of a job this broker does not run: whoever runs it (or takes it later) cancels it, and
// the cancelled final reaches us like any of its events. Answered at once, like STATUS, so that a
// producer's next request finds the cancel taken (Client::cancel relies on that order).
std::optional<RemoteCancel> RedisJobStore::cancel_elsewhere(const std::string& id) {
  RedisReply answer{.type = RedisReply::Type::kError, .text = "not connected"};
  try {
    if (settled()) answer = connection_.command(schema::cancel(id, options_.control_kept));
  } catch (const Error& e) {
    answer.text = e.what();
  }
  if (answer.is_error()) return RemoteCancel{.kind = RemoteCancel::Kind::kUnavailable, .error = answer.text};
  if (answer.text == "not_found") return RemoteCancel{.kind = RemoteCancel::Kind::kNotFound};
  if (answer.text != "requested") return RemoteCancel{.kind = RemoteCancel::Kind::kFinished};
  follower_.ask_known(id);  // a submitter or subscriber here gets the cancelled final
  return RemoteCancel{.kind = RemoteCancel::Kind::kRequested};
}

// Alive (sessions may be handed to us) while we have workers and are not draining: said at once
// when that changes, and refreshed with the claims (keep_claimed). The key lives one claim
// timeout, the time after which our entries go to other brokers too.
void RedisJobStore::announce_alive(const StoreTurn& broker) {
  const bool alive = !broker.draining && broker.workers > 0;
  if (alive == alive_) return;
  alive_ = alive;
  pipeline_.add(alive ? schema::alive(options_.consumer, options_.claim_idle_ms) : schema::not_alive(options_.consumer),
                nullptr, OnFailure::kDrop);
}

// Entries this broker holds are claimed again now and then, so they never look idle to the
// others; entries idle past the timeout (their broker died) are claimed for ourselves.
void RedisJobStore::keep_claimed(const StoreTurn& broker) {
  const auto now = SteadyClock::now();
  if (now - last_keep_ < std::chrono::milliseconds(std::max<int64_t>(options_.claim_idle_ms / 3, 10))) return;
  last_keep_ = now;
  if (alive_) pipeline_.add(schema::alive(options_.consumer, options_.claim_idle_ms), nullptr, OnFailure::kDrop);
  std::map<std::string, std::vector<std::string>> held;  // entries per stream
  auto keep = [&](const std::string& stream) {
    pipeline_.add(schema::keep_claimed(stream, options_.consumer, held[stream]), nullptr, OnFailure::kDrop);
    held[stream].clear();
  };
  for (const auto& [id, entry] : held_) {
    const std::string& stream = entry.stream.empty() ? std::string(schema::kJobs) : entry.stream;
    held[stream].push_back(entry.entry);
    if (held[stream].size() >= 1000) keep(stream);
  }
  for (const auto& [stream, entries] : taking_) {
    for (const std::string& entry : entries) held[stream].push_back(entry);
  }
  for (const auto& [stream, list] : held) {
    if (!list.empty()) keep(stream);
  }
  const int64_t capacity = free_capacity(broker);
  if (broker.draining || capacity <= 0) return;
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
void RedisJobStore::announce_models(const StoreTurn& broker) {
  const auto now = SteadyClock::now();
  static const std::set<std::string> kNone;
  const std::set<std::string>& here = broker.draining ? kNone : broker.models;  // draining: no more jobs
  const auto interval = std::chrono::milliseconds(
      std::max<int64_t>(10, std::min(options_.claim_idle_ms, std::max<int64_t>(unknown_model_grace_ms_, 30)) / 3));
  if (here == models_here_ && (announcing_models_ || now - last_models_announced_ < interval)) return;
  models_here_ = here;
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
        outcomes_.push_back(ModelsServed{std::move(served)});
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
std::optional<protocol::Event> RedisJobStore::keep_event(protocol::Event event, const std::string& dead_reason) {
  if (lost_.count(event.id)) return std::nullopt;
  if (event.final_result) {
    store_final(std::move(event), dead_reason);
  } else {
    unstored_events_[event.id].push_back(std::move(event));
  }
  return std::nullopt;
}

void RedisJobStore::store_events(const std::string& id) {
  auto it = unstored_events_.find(id);
  if (it == unstored_events_.end()) return;
  RedisCommand command = schema::events(options_.consumer, id, it->second, options_.max_events_per_job);
  pipeline_.add(std::move(command),
                [this, id, events = std::move(it->second)](const RedisReply& reply) mutable {
                  const int64_t first = events.front().seq;
                  if (reply.is_error()) {
                    spdlog::warn("job {}: storing events from {}: {}", id, first, reply.text);
                  } else if (reply.integer == -1) {
                    lost_ownership(id);
                  } else if (reply.integer == -2) {
                    spdlog::warn("job {}: events from {} out of order in redis", id, first);
                  } else if (!lost_.count(id)) {
                    outcomes_.push_back(EventsKept{.id = id, .events = std::move(events)});
                  }
                },
                OnFailure::kRetry, Replication::kReplicas);
  unstored_events_.erase(it);
}

// The final acknowledges the entry the job was taken from: from now on it is not held.
void RedisJobStore::store_final(protocol::Event final_event, const std::string& dead_reason) {
  const std::string job_id = final_event.id;
  store_events(job_id);  // before the final
  HeldEntry held;
  if (auto found = held_.find(job_id); found != held_.end()) {
    held = std::move(found->second);
    held_.erase(found);
  }
  // Built before the handler takes the event: the order in which a call's arguments are
  // evaluated is unspecified, and a moved-from final would be stored without its error text.
  RedisCommand command =
      schema::final(options_.consumer, job_id, held.stream, held.entry, final_event.seq, *final_event.final_result,
                    options_.retention_s, dead_reason, options_.dead_letters_kept);
  pipeline_.add(
      std::move(command),
      [this, final_event = std::move(final_event)](const RedisReply& reply) mutable {
        const std::string& id = final_event.id;
        if (reply.is_error()) {
          spdlog::warn("job {}: storing the final: {}", id, reply.text);
          return;
        }
        if (lost_.count(id)) return;
        if (reply.integer == 1) {
          outcomes_.push_back(EventsKept{.id = id, .events = {std::move(final_event)}});
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

// Another broker took the job (we were silent too long): nothing more of ours is written, and the
// broker relays it instead, from where Redis holds its stream (what our subscribers have seen).
void RedisJobStore::lost_ownership(const std::string& id) {
  if (!lost_.insert(id).second) return;
  spdlog::warn("job {}: another broker took it over; relaying its results", id);
  unstored_events_.erase(id);
  held_.erase(id);
  outcomes_.push_back(OwnershipLost{id});
}

std::optional<protocol::StatusReply> RedisJobStore::status(const std::string& id) {
  if (!settled()) return std::nullopt;
  try {
    const RedisReply stored = connection_.command(schema::status(id));
    if (stored.is_error() || stored.elements.empty()) return std::nullopt;
    RedisFields fields = schema::fields_of(stored);
    protocol::StatusReply out{.id = id};
    const std::string state = fields["state"];
    out.state = state == "finished" ? protocol::JobState::kFinished
                : state == "running" ? protocol::JobState::kRunning
                                     : protocol::JobState::kQueued;
    out.attempt = fields.count("attempt") ? std::stoll(fields["attempt"]) : 0;
    out.seq = fields.count("next_seq") ? std::stoll(fields["next_seq"]) : 0;
    if (fields.count("final")) out.final_result = schema::final_from_json(fields["final"]);
    // What a gateway renders a response from, whichever broker ran the job (docs/gateway.md).
    if (fields.count("metadata")) out.metadata = metadata_from_json(fields["metadata"]);
    return out;
  } catch (const std::exception& e) {
    spdlog::warn("redis: status of {}: {}", id, e.what());
    return std::nullopt;
  }
}

StoredReplay RedisJobStore::replay(const protocol::Replay& replay) {
  StoredReplay out;
  if (!settled()) return out;
  try {
    const RedisReply stored_events = connection_.command(schema::read_results(replay.id));
    if (stored_events.is_error() || stored_events.elements.empty()) return out;
    for (const schema::Entry& entry : schema::entries_of(stored_events)) {
      schema::StoredEvent stored = schema::event_of(entry);
      if (stored.seq < replay.from_seq) continue;
      out.events.push_back(protocol::Event{.id = replay.id,
                                       .seq = stored.seq,
                                       .token_ids = std::move(stored.token_ids),
                                       .text = std::move(stored.text),
                                       .final_result = std::move(stored.final_result),
                                       .logprobs = std::move(stored.logprobs)});
    }
    out.answered = true;
  } catch (const std::exception& e) {
    spdlog::warn("redis: replay of {}: {}", replay.id, e.what());
  }
  return out;
}

StoreOutcomes RedisJobStore::flush(std::chrono::milliseconds timeout) {
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
  return std::exchange(outcomes_, {});
}

}  // namespace flashq
