// Emitting a step's tokens (docs/dflash.md §2.4, Stops): one event per sequence per step, carrying
// the tokens that joined its output. An eos or stop id ends the output and is not part of it;
// max_tokens ends it at the last token allowed. Tokens after a stop inside an accepted run are
// dropped. Stop strings are matched on the text side (TextStream), which ends the sequence
// through Engine::stop.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "worker/engine/generation_request.h"
#include "worker/engine/sequence.h"
#include "worker/engine/token_logprobs.h"

namespace flashq {

// What one step produced for one sequence.
struct StepEvent {
  uint64_t id;
  std::vector<int32_t> token_ids;  // new output tokens
  std::vector<TokenLogprobs> logprobs;  // one per token, when the sequence asked for them
  bool finished = false;
  FinishReason finish_reason = FinishReason::kLength;
  // The draft this step verified for the sequence: its length (0 when the step drafted nothing)
  // and how many of its tokens the target accepted (a prefix).
  int64_t drafted = 0;
  int64_t accepted = 0;
};

// Appends `tokens` to the output in order, applying every stop; `eos_ids` are the model's.
void emit_tokens(Sequence& sequence, std::span<const int32_t> tokens, std::span<const int32_t> eos_ids,
                 StepEvent& event);
// Ends the output.
void finish_sequence(Sequence& sequence, FinishReason reason, StepEvent& event);

}  // namespace flashq
