// Each row's token sampled by the backend (Backend::sample), so that only ids reach the host: on
// a GPU, 4 bytes a row instead of a vocabulary of floats. The engine's path for passes whose
// sampling sequences draft nothing (speculative sampling needs the whole distribution). Each
// row's uniform comes from its sequence's Sampler, which a host draw would have taken too, so a
// seed gives the same tokens either way (up to float rounding at a boundary of the cumulative
// weights). Keeps its device buffers between calls.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "worker/engine/sampler.h"

namespace flashq {

class RowSampler {
 public:
  // A row's parameters for Backend::sample: greedy rows take the argmax whatever `uniform` is.
  static std::array<float, 4> params_for(const SamplingParams& sampling, double uniform);

  // ids[m] for row m of logits[M, V], drawn with params[4m .. 4m+3]; valid until the next call.
  const std::vector<int32_t>& operator()(Backend& backend, const Tensor& logits, std::span<const float> params);

 private:
  Tensor device_params_, device_ids_;
  std::vector<int32_t> ids_;
};

}  // namespace flashq
