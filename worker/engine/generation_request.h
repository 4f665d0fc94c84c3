// What one sequence asks of the engine, in token ids: the prompt, how many tokens at most, how to
// sample and which ids end it, and how it ended. Text (stop strings, detokenizing) is the text
// layer's: worker/text/text_stream.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "worker/engine/sampler.h"

namespace flashq {

enum class FinishReason { kStop, kLength, kCancelled };
std::string_view finish_reason_name(FinishReason reason);

struct GenerationRequest {
  std::vector<int32_t> prompt_tokens;
  int64_t max_tokens = 256;
  SamplingParams sampling;
  // Stop strings: the engine carries them for whoever streams the text (TextStream), which ends
  // the output before them and tells the engine to stop (Engine::stop).
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;  // like eos: end, and are not part of the output
  bool ignore_eos = false;              // run to max_tokens (benchmarks)
  // Log-probabilities with each output token (token_logprobs.h): -1 none; 0..20 the token's own
  // and this many of the most likely in its row.
  int32_t logprobs = -1;
};

}  // namespace flashq
