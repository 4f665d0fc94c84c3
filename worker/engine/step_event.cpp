#include "worker/engine/step_event.h"

#include <algorithm>

namespace flashq {
namespace {

bool contains(std::span<const int32_t> ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

}  // namespace

void emit_tokens(Sequence& s, std::span<const int32_t> tokens, std::span<const int32_t> eos_ids, StepEvent& event) {
  const GenerationRequest& g = s.request.generation;
  for (int32_t token : tokens) {
    if (s.finish_reason) return;
    if ((!g.ignore_eos && contains(eos_ids, token)) || contains(g.stop_token_ids, token)) {
      finish_sequence(s, FinishReason::kStop, event);
      return;
    }
    s.output.push_back(token);
    event.token_ids.push_back(token);
    if (s.request.constraint) s.request.constraint->advance(token);
    if (static_cast<int64_t>(s.output.size()) >= g.max_tokens) {
      finish_sequence(s, FinishReason::kLength, event);
      return;
    }
  }
}

void finish_sequence(Sequence& s, FinishReason reason, StepEvent& event) {
  s.finish_reason = reason;
  event.finished = true;
  event.finish_reason = reason;
}

}  // namespace flashq
