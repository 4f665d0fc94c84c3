#include "worker/serving/generate.h"

#include <algorithm>
#include <optional>

namespace flashq {

double GenerationStats::prefill_tokens_per_s() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_s() const {
  // The first completion token comes out of the prefill pass.
  return decode_seconds > 0 && completion_tokens > 1 ? static_cast<double>(completion_tokens - 1) / decode_seconds : 0.0;
}

SequenceOutput generate_sequence(TargetModel& model, Proposer* proposer, const Tokenizer& tokenizer,
                                 const SequenceRequest& request, EngineOptions options, const StreamCallback& on_step,
                                 TextStream* carried_text) {
  std::optional<TextStream> fresh_text;
  if (!carried_text) fresh_text.emplace(tokenizer, request.generation.stop);
  TextStream& text = carried_text ? *carried_text : *fresh_text;
  SequenceOutput out;
  bool stopped_by_text = false;
  options.on_event = [&](const StepEvent& event) {
    if (stopped_by_text) return;  // the event that ends the sequence after its stop string
    TextStream::Step step = text.push(event.token_ids);
    const std::span<const int32_t> kept = std::span<const int32_t>(event.token_ids).first(step.tokens_kept);
    stopped_by_text = step.stopped;
    if (event.finished && !step.stopped) {
      TextStream::Step tail = text.finish();
      step.text += tail.text;
      stopped_by_text = tail.stopped && event.finish_reason != FinishReason::kCancelled;
    }
    out.tokens.insert(out.tokens.end(), kept.begin(), kept.end());
    const size_t logprobs = std::min(event.logprobs.size(), kept.size());
    out.logprobs.insert(out.logprobs.end(), event.logprobs.begin(), event.logprobs.begin() + static_cast<std::ptrdiff_t>(logprobs));
    out.text += step.text;
    if (on_step) on_step(kept, step.text);
  };
  Engine engine(model, proposer, std::move(options));
  engine.add(0, request);
  while (!engine.idle()) {
    engine.step();
    if (stopped_by_text) engine.stop(0);  // at the start of the next step, before any pass
  }
  out.engine_record = std::move(engine.take_finished().at(0));
  out.finish_reason = stopped_by_text ? FinishReason::kStop : out.engine_record.finish_reason;
  return out;
}

GenerationResult generate(TargetModel& model, const Tokenizer& tokenizer, const GenerationRequest& request,
                          const StreamCallback& on_step) {
  SequenceOutput out = generate_sequence(model, /*proposer=*/nullptr, tokenizer,
                                         {.generation = request, .spec = SpecMode::kOff}, {.max_slots = 1}, on_step);
  const FinishedSequence& done = out.engine_record;
  GenerationResult result;
  result.tokens = std::move(out.tokens);
  result.text = std::move(out.text);
  result.finish_reason = out.finish_reason;
  result.stats.prompt_tokens = done.prompt_tokens;
  result.stats.completion_tokens = static_cast<int64_t>(result.tokens.size());
  result.stats.prefill_seconds = done.time_to_first_token_s;
  result.stats.decode_seconds = done.total_s - done.time_to_first_token_s;
  return result;
}

}  // namespace flashq
