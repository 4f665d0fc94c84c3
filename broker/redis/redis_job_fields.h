// A job as the flat fields of an entry in the intake stream `flashq:jobs` (docs/redis.md): the
// job's own field names, every value a string. Numbers are decimal; `prompt_tokens`,
// `stop_token_ids`, `messages`, `tools`, `chat_template_kwargs` and `metadata` are JSON; `stop` is
// a JSON array of strings or one plain string; `stream` and `add_generation_prompt` are true/false. So a producer with nothing but redis-cli can write:
//   XADD flashq:jobs * id j1 prompt "def add(a, b):" max_tokens 64
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shared/protocol/job.h"

namespace flashq {

using RedisFields = std::map<std::string, std::string>;

// Alternating name, value: what XADD takes after the entry id. Invalid UTF-8 in a JSON-valued
// field is written as U+FFFD; metadata that JSON cannot express is kProtocol.
std::vector<std::string> job_to_fields(const protocol::Job& job);

// The job's opaque msgpack metadata as the JSON text Redis keeps (in its entry and its status
// hash), and back: the bytes a job read by job_from_fields carries. kProtocol when it cannot be.
std::string metadata_to_json(const std::string& packed);
std::string metadata_from_json(const std::string& text);

// Validated as strictly as a SUBMIT (the same limits and messages); kProtocol naming the field.
// A job without an id gets none here: the caller names it after the entry.
protocol::Job job_from_fields(const RedisFields& fields);

}  // namespace flashq
