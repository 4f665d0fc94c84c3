// Plain autoregressive generation of one sequence with the target model: prefill, then one
// token per forward pass. The reference path that speculative decoding must reproduce, and
// what `flashq generate` runs.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "worker/engine/sampler.h"
#include "worker/model/target_model.h"
#include "worker/text/tokenizer.h"

namespace flashq {

enum class FinishReason { kStop, kLength, kCancelled };
std::string_view finish_reason_name(FinishReason reason);

struct GenerationRequest {
  std::vector<int32_t> prompt_tokens;
  int64_t max_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop;         // stop strings: generation ends before them
  std::vector<int32_t> stop_token_ids;   // like eos: end, and are not part of the output
  bool ignore_eos = false;               // run to max_tokens (benchmarks)
};

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

// Errors: kInvalidArgument for an empty prompt, a prompt that does not fit the context, bad
// sampling parameters or token ids outside the vocabulary.
GenerationResult generate(TargetModel& model, const Tokenizer& tokenizer, const GenerationRequest& request,
                          const StreamCallback& on_step = {});

}  // namespace flashq
