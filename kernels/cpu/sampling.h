// Sampling one token per row where the logits are (twin: cuda::sample_rows), so that only ids
// leave the device. Row m of logits [rows, vocab] is drawn with params[4m .. 4m+3] =
// {temperature, top_k, top_p, u}:
//  - temperature <= 0: the argmax (lowest index on ties);
//  - else weights w_i = exp((l_i - max) / temperature), kept for the top_k largest logits (0: all;
//    ties by lower index), then for the shortest run of those, largest first, whose weight
//    reaches top_p of theirs;
//  - the id is the first kept index, in index order, at which the running weight exceeds u times
//    the kept weight (u in [0, 1); the last kept index if rounding leaves u past the end).
// This is the distribution and the draw of the engine's Sampler (worker/engine/sampler.h), which
// supplies u from the sequence's seeded stream. A NaN logit (a broken model) reads as -inf
// everywhere, as on the GPU: it never wins an argmax and weighs nothing.
#pragma once

#include <cmath>
#include <cstdint>

namespace flashq::cpu {

inline constexpr int kSampleParams = 4;

// A logit as every argmax and sampler orders and weighs it: NaN as -inf.
inline float ordered_logit(float logit) { return std::isnan(logit) ? -INFINITY : logit; }

void sample_rows(const float* logits, const float* params, int32_t* ids, int64_t rows, int64_t vocab);

}  // namespace flashq::cpu
