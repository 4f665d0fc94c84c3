// Choosing the next token from logits: greedy (temperature 0), or sampling with temperature,
// top-k and top-p. A seeded sampler is deterministic: same seed, same logits, same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace flashq {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: no limit
  float top_p = 1.0f;        // 1: no nucleus cut
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
};

// kInvalidArgument naming the field when a value is out of range.
void validate_sampling(const SamplingParams& params);

// Index of the largest logit (lowest index on ties; NaN reads as -inf, as in every sampler here).
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  int32_t sample(std::span<const float> logits);

  // The distribution sampling draws from: softmax(logits / temperature) restricted to the top-k
  // and then to the smallest set whose mass reaches top_p, renormalised. Greedy gives a one-hot.
  void distribution(std::span<const float> logits, std::vector<float>& probs) const;

  // A uniform draw in [0, 1) from this sampler's stream (used by speculative acceptance).
  double uniform();
  // Draws an index from a (not necessarily normalised) non-negative weight vector.
  int32_t draw(std::span<const float> weights);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> probs_;
};

}  // namespace flashq
