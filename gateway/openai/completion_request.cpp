// POST /v1/completions read into jobs: the prompt as text or token ids, several prompts as several
// groups of n choices (choice index = prompt index * n + j, as OpenAI numbers them).
#include "gateway/openai/generation_request.h"
#include "gateway/openai/request_body.h"
#include "gateway/openai/shared_request_fields.h"
#include "shared/protocol/limits.h"

namespace flashq::gateway {
namespace {

bool is_token_ids(const nlohmann::ordered_json& value) {
  if (!value.is_array() || value.empty()) return false;
  for (const nlohmann::ordered_json& id : value) {
    if (!id.is_number_integer()) return false;
  }
  return true;
}

protocol::TokenIds read_token_ids(const nlohmann::ordered_json& value, const std::string& field) {
  protocol::TokenIds ids;
  for (const nlohmann::ordered_json& id : value) {
    if (id.is_number_unsigned() ? id.get<std::uint64_t>() > static_cast<std::uint64_t>(protocol::kMaxTokenId)
                                : id.get<std::int64_t>() < 0) {
      throw invalid_request("'" + field + "' holds " + id.dump() + ", which is not a token id", field);
    }
    ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  return ids;
}

// The prompts as OpenAI takes them: a string, an array of strings, an array of token ids, or an
// array of arrays of token ids.
std::vector<protocol::Prompt> read_prompts(const nlohmann::ordered_json& value) {
  const std::string kind =
      "'prompt' must be a string, an array of strings, an array of token ids, or an array of "
      "arrays of token ids";
  std::vector<protocol::Prompt> prompts;
  auto add_text = [&](const nlohmann::ordered_json& text, const std::string& field) {
    if (text.get_ref<const std::string&>().empty()) throw invalid_request("'" + field + "' is empty", field);
    prompts.emplace_back(text.get<std::string>());
  };
  if (value.is_string()) {
    add_text(value, "prompt");
  } else if (is_token_ids(value)) {
    prompts.emplace_back(read_token_ids(value, "prompt"));
  } else if (value.is_array() && !value.empty()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string field = "prompt[" + std::to_string(i) + "]";
      if (value[i].is_string())
        add_text(value[i], field);
      else if (is_token_ids(value[i]))
        prompts.emplace_back(read_token_ids(value[i], field));
      else
        throw invalid_request(kind, field, "invalid_type");
    }
  } else {
    throw invalid_request(kind, "prompt", "invalid_type");
  }
  return prompts;
}

// The fields of a completion request besides kSharedGenerationFields.
constexpr std::string_view kCompletionFields[] = {"prompt", "echo", "best_of", "suffix", "logprobs"};

// Fields of OpenAI's request that ask for what flashq does not do, each with why.
const RefusedField kRefusedCompletionFields[] = {
    {"echo", false, "echoing the prompt is not supported"},
    {"best_of", 1, "best_of (choosing among completions by log-probability) is not supported; use n"},
    {"suffix", "", "insertion (a suffix after the completion) is not supported"},
};

}  // namespace

GenerationRequest read_completion_request(const nlohmann::ordered_json& json, const ModelDirectory& models,
                                          const RequestExtensions& ext) {
  RequestBody body(json);
  GenerationRequest request;
  request.endpoint = Endpoint::kCompletions;
  const ServedModel& model = read_requested_model(body, models);
  request.model = body.require("model").get<std::string>();
  const SharedFields fields = read_shared_fields(body, ext);
  body.refuse_all(kRefusedCompletionFields);
  const std::vector<protocol::Prompt> prompts = read_prompts(body.require("prompt"));
  // logprobs: the most likely tokens reported with each output token (OpenAI allows 5; vLLM 20).
  const std::optional<std::int64_t> logprobs = body.integer("logprobs", 0, protocol::kMaxTopLogprobs);
  body.refuse_unknown(kSharedGenerationFields, kCompletionFields);

  // The raw text is the model's own: no chat template, no output parsing.
  request.output_format = OutputFormat{};
  request.tool_choice = ToolChoice{ToolChoiceMode::kNone, ""};
  request.parse_reasoning = false;
  const std::size_t choices = prompts.size() * static_cast<std::size_t>(fields.n);
  if (choices > kMaxChoices) {
    throw invalid_request("the prompts times n ask for " + std::to_string(choices) + " choices; at most " +
                              std::to_string(kMaxChoices) + " are allowed",
                          "n");
  }
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    protocol::Job job = fields.job;
    job.logprobs = logprobs;
    job.prompt = prompts[p];
    job.model = request.model;
    const std::string field = prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(p) + "]";
    std::optional<std::size_t> prompt_tokens;
    if (const auto* ids = std::get_if<protocol::TokenIds>(&job.prompt)) prompt_tokens = ids->size();
    job.max_tokens = max_tokens_for(fields, model, ext, prompt_tokens, field);
    add_choice_jobs(fields, job, request.jobs);
    request.prompt_of_choice.resize(request.jobs.size(), p);
  }
  request.stream = fields.stream;
  request.include_usage = fields.include_usage;
  check_job_limits(request.jobs);
  return request;
}

}  // namespace flashq::gateway
