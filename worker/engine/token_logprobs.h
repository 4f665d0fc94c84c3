// Log-probabilities of the tokens a sequence outputs, as OpenAI's `logprobs` / `top_logprobs`
// return them: from the target's raw distribution (the log-softmax of its logits, before
// temperature, top-k, top-p and any constraint's mask), as vLLM returns them by default. Under
// speculation they come from the verification rows, which are the rows plain decoding would
// compute, so they equal plain decoding's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace flashq {

inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  bool operator==(const TokenLogprob&) const = default;
};

// One output token's: its own log-probability and the `top` most likely tokens of its row
// (highest first; ties by lower id).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<TokenLogprob> top;
  bool operator==(const TokenLogprobs&) const = default;
};

// What a row of raw logits says of any token that may be chosen from it: its normaliser and its
// `top` most likely tokens, taken before the row is masked or sampled.
struct RowLogprobs {
  float log_normaliser = 0;  // log sum exp of the row
  std::vector<TokenLogprob> top;

  static RowLogprobs of(std::span<const float> logits, int32_t top);
  // The token's entry, given the token's raw logit (a mask leaves an allowed token's logit as is).
  TokenLogprobs for_token(float logit) const { return {logit - log_normaliser, top}; }
};

}  // namespace flashq
