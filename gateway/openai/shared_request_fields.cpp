// The fields both generation endpoints share, read into the job every choice starts from.
#include "gateway/openai/shared_request_fields.h"

#include <limits>

#include "gateway/openai/structured_output_request.h"
#include "shared/error.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/producer_messages.h"

namespace flashq::gateway {
namespace {

std::vector<std::string> read_stop(RequestBody& body) {
  const nlohmann::ordered_json* value = body.find("stop");
  if (value == nullptr) return {};
  std::vector<std::string> stop;
  if (value->is_string()) {
    stop.push_back(value->get<std::string>());
  } else if (value->is_array()) {
    for (const nlohmann::ordered_json& s : *value) {
      if (!s.is_string())
        throw invalid_request("'stop' must be a string or an array of strings", "stop", "invalid_type");
      stop.push_back(s.get<std::string>());
    }
  } else {
    throw invalid_request("'stop' must be a string or an array of strings, not " + json_type_name(*value), "stop",
                          "invalid_type");
  }
  if (stop.size() > protocol::kMaxStopStrings) {
    throw invalid_request("'stop' holds " + std::to_string(stop.size()) + " strings; at most " +
                              std::to_string(protocol::kMaxStopStrings) + " are allowed",
                          "stop");
  }
  for (const std::string& s : stop) {
    if (s.empty() || s.size() > protocol::kMaxStopStringBytes) {
      throw invalid_request(
          "each 'stop' string must be 1 to " + std::to_string(protocol::kMaxStopStringBytes) + " bytes long", "stop");
    }
  }
  return stop;
}

protocol::TokenIds read_stop_token_ids(RequestBody& body) {
  const nlohmann::ordered_json* value = body.find("stop_token_ids");
  if (value == nullptr) return {};
  if (!value->is_array() || value->size() > protocol::kMaxStopTokenIds) {
    throw invalid_request(
        "'stop_token_ids' must be an array of at most " + std::to_string(protocol::kMaxStopTokenIds) + " token ids",
        "stop_token_ids");
  }
  protocol::TokenIds ids;
  for (const nlohmann::ordered_json& id : *value) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > protocol::kMaxTokenId) {
      throw invalid_request("'stop_token_ids' must hold token ids (integers from 0 to 2147483647)", "stop_token_ids");
    }
    ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  return ids;
}

// OpenAI's seed is any 64-bit integer; the job's is unsigned, so a negative one wraps.
std::optional<std::uint64_t> read_seed(RequestBody& body) {
  const nlohmann::ordered_json* value = body.find("seed");
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) return value->get<std::uint64_t>();
  if (value->is_number_integer()) return static_cast<std::uint64_t>(value->get<std::int64_t>());
  throw invalid_request("'seed' must be an integer, not " + json_type_name(*value), "seed", "invalid_type");
}

// A flashq extension that may also come as a header: both given must agree.
std::optional<std::int64_t> merge_extension(const std::string& name, const std::string& header,
                                            std::optional<std::int64_t> from_body,
                                            std::optional<std::int64_t> from_header, std::int64_t min,
                                            std::int64_t max) {
  if (from_header && (*from_header < min || *from_header > max)) {
    throw invalid_request(
        "the header " + header + " must be between " + std::to_string(min) + " and " + std::to_string(max), name);
  }
  if (from_body && from_header && *from_body != *from_header) {
    throw invalid_request("'" + name + "' is given both as a body field (" + std::to_string(*from_body) +
                              ") and as a header (" + std::to_string(*from_header) + ") with different values",
                          name, "conflicting_values");
  }
  return from_header ? from_header : from_body;
}

}  // namespace

const ServedModel& read_requested_model(RequestBody& body, const ModelDirectory& models) {
  const nlohmann::ordered_json& value = body.require("model");
  if (!value.is_string()) throw invalid_request("'model' must be a string", "model", "invalid_type");
  const auto it = models.find(value.get<std::string>());
  if (it == models.end()) {
    throw ApiError(404, "invalid_request_error", "model_not_found",
                   "The model '" + value.get<std::string>() + "' does not exist or no worker serves it", "model");
  }
  return it->second;
}

std::optional<std::string> read_session(const std::optional<std::string>& header, const std::optional<std::string>& user) {
  const bool from_header = header.has_value();
  const std::optional<std::string>& session = from_header ? header : user;
  if (!session || session->empty()) return std::nullopt;
  if (session->size() > protocol::kMaxSessionBytes) {
    const std::string where = from_header ? "header x-flashq-session" : "'user'";
    throw invalid_request(where + " names the session: at most " + std::to_string(protocol::kMaxSessionBytes) +
                              " bytes, got " + std::to_string(session->size()),
                          from_header ? "x-flashq-session" : "user");
  }
  return session;
}

SharedFields read_shared_fields(RequestBody& body, const RequestExtensions& ext) {
  SharedFields f;
  f.n = body.integer("n", 1, static_cast<std::int64_t>(kMaxChoices)).value_or(1);
  f.stream = body.boolean("stream").value_or(false);
  if (const nlohmann::ordered_json* options = body.find("stream_options")) {
    if (!f.stream) {
      throw invalid_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
    }
    RequestBody stream_options(*options, "stream_options");
    f.include_usage = stream_options.boolean("include_usage").value_or(false);
    stream_options.ignore("include_obfuscation");  // flashq adds no obfuscation padding either way
    stream_options.refuse_unread();
  }
  if (auto max_tokens = body.integer("max_tokens", 1, protocol::kMaxMaxTokens)) {
    f.max_tokens = max_tokens;
    f.max_tokens_field = "max_tokens";
  }

  protocol::Job& job = f.job;
  job.stream = true;
  job.temperature = body.number("temperature", 0, 2).value_or(1);  // OpenAI's default
  job.top_p = body.number("top_p", 0, 1).value_or(1);
  if (job.top_p == 0) throw invalid_request("'top_p' must be greater than 0", "top_p");
  // vLLM's extension: -1 (or 0) is no top-k cut.
  const std::int64_t top_k = body.integer("top_k", -1, std::numeric_limits<std::int32_t>::max()).value_or(0);
  job.top_k = top_k < 0 ? 0 : top_k;
  f.seed = read_seed(body).value_or(ext.default_seed);
  job.stop = read_stop(body);
  job.stop_token_ids = read_stop_token_ids(body);
  job.structured_output = read_guided_fields(body);

  // An end-user identifier: it changes nothing about the generation, only where it runs.
  job.session = read_session(ext.session, body.string("user"));
  const std::string no_penalties = "flashq's sampler has no repetition penalties (0 is accepted)";
  body.refuse_unless("frequency_penalty", 0, no_penalties);
  body.refuse_unless("presence_penalty", 0, no_penalties);
  body.refuse_unless("logit_bias", nlohmann::ordered_json::object(),
                     "flashq's sampler takes no logit bias ({} is accepted)");

  job.priority =
      merge_extension(
          "priority", "x-flashq-priority",
          body.integer("priority", std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()),
          ext.priority, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max())
          .value_or(0);
  job.deadline_ms =
      merge_extension("deadline_ms", "x-flashq-deadline-ms", body.integer("deadline_ms", 0, protocol::kMaxDeadlineMs),
                      ext.deadline_ms, 0, protocol::kMaxDeadlineMs)
          .value_or(0);
  if (auto spec = body.string("spec")) {
    if (*spec == "auto")
      job.spec = protocol::SpecMode::kAuto;
    else if (*spec == "off")
      job.spec = protocol::SpecMode::kOff;
    else if (*spec == "dflash")
      job.spec = protocol::SpecMode::kDflash;
    else
      throw invalid_request("'spec' must be one of auto, off, dflash", "spec");
  }
  return f;
}

std::int64_t max_tokens_for(const SharedFields& fields, const ServedModel& model, const RequestExtensions& ext,
                            std::optional<std::size_t> prompt_tokens, const std::string& prompt_field) {
  // A text prompt's length is the worker's to learn; it holds at least one token, which is
  // enough to refuse a max_tokens that alone fills the context.
  const bool judged = model.max_model_len > 0;
  const std::int64_t prompt = prompt_tokens ? static_cast<std::int64_t>(*prompt_tokens) : 1;
  if (judged && prompt >= model.max_model_len) {
    throw invalid_request("This model's maximum context length is " + std::to_string(model.max_model_len) +
                              " tokens; the prompt has " + std::to_string(prompt) +
                              ", which leaves no room for a completion",
                          prompt_field, "context_length_exceeded");
  }
  if (fields.max_tokens) {
    if (judged && prompt + *fields.max_tokens > model.max_model_len) {
      const std::string prompt_part =
          prompt_tokens ? "the prompt (" + std::to_string(prompt) + " tokens)" : std::string("any prompt");
      throw invalid_request("This model's maximum context length is " + std::to_string(model.max_model_len) +
                                " tokens; " + prompt_part + " and " + fields.max_tokens_field + " (" +
                                std::to_string(*fields.max_tokens) + ") do not fit in it",
                            fields.max_tokens_field, "context_length_exceeded");
    }
    return *fields.max_tokens;
  }
  std::int64_t max_tokens = ext.default_max_tokens > 0 ? ext.default_max_tokens : protocol::Job{}.max_tokens;
  if (judged) max_tokens = std::min(max_tokens, model.max_model_len - prompt);
  return max_tokens;
}

void add_choice_jobs(const SharedFields& fields, const protocol::Job& job, std::vector<protocol::Job>& jobs) {
  for (std::int64_t i = 0; i < fields.n; ++i) {
    protocol::Job choice = job;
    choice.seed = fields.seed + static_cast<std::uint64_t>(i);
    jobs.push_back(std::move(choice));
  }
}

void check_job_limits(const std::vector<protocol::Job>& jobs) {
  // The choices differ only in their seeds, so one job of each prompt speaks for the rest; the
  // check is cheap next to generation but not free for a long prompt.
  const protocol::Job* last_checked = nullptr;
  for (const protocol::Job& job : jobs) {
    if (last_checked != nullptr && job.prompt == last_checked->prompt) continue;
    last_checked = &job;
    try {
      protocol::decode_body<protocol::Submit>(protocol::encode_body(protocol::Submit{job}));
    } catch (const Error& e) {
      throw invalid_request(std::string("the request does not fit flashq's job limits: ") + e.what());
    }
  }
}

}  // namespace flashq::gateway
