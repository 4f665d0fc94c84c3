#include "worker/process/attempt_text.h"

namespace flashq {

namespace {

protocol::LogprobEntry wire_entry(const Tokenizer& tokenizer, int32_t token, float logprob) {
  return {.token = token, .logprob = logprob, .bytes = tokenizer.token_bytes(token)};
}

// The engine's log-probabilities of `ids` as TOKENS carries them: each token's bytes added.
std::vector<protocol::OutputLogprobs> wire_logprobs(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                                    const std::vector<TokenLogprobs>& logprobs) {
  std::vector<protocol::OutputLogprobs> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    protocol::OutputLogprobs& token = out.emplace_back();
    token.chosen = wire_entry(tokenizer, ids[i], logprobs[i].logprob);
    for (const TokenLogprob& candidate : logprobs[i].top) {
      token.top.push_back(wire_entry(tokenizer, candidate.token, candidate.logprob));
    }
  }
  return out;
}

}  // namespace

AttemptText::AttemptText(const Tokenizer& tokenizer_in, const protocol::Assign& assign, uint64_t link_id)
    : tokenizer(tokenizer_in),
      job_id(assign.job.id),
      attempt(assign.attempt),
      link(link_id),
      stream(tokenizer_in, assign.job.stop, assign.resume_tokens, assign.resume_text_bytes) {}

std::optional<protocol::Tokens> AttemptText::tokens(AttemptTokens& step) {
  if (stopped_by_string) return std::nullopt;  // computed past the stop string
  TextStream::Step text = stream.push(step.token_ids);
  step.token_ids.resize(text.tokens_kept);
  if (text.stopped) {
    stopped_by_string = true;
  } else if (step.last) {  // the output ended: what was held back goes out
    TextStream::Step tail = stream.finish();
    text.text += tail.text;
    tail_stopped = tail.stopped;
  }
  // A step whose tokens were all cut (an eos first) still reports its draft.
  if (step.token_ids.empty() && text.text.empty() && !step.spec) return std::nullopt;
  kept_tokens += static_cast<int64_t>(step.token_ids.size());
  std::vector<protocol::OutputLogprobs> logprobs;
  if (!step.logprobs.empty()) logprobs = wire_logprobs(tokenizer, step.token_ids, step.logprobs);
  return protocol::Tokens{.id = job_id,
                          .attempt = attempt,
                          .seq = next_seq++,
                          .token_ids = std::move(step.token_ids),
                          .text = std::move(text.text),
                          .spec = std::move(step.spec),
                          .logprobs = std::move(logprobs)};
}

void AttemptText::complete(protocol::FinalResult& result) const {
  result.usage.completion_tokens += kept_tokens;
  // A stop string ends the output whatever the engine did after it (the step it took to stop, a
  // cancel or failure that came later). A tail completing one makes a `length` end a `stop`; a
  // cancel or a deadline stays what it was.
  if (stopped_by_string || (tail_stopped && result.finish_reason == protocol::FinishReason::kLength)) {
    result.finish_reason = protocol::FinishReason::kStop;
    result.error.reset();
  }
}

}  // namespace flashq
