// Emitting a step's tokens (docs/dflash.md §2.4, Stops): one event per sequence per step, carrying the
// tokens that joined its output and their text. An eos or stop id ends the output and is not
// part of it; a stop string ends it at the token that completed it, its own text never emitted;
// max_tokens ends it at the last token allowed. Tokens after a stop inside an accepted run are
// dropped. The sequence's TextStream turns ids into text and matches the stop strings.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "worker/engine/generate.h"
#include "worker/engine/sequence.h"

namespace flashq {

// What one step produced for one sequence.
struct StepEvent {
  uint64_t id;
  std::vector<int32_t> token_ids;  // new output tokens
  std::string text;                // new text, whole characters only
  bool finished = false;
  FinishReason finish_reason = FinishReason::kLength;
  bool cancelled = false;
  // The draft this step verified for the sequence: its length (0 when the step drafted nothing)
  // and how many of its tokens the target accepted (a prefix).
  int64_t drafted = 0;
  int64_t accepted = 0;
};

// Appends `tokens` to the output in order, applying every stop; `eos_ids` are the model's.
void emit_tokens(Sequence& sequence, std::span<const int32_t> tokens, std::span<const int32_t> eos_ids,
                 StepEvent& event);
// Ends the output, releasing the text held back for an incomplete character or a possible stop
// string (a stop string completed by that tail makes the reason `stop`, unless cancelled).
void finish_sequence(Sequence& sequence, FinishReason reason, StepEvent& event);

}  // namespace flashq
