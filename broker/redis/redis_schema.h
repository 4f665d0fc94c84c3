// What flashq keeps in Redis (docs/redis.md), as commands and replies:
//   flashq:jobs        intake stream, consumer group `flashq`, one consumer per broker
//   flashq:model:<m>:jobs  jobs naming model <m>, sorted out of flashq:jobs by a broker without a
//                      worker for it; same group, read only by brokers serving <m>
//   flashq:model:<m>:servers  the brokers serving <m>, scored by when their lease ends
//   flashq:model:<m>:last_served  when <m> was last known to be served (Redis's clock, ms)
//   flashq:models      the models with a stream or a server
//   flashq:jobs:<name> broker <name>'s handover stream: jobs of sessions it owns, taken from
//                      flashq:jobs by another broker; same group, pending for <name> from the start
//   flashq:job:{<id>}  status hash: state, owner, entry, stream, attempt, deliveries, next_seq, final,
//                      metadata, first_assigned_ms, first_token_ms
//   flashq:session:<s> the broker that last ran session <s> (expires)
//   flashq:broker:<n>  present while broker <n> is alive and has workers (expires)
//   flashq:brokers     the brokers whose handover streams are claimed from (alive, or not empty)
//   flashq:out:{<id>}  result stream: seq, token_ids (JSON), text; the last entry has `final`
//   flashq:dead        dead letters: id, reason, entry
//   flashq:control     requests every broker reads: `cancel <id>`
// A job's two keys carry its id as a Redis Cluster hash tag, so they share a slot.
// Every write is idempotent (Lua scripts check the job's state, owner and next seq), so a
// pipeline cut by a lost connection can be sent again whole.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_job_fields.h"
#include "broker/store_outcome.h"
#include "shared/protocol/final_result.h"
#include "shared/protocol/job.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::redis_schema {

inline constexpr const char* kJobs = "flashq:jobs";
inline constexpr const char* kGroup = "flashq";
inline constexpr const char* kDead = "flashq:dead";
inline constexpr const char* kControl = "flashq:control";
inline constexpr const char* kBrokers = "flashq:brokers";
inline constexpr const char* kModels = "flashq:models";
std::string job_key(const std::string& id);
std::string handover_key(const std::string& consumer);  // flashq:jobs:<consumer>
std::string broker_key(const std::string& consumer);    // flashq:broker:<consumer>
std::string session_key(const std::string& session);    // flashq:session:<session>
std::string model_jobs_key(const std::string& model);   // flashq:model:<model>:jobs
std::string out_key(const std::string& id);

// A flat name, value, name, value ... reply (an entry's fields, HGETALL) as a map.
RedisFields fields_of(const RedisReply& flat);

// One stream entry: its id and fields.
struct Entry {
  std::string id;
  RedisFields fields;
};
// The entries of an XREADGROUP / XREAD / XRANGE / XAUTOCLAIM reply (for XREAD, of every stream).
std::vector<Entry> entries_of(const RedisReply& reply);
// XREAD over several streams: (stream key, entries) per stream.
std::vector<std::pair<std::string, std::vector<Entry>>> streams_of(const RedisReply& reply);

RedisCommand create_group();  // BUSYGROUP (it exists) is fine
RedisCommand create_handover_group(const std::string& consumer);  // of the consumer's own stream; BUSYGROUP fine
RedisCommand register_broker(const std::string& consumer);        // into flashq:brokers
RedisCommand ping();          // its reply only marks a point in the pipeline
// The Lua scripts the commands below run, for RedisConnection::register_script.
std::vector<std::string> scripts();

// A job from ZeroMQ into the intake stream, unless its id is known: reply {state, final-or-entry}
// where state is "new" or the known job's state.
RedisCommand intake(const protocol::Job& job);

// New entries of flashq:jobs and of the streams of `models` (their groups made first:
// create_model_group), and the entries handed to this broker after `handed_after` (they are
// pending for it from the moment they are handed, so they are read as its own pending ones).
// Reply as streams_of() reads it: keys kJobs, handover_key(consumer) and model_jobs_key(model).
RedisCommand read_new(const std::string& consumer, int64_t count, const std::string& handed_after,
                      const std::vector<std::string>& models);
RedisCommand create_model_group(const std::string& model);  // BUSYGROUP (it exists) is fine
// This consumer's pending entries in `stream` after entry `after` ("0": all).
RedisCommand read_own_pending(const std::string& stream, const std::string& consumer, int64_t count,
                              const std::string& after);
// Entries idle past `idle_ms` in flashq:jobs, every broker's handover stream and the streams of
// `models`, claimed for `consumer`. Reply as streams_of() reads it.
RedisCommand claim_idle(const std::string& consumer, int64_t idle_ms, int64_t count,
                        const std::vector<std::string>& models);
RedisCommand keep_claimed(const std::string& stream, const std::string& consumer,
                          const std::vector<std::string>& entries);
// This broker is alive and can run jobs for `ttl_ms` more (sessions may be handed to it; it is
// in flashq:brokers); or not.
RedisCommand alive(const std::string& consumer, int64_t ttl_ms);
RedisCommand not_alive(const std::string& consumer);

// This broker serves `models_here` (a lease of `lease_ms`, renewed by the next call) and no other
// model; the reply says which models flashq knows and whether, and since when, each is served.
RedisCommand served(const std::string& consumer, int64_t lease_ms, const std::set<std::string>& models_here);
struct ServedModel {
  std::string name;
  bool live = false;         // a broker with a worker for it holds a lease now
  int64_t last_served_ms = 0;  // Redis's clock; 0: never known to be served
};
struct ServedModels {
  int64_t redis_now_ms = 0;
  std::vector<ServedModel> models;
};
ServedModels served_of(const RedisReply& reply);

// What a take needs of the job besides its entry.
struct TakeContext {
  std::string session;  // empty: none
  int64_t session_ttl_ms = 0;
  std::string metadata_json;  // empty: none
  std::string model;          // empty: none
  bool model_served_here = false;
};
// A delivered entry of `stream` becomes this broker's to run; or, when it is an entry of
// flashq:jobs naming a model this broker does not serve, goes to the model's stream; or, when its
// session is owned by another live broker serving its model, goes to that broker's handover
// stream. A run makes this broker the session's owner for `session_ttl_ms`. The job's metadata is
// kept in its status hash unless it is there already. Reply: see Take.
RedisCommand take(const std::string& stream, const std::string& consumer, const std::string& job_id,
                  const std::string& entry, const TakeContext& context);
struct Take {
  enum class Outcome { kRun, kFinished, kDuplicate, kHanded, kSorted } outcome = Outcome::kRun;
  int64_t deliveries = 0;
  int64_t next_seq = 0;  // events already in the result stream (a previous owner's)
  int64_t attempt = 0;
  std::string final_json;        // kFinished
  std::string moved_to;          // kHanded: the broker owning the job's session; kSorted: the model's stream
  bool cancel_requested = false;  // kRun: a CANCEL came before any broker ran it
  // kRun, on Redis's clock (unix ms, as entry ids): now, and the job's first assignment and first
  // token under any broker (0: not yet).
  int64_t redis_now_ms = 0;
  int64_t first_assigned_ms = 0;
  int64_t first_token_ms = 0;
};
Take take_of(const RedisReply& reply);

// The job's attempt-th attempt started (the first one also stores when).
RedisCommand mark_running(const std::string& job_id, int64_t attempt);
// A job's events in seq order. Reply: how many were new (events already there are skipped), -1
// when another broker owns the job now, -2 when one is out of order.
RedisCommand events(const std::string& consumer, const std::string& job_id, const std::vector<protocol::Event>& list,
                    int64_t max_events);
// Stores the final result, acknowledges and deletes the entry (of `stream`; empty: flashq:jobs),
// sets retention; with a `dead_reason`, also a dead letter. Reply 1 stored, 0 already final, -1
// another broker owns it.
RedisCommand final(const std::string& consumer, const std::string& job_id, const std::string& stream,
                   const std::string& entry, int64_t seq, const protocol::FinalResult& result, int64_t retention_s,
                   const std::string& dead_reason, int64_t dead_max);
// A malformed entry of `stream`: straight to flashq:dead, acknowledged and deleted; when it names
// a valid job id, that id's result stream gets a `rejected` final with the reason.
RedisCommand dead_letter(const std::string& stream, const std::string& entry, const std::string& job_id,
                         const std::string& reason, int64_t dead_max, int64_t retention_s);

// CANCEL of a job that may run on another broker: flags the job and tells every broker on
// flashq:control. Reply "requested", "finished" or "not_found".
RedisCommand cancel(const std::string& job_id, int64_t control_max);
// The job ids that flashq:control entries ask to cancel.
std::vector<std::string> cancelled_ids(const std::vector<Entry>& control_entries);
// The newest flashq:control entry (XREVRANGE): requests made before a broker started are not its.
RedisCommand last_control_entry();

// One XREAD of flashq:control after `control_from` and of the result streams of `jobs` (job id,
// last entry read), so one round trip follows every job run elsewhere. The reply is read with
// streams_of(), whose keys are kControl or out_key(id) (job_of_out_key gives the id back).
RedisCommand read_control_and_results(const std::string& control_from,
                                      const std::vector<std::pair<std::string, std::string>>& jobs);
std::string job_of_out_key(const std::string& key);
// Whether Redis knows the job (HEXISTS of its status hash): reply integer 1 when it does.
RedisCommand job_known(const std::string& job_id);

RedisCommand read_results(const std::string& job_id);  // XRANGE, every event
RedisCommand status(const std::string& job_id);         // HGETALL

std::string final_to_json(const protocol::FinalResult& result);
protocol::FinalResult final_from_json(const std::string& json);

// A result-stream entry as an event (kProtocol when it is not one of ours).
using StoredEvent = flashq::StoredEvent;
StoredEvent event_of(const Entry& entry);

// The unix time in ms at which an entry id ("<ms>-<n>") was written.
int64_t entry_time_ms(const std::string& entry_id);

}  // namespace flashq::redis_schema
