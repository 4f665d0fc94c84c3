#include "worker/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "kernels/cpu/argmax.h"
#include "kernels/cpu/sampling.h"
#include "shared/error.h"

namespace flashq {

void validate_sampling(const SamplingParams& params) {
  auto fail = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, what); };
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) fail("temperature must be >= 0");
  if (params.top_k < 0) fail("top_k must be >= 0");
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) fail("top_p must be in (0, 1]");
}

int32_t argmax(std::span<const float> logits) {
  int32_t id = 0;
  cpu::argmax(logits.data(), &id, 1, static_cast<int64_t>(logits.size()));
  return id;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { validate_sampling(params); }

void Sampler::distribution(std::span<const float> logits, std::vector<float>& probs) const {
  const size_t n = logits.size();
  probs.assign(n, 0.0f);
  if (params_.greedy()) {
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return;
  }
  // Candidates: all ids, or (when top-k or top-p cut) ids in descending logit order, ties by
  // index so the order is deterministic. Sorting is skipped when nothing is cut.
  auto logit = [&](int32_t i) { return cpu::ordered_logit(logits[static_cast<size_t>(i)]); };
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  size_t keep = n;
  if (params_.top_k > 0) keep = std::min(n, static_cast<size_t>(params_.top_k));
  if (keep < n || params_.top_p < 1.0f) {
    auto by_logit = [&](int32_t a, int32_t b) { return logit(a) > logit(b) || (logit(a) == logit(b) && a < b); };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), by_logit);
    order.resize(keep);
  }

  float max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max(max_logit, cpu::ordered_logit(l));
  std::vector<double> weights(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((logit(order[i]) - static_cast<double>(max_logit)) / params_.temperature);
    total += weights[i];
  }
  if (params_.top_p < 1.0f) {
    double mass = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      mass += weights[i] / total;
      if (mass >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = std::accumulate(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  for (size_t i = 0; i < keep; ++i) probs[static_cast<size_t>(order[i])] = static_cast<float>(weights[i] / total);
}

double Sampler::uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // 53 random bits, as a double in [0, 1)
}

int32_t Sampler::draw(std::span<const float> weights) {
  double total = 0.0;
  for (float w : weights) total += w;
  const double target = uniform() * total;
  double running = 0.0;
  int32_t last_positive = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0f) continue;
    running += weights[i];
    last_positive = static_cast<int32_t>(i);
    if (target < running) return last_positive;
  }
  return last_positive;  // rounding left the target past the end
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.greedy()) return argmax(logits);
  distribution(logits, probs_);
  return draw(probs_);
}

}  // namespace flashq
