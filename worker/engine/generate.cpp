#include "worker/engine/generate.h"

#include "worker/engine/engine.h"

namespace flashq {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "?";
}

double GenerationStats::prefill_tokens_per_s() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_s() const {
  // The first completion token comes out of the prefill pass.
  return decode_seconds > 0 && completion_tokens > 1 ? static_cast<double>(completion_tokens - 1) / decode_seconds : 0.0;
}

GenerationResult generate(TargetModel& model, const Tokenizer& tokenizer, const GenerationRequest& request,
                          const StreamCallback& on_step) {
  EngineOptions options{.max_slots = 1};
  if (on_step) {
    options.on_event = [&](const StepEvent& event) { on_step(event.token_ids, event.text); };
  }
  Engine engine(model, tokenizer, /*proposer=*/nullptr, options);
  engine.add(0, {.generation = request, .spec = SpecMode::kOff});
  engine.run_until_idle();
  FinishedSequence done = std::move(engine.take_finished().at(0));

  GenerationResult result;
  result.tokens = std::move(done.tokens);
  result.text = std::move(done.text);
  result.finish_reason = done.finish_reason;
  result.stats.prompt_tokens = done.prompt_tokens;
  result.stats.completion_tokens = static_cast<int64_t>(result.tokens.size());
  result.stats.prefill_seconds = done.time_to_first_token_s;
  result.stats.decode_seconds = done.total_s - done.time_to_first_token_s;
  return result;
}

}  // namespace flashq
