#include "broker/redis/redis_schema.h"

#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/protocol/field_reader.h"
#include "shared/protocol/strict_unpack.h"

namespace flashq::redis_schema {
namespace {

using nlohmann::json;

constexpr std::string_view kOutPrefix = "flashq:out:{";

// The job's state decides: a finished job only has its duplicate entries acknowledged. The status
// hash keeps the job's metadata from the start, so any broker answers STATUS with it.
constexpr const char* kIntakeScript = R"(
local state = redis.call('HGET', KEYS[2], 'state')
if state then return {state, redis.call('HGET', KEYS[2], 'final') or ''} end
local entry = redis.call('XADD', KEYS[1], '*', unpack(ARGV))
redis.call('HSET', KEYS[2], 'state', 'queued', 'entry', entry)
for i = 1, #ARGV - 1, 2 do
  if ARGV[i] == 'metadata' then redis.call('HSET', KEYS[2], 'metadata', ARGV[i + 1]) end
end
return {'new', entry})";

// KEYS: the stream the entry was read from (flashq:jobs, a model's stream or a broker's handover
// stream), the job's status hash. ARGV: consumer, entry, session ('' for none), session TTL in ms,
// the job's metadata as JSON ('' for none: kept in the hash for STATUS, for jobs a Redis client
// wrote), the job's model ('' for none), '1' when this broker has a worker for that model. A run
// answers with Redis's time and the times of the job's first assignment and first token (0: none
// yet), all three on Redis's clock like the entry ids, so the taker's figures need no other. The
// hash's `entry` and `stream` name the one entry that may run the job; any other is a duplicate.
// Two moves, each whole or not at all (one script), so a crash can neither lose nor duplicate a job:
//  - sorted: an entry of flashq:jobs naming a model this broker does not serve is copied, as a new
//    entry, to flashq:model:<model>:jobs, which only brokers serving the model read;
//  - handed: a job whose session is owned by another live broker (its flashq:broker:<name> key
//    exists) that serves the job's model goes to that broker's stream, pending for it there
//    (XCLAIM FORCE: it finds it by reading its own pending entries). Entries of a handover
//    stream are never moved again, so a job moves at most twice, and always forward.
// Keys of the owner and the model are built here from values: flashq keeps everything on one Redis
// (not a cluster), where a script may reach any key.
constexpr const char* kTakeScript = R"(
local h = KEYS[2]
local function ack()
  redis.call('XACK', KEYS[1], 'flashq', ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
end
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
local state = redis.call('HGET', h, 'state')
if state == 'finished' then
  ack()
  return {'finished', '0', '0', '0', redis.call('HGET', h, 'final') or ''}
end
local entry = redis.call('HGET', h, 'entry')
local stream = redis.call('HGET', h, 'stream') or 'flashq:jobs'
if entry and (entry ~= ARGV[2] or stream ~= KEYS[1]) then
  ack()
  return {'duplicate', '0', '0', '0', ''}
end
-- This entry, copied to `target` with `extra` fields, acknowledged and deleted here; the copy's id.
local function move(target, extra)
  local found = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
  if #found ~= 1 then return nil end
  local fields = found[1][2]
  for _, value in ipairs(extra) do fields[#fields + 1] = value end
  redis.pcall('XGROUP', 'CREATE', target, 'flashq', '0', 'MKSTREAM')
  local moved = redis.call('XADD', target, '*', unpack(fields))
  ack()
  redis.call('HSET', h, 'entry', moved, 'stream', target)
  if not state then redis.call('HSET', h, 'state', 'queued') end
  return moved
end
local model = ARGV[6]
if model ~= '' and ARGV[7] ~= '1' and KEYS[1] == 'flashq:jobs' then
  local target = 'flashq:model:' .. model .. ':jobs'
  if move(target, {'sorted_entry', ARGV[2]}) then
    redis.call('SADD', 'flashq:models', model)
    return {'sorted', '0', '0', '0', target}
  end
end
local session = ARGV[3] ~= '' and ('flashq:session:' .. ARGV[3]) or nil
local movable = KEYS[1] == 'flashq:jobs' or string.sub(KEYS[1], 1, 13) == 'flashq:model:'
if session and movable then
  local owner = redis.call('GET', session)
  local serves = model == '' or
    tonumber(redis.call('ZSCORE', 'flashq:model:' .. model .. ':servers', owner or '') or '0') > now_ms()
  if owner and owner ~= ARGV[1] and serves and redis.call('EXISTS', 'flashq:broker:' .. owner) == 1 then
    local target = 'flashq:jobs:' .. owner
    local moved = move(target, {'handed_from', ARGV[1], 'handed_entry', ARGV[2]})
    if moved then
      redis.call('XCLAIM', target, 'flashq', owner, '0', moved, 'FORCE', 'JUSTID')
      redis.call('HSET', h, 'owner', owner)
      return {'handed', '0', '0', '0', owner}
    end
  end
end
local deliveries = redis.call('HINCRBY', h, 'deliveries', 1)
redis.call('HSET', h, 'entry', ARGV[2], 'stream', KEYS[1], 'owner', ARGV[1])
if not state then redis.call('HSET', h, 'state', 'queued') end
if ARGV[5] ~= '' then redis.call('HSETNX', h, 'metadata', ARGV[5]) end
if session then redis.call('SET', session, ARGV[1], 'PX', ARGV[4]) end
local cancel = redis.call('HGET', h, 'cancel') and 'cancel' or ''
return {'run', tostring(deliveries), redis.call('HGET', h, 'next_seq') or '0', redis.call('HGET', h, 'attempt') or '0', cancel,
        string.format('%.0f', now_ms()), redis.call('HGET', h, 'first_assigned_ms') or '0',
        redis.call('HGET', h, 'first_token_ms') or '0'})";

// A broker that is alive is registered too (the claims may have forgotten it while it was not).
constexpr const char* kAliveScript = R"(
redis.call('SET', 'flashq:broker:' .. ARGV[1], '1', 'PX', ARGV[2])
redis.call('SADD', 'flashq:brokers', ARGV[1])
return 1)";

// Entries idle past the claim timeout (their broker died, or stopped refreshing them), in
// flashq:jobs, in every broker's handover stream (flashq:brokers names them) and in the streams
// of the models given (ARGV[4...]: those this broker reads); a stream without the group yet is
// skipped. A broker that is not alive and has nothing in its stream is forgotten (it registers
// again when it is alive), so the names of brokers gone for good do not pile up in every claim;
// its empty stream and group stay, for when it comes back. Reply as XREAD's: {stream, entries}
// per stream.
constexpr const char* kClaimIdleScript = R"(
local streams = {'flashq:jobs'}
for _, name in ipairs(redis.call('SMEMBERS', 'flashq:brokers')) do
  local stream = 'flashq:jobs:' .. name
  if redis.call('EXISTS', 'flashq:broker:' .. name) == 0 and redis.call('XLEN', stream) == 0 then
    redis.call('SREM', 'flashq:brokers', name)
  else
    streams[#streams + 1] = stream
  end
end
for i = 4, #ARGV do streams[#streams + 1] = 'flashq:model:' .. ARGV[i] .. ':jobs' end
local left = tonumber(ARGV[3])
local out = {}
for _, stream in ipairs(streams) do
  if left <= 0 then break end
  local claimed = redis.pcall('XAUTOCLAIM', stream, 'flashq', ARGV[1], ARGV[2], '0-0', 'COUNT', left)
  if type(claimed) == 'table' and not claimed.err and #claimed[2] > 0 then
    out[#out + 1] = {stream, claimed[2]}
    left = left - #claimed[2]
  end
end
return out)";

// Which models are served, across brokers. ARGV: consumer, lease in ms, then the models this
// broker's workers serve: it is a server of each (flashq:model:<m>:servers, a sorted set of
// brokers scored by when their lease ends) and of no other. For every model flashq knows
// (flashq:models), the reply says whether a lease is live, and since when the model has been
// known to be served (flashq:model:<m>:last_served, Redis's clock): {now, {model, live, last}...}.
// A model nobody serves, with no jobs waiting, is forgotten.
constexpr const char* kServedScript = R"(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local here = {}
for i = 3, #ARGV do
  here[ARGV[i]] = true
  redis.call('ZADD', 'flashq:model:' .. ARGV[i] .. ':servers', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('SADD', 'flashq:models', ARGV[i])
end
local out = {string.format('%.0f', now)}
for _, model in ipairs(redis.call('SMEMBERS', 'flashq:models')) do
  local servers = 'flashq:model:' .. model .. ':servers'
  local last = 'flashq:model:' .. model .. ':last_served'
  if not here[model] and redis.call('ZREM', servers, ARGV[1]) == 1 then
    redis.call('SET', last, string.format('%.0f', now), 'EX', 86400)
  end
  redis.call('ZREMRANGEBYSCORE', servers, '-inf', now)
  local live = redis.call('ZCARD', servers) > 0
  if live then redis.call('SET', last, string.format('%.0f', now), 'EX', 86400) end
  if not live and redis.call('XLEN', 'flashq:model:' .. model .. ':jobs') == 0 then
    redis.call('SREM', 'flashq:models', model)
  else
    out[#out + 1] = {model, live and '1' or '0', redis.call('GET', last) or '0'}
  end
end
return out)";

// Several events of one job in one call (ARGV: owner, max events, then seq, token_ids, text,
// logprobs per event; logprobs empty when the job did not ask for them, and then not stored):
// one script run per job per loop turn, not per event.
// The first event with tokens also stores when it came (Redis's clock), for the time to first
// token of a job that another broker finishes.
constexpr const char* kEventScript = R"(
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return -1 end
local next_seq = tonumber(redis.call('HGET', KEYS[1], 'next_seq') or '0')
local written = 0
for i = 3, #ARGV, 4 do
  local seq = tonumber(ARGV[i])
  if seq > next_seq then return -2 end
  if seq == next_seq then
    if ARGV[i + 3] == '' then
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'seq', ARGV[i], 'token_ids', ARGV[i + 1], 'text', ARGV[i + 2])
    else
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'seq', ARGV[i], 'token_ids', ARGV[i + 1], 'text', ARGV[i + 2],
                 'logprobs', ARGV[i + 3])
    end
    if ARGV[i + 1] ~= '[]' and redis.call('HEXISTS', KEYS[1], 'first_token_ms') == 0 then
      local now = redis.call('TIME')
      redis.call('HSET', KEYS[1], 'first_token_ms', string.format('%.0f', now[1] * 1000 + math.floor(now[2] / 1000)))
    end
    next_seq = seq + 1
    written = written + 1
  end
end
redis.call('HSET', KEYS[1], 'next_seq', next_seq)
return written)";

constexpr const char* kFinalScript = R"(
local function ack()
  if ARGV[4] ~= '' then
    redis.call('XACK', KEYS[3], 'flashq', ARGV[4])
    redis.call('XDEL', KEYS[3], ARGV[4])
  end
end
if redis.call('HGET', KEYS[1], 'state') == 'finished' then ack() return 0 end
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] then return -1 end
redis.call('XADD', KEYS[2], '*', 'seq', ARGV[2], 'final', ARGV[3])
redis.call('HSET', KEYS[1], 'state', 'finished', 'final', ARGV[3], 'finish_reason', ARGV[6], 'next_seq', tonumber(ARGV[2]) + 1)
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[5])
ack()
if ARGV[7] ~= '' then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[8], '*', 'id', ARGV[9], 'reason', ARGV[7], 'entry', ARGV[4])
end
return 1)";

// An attempt started: the first one anywhere also stores when (Redis's clock), for the queue time
// of a job another broker finishes. A finished or expired job is left as it is.
constexpr const char* kRunningScript = R"(
local state = redis.call('HGET', KEYS[1], 'state')
if not state or state == 'finished' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'running', 'attempt', ARGV[1])
if redis.call('HEXISTS', KEYS[1], 'first_assigned_ms') == 0 then
  local now = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'first_assigned_ms', string.format('%.0f', now[1] * 1000 + math.floor(now[2] / 1000)))
end
return 1)";

// A producer waiting on flashq:out:{<id>} gets a `rejected` final, unless the id already finished.
constexpr const char* kDeadLetterScript = R"(
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'id', ARGV[2], 'reason', ARGV[3], 'entry', ARGV[1])
redis.call('XACK', KEYS[1], 'flashq', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if ARGV[2] ~= '' and not redis.call('HGET', KEYS[3], 'state') then
  redis.call('XADD', KEYS[4], '*', 'seq', '0', 'final', ARGV[5])
  redis.call('HSET', KEYS[3], 'state', 'finished', 'final', ARGV[5], 'finish_reason', 'rejected', 'next_seq', '1')
  redis.call('EXPIRE', KEYS[3], ARGV[6])
  redis.call('EXPIRE', KEYS[4], ARGV[6])
end
return 1)";

// The flag is for a broker that takes the job later; the control entry for the one running it.
constexpr const char* kCancelScript = R"(
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return 'not_found' end
if state == 'finished' then return 'finished' end
redis.call('HSET', KEYS[1], 'cancel', '1')
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'cancel', ARGV[1])
return 'requested')";

int64_t to_int(const std::string& text) {
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    throw Error(ErrorCode::kProtocol, "redis: '" + text + "' is not a number");
  }
}

}  // namespace

RedisFields fields_of(const RedisReply& flat) {
  RedisFields fields;
  for (size_t i = 0; i + 1 < flat.elements.size(); i += 2) fields[flat.elements[i].text] = flat.elements[i + 1].text;
  return fields;
}

// A job's own keys carry its id as a hash tag ({id}): in a Redis Cluster both would share a slot.
std::string job_key(const std::string& id) { return "flashq:job:{" + id + "}"; }
std::string handover_key(const std::string& consumer) { return std::string(kJobs) + ":" + consumer; }
std::string broker_key(const std::string& consumer) { return "flashq:broker:" + consumer; }
std::string session_key(const std::string& session) { return "flashq:session:" + session; }
std::string model_jobs_key(const std::string& model) { return "flashq:model:" + model + ":jobs"; }
std::string out_key(const std::string& id) { return std::string(kOutPrefix) + id + "}"; }
std::string job_of_out_key(const std::string& key) {
  return key.substr(kOutPrefix.size(), key.size() - kOutPrefix.size() - 1);
}

std::vector<Entry> entries_of(const RedisReply& reply) {
  std::vector<Entry> out;
  for (const RedisReply& item : reply.elements) {
    // A claimed entry that was deleted meanwhile comes back as nil (or with nil fields).
    if (item.elements.size() != 2 || item.elements[1].is_nil()) continue;
    out.push_back({item.elements[0].text, fields_of(item.elements[1])});
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<Entry>>> streams_of(const RedisReply& reply) {
  std::vector<std::pair<std::string, std::vector<Entry>>> out;
  for (const RedisReply& stream : reply.elements) {
    if (stream.elements.size() == 2) out.emplace_back(stream.elements[0].text, entries_of(stream.elements[1]));
  }
  return out;
}

std::vector<std::string> scripts() {
  return {kIntakeScript, kTakeScript,   kAliveScript,      kClaimIdleScript, kServedScript,
          kEventScript,  kFinalScript,   kRunningScript,    kDeadLetterScript, kCancelScript};
}

RedisCommand create_group() { return {"XGROUP", "CREATE", kJobs, kGroup, "0", "MKSTREAM"}; }
RedisCommand create_handover_group(const std::string& consumer) {
  return {"XGROUP", "CREATE", handover_key(consumer), kGroup, "0", "MKSTREAM"};
}
RedisCommand register_broker(const std::string& consumer) { return {"SADD", kBrokers, consumer}; }
RedisCommand ping() { return {"PING"}; }

RedisCommand intake(const protocol::Job& job) {
  RedisCommand command = {"EVAL", kIntakeScript, "2", kJobs, job_key(job.id)};
  for (std::string& field : job_to_fields(job)) command.push_back(std::move(field));
  return command;
}

RedisCommand read_new(const std::string& consumer, int64_t count, const std::string& handed_after,
                      const std::vector<std::string>& models) {
  RedisCommand command = {"XREADGROUP", "GROUP", kGroup, consumer, "COUNT", std::to_string(count), "STREAMS", kJobs,
                          handover_key(consumer)};
  for (const std::string& model : models) command.push_back(model_jobs_key(model));
  command.insert(command.end(), {">", handed_after});
  for (size_t i = 0; i < models.size(); ++i) command.push_back(">");
  return command;
}

RedisCommand read_own_pending(const std::string& stream, const std::string& consumer, int64_t count,
                              const std::string& after) {
  return {"XREADGROUP", "GROUP", kGroup, consumer, "COUNT", std::to_string(count), "STREAMS", stream, after};
}

RedisCommand claim_idle(const std::string& consumer, int64_t idle_ms, int64_t count,
                        const std::vector<std::string>& models) {
  RedisCommand command = {"EVAL", kClaimIdleScript, "0", consumer, std::to_string(idle_ms), std::to_string(count)};
  command.insert(command.end(), models.begin(), models.end());
  return command;
}

RedisCommand create_model_group(const std::string& model) {
  return {"XGROUP", "CREATE", model_jobs_key(model), kGroup, "0", "MKSTREAM"};
}

RedisCommand served(const std::string& consumer, int64_t lease_ms, const std::set<std::string>& models_here) {
  RedisCommand command = {"EVAL", kServedScript, "0", consumer, std::to_string(lease_ms)};
  command.insert(command.end(), models_here.begin(), models_here.end());
  return command;
}

ServedModels served_of(const RedisReply& reply) {
  if (reply.is_error() || reply.elements.empty()) {
    throw Error(ErrorCode::kProtocol, "redis: unexpected reply to served: " + reply.text);
  }
  ServedModels out;
  out.redis_now_ms = to_int(reply.elements[0].text);
  for (size_t i = 1; i < reply.elements.size(); ++i) {
    const RedisReply& model = reply.elements[i];
    if (model.elements.size() != 3) throw Error(ErrorCode::kProtocol, "redis: a served model without its figures");
    out.models.push_back({model.elements[0].text, model.elements[1].text == "1", to_int(model.elements[2].text)});
  }
  return out;
}

RedisCommand keep_claimed(const std::string& stream, const std::string& consumer,
                          const std::vector<std::string>& entries) {
  RedisCommand command = {"XCLAIM", stream, kGroup, consumer, "0"};
  command.insert(command.end(), entries.begin(), entries.end());
  command.push_back("JUSTID");
  return command;
}

RedisCommand alive(const std::string& consumer, int64_t ttl_ms) {
  return {"EVAL", kAliveScript, "0", consumer, std::to_string(ttl_ms)};
}
RedisCommand not_alive(const std::string& consumer) { return {"DEL", broker_key(consumer)}; }

RedisCommand take(const std::string& stream, const std::string& consumer, const std::string& job_id,
                  const std::string& entry, const TakeContext& context) {
  return {"EVAL",
          kTakeScript,
          "2",
          stream,
          job_key(job_id),
          consumer,
          entry,
          context.session,
          std::to_string(context.session_ttl_ms),
          context.metadata_json,
          context.model,
          context.model_served_here ? "1" : "0"};
}

Take take_of(const RedisReply& reply) {
  if (reply.is_error() || reply.elements.size() < 5) {
    throw Error(ErrorCode::kProtocol, "redis: unexpected reply to take: " + reply.text);
  }
  Take out;
  const std::string& outcome = reply.elements[0].text;
  out.outcome = outcome == "finished"    ? Take::Outcome::kFinished
                : outcome == "duplicate" ? Take::Outcome::kDuplicate
                : outcome == "handed"    ? Take::Outcome::kHanded
                : outcome == "sorted"    ? Take::Outcome::kSorted
                                         : Take::Outcome::kRun;
  out.deliveries = to_int(reply.elements[1].text);
  out.next_seq = to_int(reply.elements[2].text);
  out.attempt = to_int(reply.elements[3].text);
  if (out.outcome == Take::Outcome::kFinished) {
    out.final_json = reply.elements[4].text;
  } else if (out.outcome == Take::Outcome::kHanded || out.outcome == Take::Outcome::kSorted) {
    out.moved_to = reply.elements[4].text;
  } else if (out.outcome == Take::Outcome::kRun) {
    out.cancel_requested = reply.elements[4].text == "cancel";
    if (reply.elements.size() != 8) throw Error(ErrorCode::kProtocol, "redis: a take to run without its times");
    out.redis_now_ms = to_int(reply.elements[5].text);
    out.first_assigned_ms = to_int(reply.elements[6].text);
    out.first_token_ms = to_int(reply.elements[7].text);
  }
  return out;
}

RedisCommand mark_running(const std::string& job_id, int64_t attempt) {
  return {"EVAL", kRunningScript, "1", job_key(job_id), std::to_string(attempt)};
}

RedisCommand events(const std::string& consumer, const std::string& job_id, const std::vector<protocol::Event>& list,
                    int64_t max_events) {
  RedisCommand command = {"EVAL", kEventScript, "2", job_key(job_id), out_key(job_id), consumer,
                          std::to_string(max_events)};
  for (const protocol::Event& e : list) {
    command.push_back(std::to_string(e.seq));
    command.push_back(json(e.token_ids).dump());
    command.push_back(e.text);
    command.push_back(e.logprobs.empty() ? std::string() : protocol::encode_stored_logprobs(e.logprobs));
  }
  return command;
}

RedisCommand final(const std::string& consumer, const std::string& job_id, const std::string& stream,
                   const std::string& entry, int64_t seq, const protocol::FinalResult& result, int64_t retention_s,
                   const std::string& dead_reason, int64_t dead_max) {
  return {"EVAL",
          kFinalScript,
          "4",
          job_key(job_id),
          out_key(job_id),
          stream.empty() ? std::string(kJobs) : stream,
          kDead,
          consumer,
          std::to_string(seq),
          final_to_json(result),
          entry,
          std::to_string(retention_s),
          std::string(protocol::finish_reason_name(result.finish_reason)),
          dead_reason,
          std::to_string(dead_max),
          job_id};
}

RedisCommand dead_letter(const std::string& stream, const std::string& entry, const std::string& job_id,
                         const std::string& reason, int64_t dead_max, int64_t retention_s) {
  protocol::FinalResult rejected;
  rejected.finish_reason = protocol::FinishReason::kRejected;
  rejected.error = reason;
  // An id that is not a valid job id gets no result stream: nobody could have asked for it.
  const std::string id = protocol::is_valid_id(job_id) ? job_id : std::string();
  return {"EVAL",
          kDeadLetterScript,
          "4",
          stream,
          kDead,
          job_key(id),
          out_key(id),
          entry,
          id,
          reason,
          std::to_string(dead_max),
          final_to_json(rejected),
          std::to_string(retention_s)};
}

RedisCommand cancel(const std::string& job_id, int64_t control_max) {
  return {"EVAL", kCancelScript, "2", job_key(job_id), kControl, job_id, std::to_string(control_max)};
}

std::vector<std::string> cancelled_ids(const std::vector<Entry>& control_entries) {
  std::vector<std::string> ids;
  for (const Entry& entry : control_entries) {
    if (auto id = entry.fields.find("cancel"); id != entry.fields.end()) ids.push_back(id->second);
  }
  return ids;
}

RedisCommand last_control_entry() { return {"XREVRANGE", kControl, "+", "-", "COUNT", "1"}; }

RedisCommand read_control_and_results(const std::string& control_from,
                                      const std::vector<std::pair<std::string, std::string>>& jobs) {
  RedisCommand command = {"XREAD", "COUNT", "1000", "STREAMS", kControl};
  for (const auto& [id, from] : jobs) command.push_back(out_key(id));
  command.push_back(control_from);
  for (const auto& [id, from] : jobs) command.push_back(from);
  return command;
}

RedisCommand job_known(const std::string& job_id) { return {"HEXISTS", job_key(job_id), "state"}; }

RedisCommand read_results(const std::string& job_id) { return {"XRANGE", out_key(job_id), "-", "+"}; }
RedisCommand status(const std::string& job_id) { return {"HGETALL", job_key(job_id)}; }

std::string final_to_json(const protocol::FinalResult& result) {
  const std::string packed = protocol::encode_final_result(result);
  // A worker's error text may hold invalid UTF-8, which JSON cannot: written as U+FFFD.
  return json::from_msgpack(packed).dump(-1, ' ', false, json::error_handler_t::replace);
}

protocol::FinalResult final_from_json(const std::string& text) {
  const json value = json::parse(text, nullptr, false);
  if (value.is_discarded() || !value.is_object()) throw Error(ErrorCode::kProtocol, "redis: a final that is not JSON");
  const std::vector<uint8_t> packed = json::to_msgpack(value);
  const std::string bytes(packed.begin(), packed.end());
  msgpack::object_handle handle = protocol::unpack_body(bytes, "redis final");
  return protocol::read_final_fields(protocol::FieldReader(handle.get(), protocol::FieldPath{"redis final", ""}));
}

StoredEvent event_of(const Entry& entry) {
  StoredEvent out;
  auto seq = entry.fields.find("seq");
  if (seq == entry.fields.end()) throw Error(ErrorCode::kProtocol, "redis: result entry without seq");
  out.seq = to_int(seq->second);
  if (auto final = entry.fields.find("final"); final != entry.fields.end()) {
    out.final_result = final_from_json(final->second);
    return out;
  }
  if (auto ids = entry.fields.find("token_ids"); ids != entry.fields.end()) {
    const json value = json::parse(ids->second, nullptr, false);
    if (!value.is_array()) throw Error(ErrorCode::kProtocol, "redis: token_ids that are not a JSON array");
    for (const json& id : value) out.token_ids.push_back(id.get<int32_t>());
  }
  if (auto text = entry.fields.find("text"); text != entry.fields.end()) out.text = text->second;
  if (auto logprobs = entry.fields.find("logprobs"); logprobs != entry.fields.end()) {
    out.logprobs = protocol::decode_stored_logprobs(logprobs->second, "redis result entry");
    if (out.logprobs.size() != out.token_ids.size()) {
      throw Error(ErrorCode::kProtocol, "redis: result entry with logprobs not one per token id");
    }
  }
  return out;
}

int64_t entry_time_ms(const std::string& entry_id) { return to_int(entry_id.substr(0, entry_id.find('-'))); }

}  // namespace flashq::redis_schema
