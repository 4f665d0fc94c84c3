#include "shared/protocol/job.h"

#include <algorithm>
#include <limits>

#include "shared/protocol/chat_fields.h"
#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/map_writer.h"
#include "shared/protocol/strict_unpack.h"

namespace flashq::protocol {
namespace {

constexpr std::int64_t kInt32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

void write_prompt(MapWriter& out, const Prompt& prompt) {
  if (const auto* text = std::get_if<std::string>(&prompt)) {
    out.string("prompt", *text);
  } else if (const auto* tokens = std::get_if<TokenIds>(&prompt)) {
    out.token_ids("prompt_tokens", *tokens);
  } else {
    write_messages(out, std::get<std::vector<ChatMessage>>(prompt));
  }
}

Prompt read_prompt(const FieldReader& job) {
  const int given = int(job.has("prompt")) + int(job.has("prompt_tokens")) + int(job.has("messages"));
  if (given == 0) job.fail("prompt", "missing (one of prompt, prompt_tokens, messages is required)");
  if (given > 1) job.fail("prompt", "only one of prompt, prompt_tokens, messages may be given");
  if (job.has("prompt")) return job.string("prompt", {1, kMaxPromptBytes});
  if (job.has("prompt_tokens")) {
    TokenIds tokens = job.token_ids("prompt_tokens", kMaxPromptTokens);
    if (tokens.empty()) job.fail("prompt_tokens", "must hold at least one token");
    return tokens;
  }
  return read_messages(job);
}

std::vector<std::string> read_stop(const FieldReader& job) {
  const msgpack::object* value = job.find("stop");
  if (value == nullptr) return {};
  const FieldPath at = job.field_path("stop");
  const auto elements = read_array(*value, at, kMaxStopStrings);
  std::vector<std::string> stop;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    stop.push_back(read_string(elements[i], at.element(i), {1, kMaxStopStringBytes}));
  }
  return stop;
}

SpecMode read_spec(const FieldReader& job) {
  const std::optional<std::string> name = job.optional_string("spec", {1, kMaxCodeBytes});
  if (!name) return SpecMode::kAuto;
  for (SpecMode mode : {SpecMode::kAuto, SpecMode::kOff, SpecMode::kDflash}) {
    if (*name == spec_mode_name(mode)) return mode;
  }
  job.fail("spec", "must be one of auto, off, dflash");
}

}  // namespace

std::string_view spec_mode_name(SpecMode mode) {
  switch (mode) {
    case SpecMode::kAuto: return "auto";
    case SpecMode::kOff: return "off";
    case SpecMode::kDflash: return "dflash";
  }
  return "auto";
}

bool is_valid_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

std::string read_id(const FieldReader& fields, std::string_view key) {
  std::string id = fields.string(key, {1, kMaxIdBytes});
  if (!is_valid_id(id)) fields.fail(key, "must be printable ASCII without spaces (0x21..0x7E)");
  return id;
}

std::optional<std::string> read_optional_id(const FieldReader& fields, std::string_view key) {
  if (!fields.has(key)) return std::nullopt;
  return read_id(fields, key);
}

std::string encode_job(const Job& job) {
  MapWriter out;
  if (!job.id.empty()) out.string("id", job.id);
  write_prompt(out, job.prompt);
  out.integer("max_tokens", job.max_tokens)
      .number("temperature", job.temperature)
      .number("top_p", job.top_p)
      .integer("top_k", job.top_k)
      .unsigned_integer("seed", job.seed)
      .strings("stop", job.stop)
      .token_ids("stop_token_ids", job.stop_token_ids)
      .integer("priority", job.priority)
      .integer("deadline_ms", job.deadline_ms)
      .string("spec", spec_mode_name(job.spec))
      .boolean("stream", job.stream)
      .integer("block_size", job.block_size);
  write_chat_options(out, job);
  if (job.model) out.string("model", *job.model);
  if (job.session) out.string("session", *job.session);
  if (job.structured_output) out.string("structured_output", *job.structured_output);
  if (job.logprobs) out.integer("logprobs", *job.logprobs);
  if (job.metadata) {
    check_msgpack_value(*job.metadata, "job field metadata");
    out.raw("metadata", *job.metadata);
  }
  return out.finish();
}

Job read_job(const FieldReader& fields, JobIdRule id_rule) {
  Job job;
  if (id_rule == JobIdRule::kRequired) {
    job.id = read_id(fields, "id");
  } else {
    job.id = read_optional_id(fields, "id").value_or("");
  }
  job.prompt = read_prompt(fields);
  job.max_tokens = fields.integer_or("max_tokens", 1, kMaxMaxTokens, job.max_tokens);
  job.temperature = fields.number_or("temperature", job.temperature);
  if (job.temperature < 0) fields.fail("temperature", "must be >= 0, got " + std::to_string(job.temperature));
  job.top_p = fields.number_or("top_p", job.top_p);
  if (!(job.top_p > 0 && job.top_p <= 1)) fields.fail("top_p", "must be in (0, 1], got " + std::to_string(job.top_p));
  job.top_k = fields.integer_or("top_k", 0, kInt32Max, job.top_k);
  job.seed = fields.unsigned_or("seed", job.seed);
  job.stop = read_stop(fields);
  job.stop_token_ids = fields.token_ids_or_empty("stop_token_ids", kMaxStopTokenIds);
  job.priority = fields.integer_or("priority", kInt32Min, kInt32Max, job.priority);
  job.deadline_ms = fields.integer_or("deadline_ms", 0, kMaxDeadlineMs, job.deadline_ms);
  job.spec = read_spec(fields);
  job.model = fields.optional_string("model", {1, kMaxNameBytes});
  job.session = fields.optional_string("session", {1, kMaxSessionBytes});
  if (const msgpack::object* metadata = fields.find("metadata")) job.metadata = read_raw(*metadata);
  job.stream = fields.boolean_or("stream", job.stream);
  job.block_size = fields.integer_or("block_size", 0, kMaxBlockSize, job.block_size);
  read_chat_options(fields, job);
  job.structured_output = fields.optional_string("structured_output", {2, kMaxStructuredOutputBytes});
  if (fields.has("logprobs")) job.logprobs = fields.integer("logprobs", 0, kMaxTopLogprobs);
  return job;
}

}  // namespace flashq::protocol
