// Choices fed by their jobs' events: parsing, folding, outcomes and usage.
#include "gateway/openai/generation_choices.h"

#include <set>

#include "shared/error.h"

namespace flashq::gateway {
namespace {

constexpr std::string_view kNoWorkerForModel = "no worker serves model";
constexpr int kModelUnavailableRetryAfterS = 5;

}  // namespace

std::optional<ApiError> job_outcome_error(const protocol::FinalResult& result, const std::string& job_id) {
  const std::string why = result.error ? ": " + *result.error : std::string();
  switch (result.finish_reason) {
    case protocol::FinishReason::kStop:
    case protocol::FinishReason::kLength:
      return std::nullopt;
    case protocol::FinishReason::kCancelled:
      return ApiError(499, "invalid_request_error", "cancelled", "job " + job_id + " was cancelled" + why);
    case protocol::FinishReason::kDeadline:
      return ApiError(504, "server_error", "timeout", "job " + job_id + " passed its deadline" + why);
    case protocol::FinishReason::kError:
      return ApiError(500, "server_error", "server_error", "job " + job_id + " failed" + why);
    case protocol::FinishReason::kRejected:
      // The broker ends a queued job whose model no worker has served for its grace period with
      // this text (broker/model_catalog.cpp): no fault of the request, and workers may return.
      if (result.error && result.error->starts_with(kNoWorkerForModel)) {
        return ApiError(503, "server_error", "model_unavailable", "job " + job_id + why, std::nullopt,
                        kModelUnavailableRetryAfterS);
      }
      return ApiError(400, "invalid_request_error", "job_rejected",
                      "job " + job_id + " cannot be served as asked" + why);
  }
  return ApiError(500, "server_error", "server_error", "job " + job_id + " ended in an unknown way");
}

std::size_t complete_utf8_prefix(std::string_view text) {
  // Look back over at most 3 continuation bytes for the lead byte of the last character.
  std::size_t i = text.size();
  std::size_t continuation = 0;
  while (i > 0 && continuation < 3 && (static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++continuation;
  }
  if (i == 0) return text.size();
  const auto lead = static_cast<unsigned char>(text[i - 1]);
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if (length == 1 || continuation + 1 >= length) return text.size();
  return i - 1;
}

std::string tool_call_id(const std::string& job_id, int index) {
  return "call_" + job_id + "_" + std::to_string(index);
}

nlohmann::ordered_json usage_json(const protocol::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

GenerationChoices::GenerationChoices(const GenerationRequest& request, std::vector<std::string> job_ids)
    : job_ids_(std::move(job_ids)),
      prompt_of_choice_(request.prompt_of_choice),
      first_tool_call_only_(!request.parallel_tool_calls),
      logprobs_asked_(!request.jobs.empty() && request.jobs.front().logprobs.has_value()) {
  check_invariant(job_ids_.size() == request.jobs.size(), "one job id per choice");
  prompt_of_choice_.resize(job_ids_.size(), 0);
  for (const std::string& job_id : job_ids_) {
    OutputParserOptions options;
    options.parse_tool_calls = request.has_tools && parses_tool_calls(request.tool_choice);
    options.parse_reasoning = request.parse_reasoning;
    options.starts_in_reasoning = request.starts_in_reasoning;
    // A stream sends a call's arguments as the model writes them, as OpenAI streams them; a whole
    // response has nothing to take back, so it holds each call until it is known to be valid.
    options.argument_streaming = request.stream ? ArgumentStreaming::kIncremental : ArgumentStreaming::kValidated;
    options.make_tool_call_id = [job_id](int index) { return tool_call_id(job_id, index); };
    Choice choice;
    choice.parser = make_output_parser(request.output_format, options);
    choices_.push_back(std::move(choice));
  }
}

void GenerationChoices::take_logprobs(Choice& choice, const protocol::Event& event, Step& step) const {
  if (!logprobs_asked_ || event.logprobs.empty()) return;
  step.logprobs_text_offset = choice.logprobs_text_bytes;
  const std::size_t first = choice.logprobs.size();
  for (const protocol::OutputLogprobs& token : event.logprobs) {
    choice.logprobs_text_bytes += static_cast<std::int64_t>(token.chosen.bytes.size());
    choice.logprobs.push_back(token);
  }
  step.logprobs = std::span<const protocol::OutputLogprobs>(choice.logprobs).subspan(first);
}

GenerationChoices::Step GenerationChoices::on_event(std::size_t index, const protocol::Event& event) {
  Step step;
  Choice& choice = choices_.at(index);
  if (failure_ || choice.final_result || event.seq < choice.next_seq) return step;
  choice.next_seq = event.seq + 1;
  step.first = !choice.started;
  choice.started = true;
  take_logprobs(choice, event, step);
  // Events carry whole characters (the worker holds back a partial one); should one not, the
  // partial character waits for the next event rather than reach a JSON text cut in two.
  choice.pending_text += event.text;
  const std::size_t whole = event.final_result ? choice.pending_text.size() : complete_utf8_prefix(choice.pending_text);
  OutputDeltas deltas = choice.parser->feed(std::string_view(choice.pending_text).substr(0, whole));
  choice.pending_text.erase(0, whole);
  if (event.final_result) {
    append_deltas(deltas, choice.parser->finish());
    choice.final_result = event.final_result;
    step.finished = true;
    step.failure = job_outcome_error(*event.final_result, job_ids_[index]);
    if (step.failure) {
      failure_ = step.failure;
      return step;
    }
  }
  for (OutputDelta& delta : deltas) {
    // parallel_tool_calls false: the calls after the first are dropped, as if never written.
    const bool tool_delta = delta.kind == DeltaKind::kToolCallStart || delta.kind == DeltaKind::kToolCallArguments ||
                            delta.kind == DeltaKind::kToolCallEnd;
    if (first_tool_call_only_ && tool_delta && delta.index > 0) continue;
    choice.message.apply(delta);
    step.deltas.push_back(std::move(delta));
  }
  return step;
}

bool GenerationChoices::all_finished() const {
  for (const Choice& choice : choices_) {
    if (!choice.final_result) return false;
  }
  return true;
}

const protocol::FinalResult& GenerationChoices::final_result(std::size_t choice) const {
  const Choice& c = choices_.at(choice);
  check_invariant(c.final_result.has_value(), "a choice's final result is read once it finished");
  return *c.final_result;
}

protocol::Usage GenerationChoices::usage() const {
  protocol::Usage total;
  std::set<std::size_t> prompts_counted;
  for (std::size_t i = 0; i < choices_.size(); ++i) {
    if (!choices_[i].final_result) continue;
    const protocol::Usage& usage = choices_[i].final_result->usage;
    if (prompts_counted.insert(prompt_of_choice_[i]).second) total.prompt_tokens += usage.prompt_tokens;
    total.completion_tokens += usage.completion_tokens;
  }
  return total;
}

}  // namespace flashq::gateway
