// What flashq keeps in Redis (docs/redis.md), as commands and replies:
//   flashq:jobs        intake stream, consumer group `flashq`, one consumer per broker
//   flashq:jobs:<name> broker <name>'s handover stream: jobs of sessions it owns, taken from
//                      flashq:jobs by another broker; same group, pending for <name> from the start
//   flashq:job:<id>    status hash: state, owner, entry, stream, attempt, deliveries, next_seq, final
//   flashq:session:<s> the broker that last ran session <s> (expires)
//   flashq:broker:<n>  present while broker <n> is alive and has workers (expires)
//   flashq:brokers     the brokers whose handover streams are claimed from (alive, or not empty)
//   flashq:out:<id>    result stream: seq, token_ids (JSON), text; the last entry has `final`
//   flashq:dead        dead letters: id, reason, entry
//   flashq:control     requests every broker reads: `cancel <id>`
// Every write is idempotent (Lua scripts check the job's state, owner and next seq), so a
// pipeline cut by a lost connection can be sent again whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/redis/redis_connection.h"
#include "broker/redis/redis_job_fields.h"
#include "shared/protocol/final_result.h"
#include "shared/protocol/job.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::redis_schema {

inline constexpr const char* kJobs = "flashq:jobs";
inline constexpr const char* kGroup = "flashq";
inline constexpr const char* kDead = "flashq:dead";
inline constexpr const char* kControl = "flashq:control";
inline constexpr const char* kBrokers = "flashq:brokers";
std::string job_key(const std::string& id);
std::string handover_key(const std::string& consumer);  // flashq:jobs:<consumer>
std::string broker_key(const std::string& consumer);    // flashq:broker:<consumer>
std::string session_key(const std::string& session);    // flashq:session:<session>
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

// New entries of flashq:jobs, and the entries handed to this broker after `handed_after` (they
// are pending for it from the moment they are handed, so they are read as its own pending ones).
// Reply as streams_of() reads it: keys kJobs and handover_key(consumer).
RedisCommand read_new(const std::string& consumer, int64_t count, const std::string& handed_after);
// This consumer's pending entries in `stream` after entry `after` ("0": all).
RedisCommand read_own_pending(const std::string& stream, const std::string& consumer, int64_t count,
                              const std::string& after);
// Entries idle past `idle_ms` in flashq:jobs and every broker's handover stream, claimed for
// `consumer`. Reply as streams_of() reads it.
RedisCommand claim_idle(const std::string& consumer, int64_t idle_ms, int64_t count);
RedisCommand keep_claimed(const std::string& stream, const std::string& consumer,
                          const std::vector<std::string>& entries);
// This broker is alive and can run jobs for `ttl_ms` more (sessions may be handed to it; it is
// in flashq:brokers); or not.
RedisCommand alive(const std::string& consumer, int64_t ttl_ms);
RedisCommand not_alive(const std::string& consumer);

// A delivered entry of `stream` becomes this broker's to run, or, when its `session` (empty:
// none) is owned by another live broker, goes to that broker's handover stream. A run makes this
// broker the session's owner for `session_ttl_ms`. Reply: see Take.
RedisCommand take(const std::string& stream, const std::string& consumer, const std::string& job_id,
                  const std::string& entry, const std::string& session, int64_t session_ttl_ms);
struct Take {
  enum class Outcome { kRun, kFinished, kDuplicate, kHanded } outcome = Outcome::kRun;
  int64_t deliveries = 0;
  int64_t next_seq = 0;  // events already in the result stream (a previous owner's)
  int64_t attempt = 0;
  std::string final_json;        // kFinished
  std::string handed_to;         // kHanded: the broker owning the job's session
  bool cancel_requested = false;  // kRun: a CANCEL came before any broker ran it
};
Take take_of(const RedisReply& reply);

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
struct StoredEvent {
  int64_t seq = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  std::optional<protocol::FinalResult> final_result;
};
StoredEvent event_of(const Entry& entry);

// The unix time in ms at which an entry id ("<ms>-<n>") was written.
int64_t entry_time_ms(const std::string& entry_id);

// WAIT: blocks this connection until `replicas` replicas have acknowledged every write it made
// before, or `timeout_ms` passed. Reply: the number that did.
RedisCommand wait_replicas(int64_t replicas, int64_t timeout_ms);

}  // namespace flashq::redis_schema
