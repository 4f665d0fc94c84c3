#include "worker/engine/row_sampler.h"

#include <algorithm>

#include "shared/error.h"

namespace flashq {

std::array<float, 4> RowSampler::params_for(const SamplingParams& sampling, double uniform) {
  if (sampling.greedy()) return {0.0f, 0.0f, 1.0f, 0.0f};
  // A float just below 1 stays below 1: u * weight must never reach the whole kept weight.
  const float u = std::min(static_cast<float>(uniform), 0.99999994f);
  return {sampling.temperature, static_cast<float>(sampling.top_k), sampling.top_p, u};
}

const std::vector<int32_t>& RowSampler::operator()(Backend& backend, const Tensor& logits,
                                                   std::span<const float> params) {
  const int64_t rows = logits.rows();
  check_invariant(static_cast<int64_t>(params.size()) == 4 * rows, "four sampling parameters a row");
  if (!device_ids_.defined() || device_ids_.numel() < rows) {
    const int64_t capacity = std::max<int64_t>(rows, 256);
    device_ids_ = backend.allocate(DType::kI32, {capacity});
    device_params_ = backend.allocate(DType::kF32, {capacity, 4});
  }
  Tensor ids = device_ids_.slice_rows(0, rows);
  Tensor row_params = device_params_.slice_rows(0, rows);
  backend.copy_from_host(params.data(), row_params);
  backend.sample(logits, row_params, ids);
  ids_.resize(static_cast<size_t>(rows));
  backend.copy_to_host(ids, ids_.data());
  return ids_;
}

}  // namespace flashq
