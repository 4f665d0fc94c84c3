// libFuzzer target for the gateway's readers of OpenAI request bodies: an input is the body's
// text, read as flashq-gateway reads it (JSON, then /v1/chat/completions, /v1/completions and
// /v1/responses each) against models of every output format. A refusal is an ApiError with a
// 4xx status (the request was at fault); anything else escaping (another exception, a sanitizer
// report) crashes.
//
// What a reader accepts must be a job the broker takes: each job encodes to a SUBMIT that
// decodes to the same job. A response's job must also give its request back (the gateway
// recovers it from the job alone) with the same settings.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz_check.h"
#include "gateway/openai/api_error.h"
#include "gateway/openai/generation_request.h"
#include "gateway/openai/responses_request.h"
#include "shared/protocol/messages.h"

namespace {

using namespace flashq::gateway;
using flashq::fuzz::require;

const ModelDirectory& models() {
  static const ModelDirectory directory = [] {
    ModelDirectory d;
    d["qwen3"] = {.name = "qwen3", .max_model_len = 4096,
                  .output_format = {ToolCallFormat::kHermes, ReasoningFormat::kThinkTags}};
    d["llama"] = {.name = "llama", .max_model_len = 8192,
                  .output_format = {ToolCallFormat::kLlama3Json, ReasoningFormat::kNone}};
    d["thinker"] = {.name = "thinker", .max_model_len = 0,
                    .output_format = {ToolCallFormat::kNone, ReasoningFormat::kThinkInPrompt},
                    .reasoning_opens_in_prompt = true};
    return d;
  }();
  return directory;
}

// The broker's view of a job the gateway built: it survives the wire unchanged.
void check_submittable(flashq::protocol::Job job) {
  job.id = "fuzz-job-1";
  const flashq::protocol::Submit submit{job};
  const auto again = flashq::protocol::decode_body<flashq::protocol::Submit>(flashq::protocol::encode_body(submit));
  require(again == submit, "a job read from a request is one the broker takes as it is");
}

template <typename Read>
void read_as(Read read) {
  try {
    read();
  } catch (const ApiError& error) {
    require(error.status() >= 400 && error.status() < 500, "a refused request body is a 4xx");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;  // the server answers 400 before any reader sees it
  const RequestExtensions extensions{.priority = std::nullopt, .deadline_ms = std::nullopt,
                                     .default_max_tokens = 0, .default_seed = 7};
  read_as([&] {
    for (const auto& job : read_chat_completion_request(body, models(), extensions).jobs) check_submittable(job);
  });
  read_as([&] {
    for (const auto& job : read_completion_request(body, models(), extensions).jobs) check_submittable(job);
  });
  read_as([&] {
    ResponsesRequest request = read_responses_request(body, models(), {.priority = 0, .deadline_ms = 0, .created_at = 1});
    request.job.id = "resp_fuzz";
    check_submittable(request.job);
    require(recover_responses_request(request.job).settings == request.settings,
            "a response's request comes back from its job");
  });
  return 0;
}
