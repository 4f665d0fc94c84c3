// Plain autoregressive generation of one sequence with the target model, text and all, in the
// calling thread: prefill, then one token per forward pass, the output's text streamed and its
// stop strings matched as it comes (TextStream). The reference path that speculative decoding
// must reproduce, and what `flashq generate` runs.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "worker/engine/engine.h"
#include "worker/engine/generation_request.h"
#include "worker/model/target_model.h"
#include "worker/text/text_stream.h"
#include "worker/text/tokenizer.h"

namespace flashq {

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double prefill_seconds = 0;  // prompt forward and the first token
  double decode_seconds = 0;   // every later token
  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids, without the eos/stop id that ended generation
  std::string text;
  FinishReason finish_reason = FinishReason::kLength;
  GenerationStats stats;
};

// Called once per step with the new ids and the text that became final.
using StreamCallback = std::function<void(std::span<const int32_t> ids, std::string_view text)>;

// One sequence through an engine of its own (`options`; its on_event is this function's), its
// text streamed and its stop strings matched inline; a stop string ends the sequence before the
// engine computes anything more for it. `text`: the stream to carry on (a continuation's, seeded
// with its resume tokens); null: a fresh one with the request's stop strings.
struct SequenceOutput {
  std::vector<int32_t> tokens;  // the output, up to the token that completed a stop string
  std::vector<TokenLogprobs> logprobs;  // one per token, when the request asked for them
  std::string text;
  FinishReason finish_reason = FinishReason::kLength;
  FinishedSequence engine_record;  // timings and speculation figures (its tokens: as the engine emitted them)
};
SequenceOutput generate_sequence(TargetModel& model, Proposer* proposer, const Tokenizer& tokenizer,
                                 const SequenceRequest& request, EngineOptions options,
                                 const StreamCallback& on_step = {}, TextStream* text = nullptr);

// Errors: kInvalidArgument for an empty prompt, a prompt that does not fit the context, bad
// sampling parameters, token ids outside the vocabulary or an empty stop string.
GenerationResult generate(TargetModel& model, const Tokenizer& tokenizer, const GenerationRequest& request,
                          const StreamCallback& on_step = {});

}  // namespace flashq
