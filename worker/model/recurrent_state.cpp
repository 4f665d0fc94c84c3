#include "worker/model/recurrent_state.h"

#include <string>

#include "shared/error.h"

namespace flashq {
namespace {

// Fills `tensor` (float32, on any device) with zeros.
void zero(Backend& backend, Tensor& tensor) {
  const std::vector<float> zeros(static_cast<size_t>(tensor.numel()), 0.0f);
  backend.copy_from_host(zeros.data(), tensor);
}

}  // namespace

RecurrentState::RecurrentState(Backend& backend, const LinearAttentionConfig& shape, int64_t linear_layers)
    : backend_(backend), shape_(shape) {
  for (int64_t i = 0; i < linear_layers; ++i) layers_.push_back(make_layer());
}

RecurrentState::Layer RecurrentState::make_layer() const {
  const int64_t taps = shape_.conv_kernel - 1;
  Layer layer{
      .conv_q = backend_.allocate(DType::kF32, {taps, shape_.key_dim()}),
      .conv_k = backend_.allocate(DType::kF32, {taps, shape_.key_dim()}),
      .conv_v = backend_.allocate(DType::kF32, {taps, shape_.value_dim()}),
      .matrix = backend_.allocate(DType::kF32, {shape_.value_heads, shape_.key_head_dim, shape_.value_head_dim})};
  for (Tensor* t : {&layer.conv_q, &layer.conv_k, &layer.conv_v, &layer.matrix}) zero(backend_, *t);
  return layer;
}

void RecurrentState::copy_layer(const Layer& from, Layer& to) {
  backend_.copy_rows(from.conv_q, to.conv_q, 0);
  backend_.copy_rows(from.conv_k, to.conv_k, 0);
  backend_.copy_rows(from.conv_v, to.conv_v, 0);
  backend_.copy_rows(from.matrix, to.matrix, 0);
}

void RecurrentState::begin_pass(int64_t length, int64_t truncatable_rows) {
  check_invariant(kept_rows_ < 0, "a truncated recurrent state is replayed before the next pass");
  pass_rows_ = 0;
  pass_start_ = -1;
  if (truncatable_rows < 2 || truncatable_rows > kMaxTruncatableRows) return;
  if (checkpoint_.empty()) {
    const int64_t n = kMaxTruncatableRows, heads = shape_.value_heads;
    for (size_t i = 0; i < layers_.size(); ++i) {
      checkpoint_.push_back(make_layer());
      inputs_.push_back({.x_q = backend_.allocate(DType::kF32, {n, shape_.key_dim()}),
                         .x_k = backend_.allocate(DType::kF32, {n, shape_.key_dim()}),
                         .x_v = backend_.allocate(DType::kF32, {n, shape_.value_dim()}),
                         .g = backend_.allocate(DType::kF32, {n, heads}),
                         .beta = backend_.allocate(DType::kF32, {n, heads})});
    }
  }
  for (size_t i = 0; i < layers_.size(); ++i) copy_layer(layers_[i], checkpoint_[i]);
  pass_start_ = length;
  pass_rows_ = truncatable_rows;
}

void RecurrentState::truncate(int64_t length, int64_t current) {
  if (length == current) return;
  if (pass_rows_ == 0 || length < pass_start_ || length > pass_start_ + pass_rows_ ||
      current != pass_start_ + pass_rows_) {
    throw Error(ErrorCode::kInternal, "a recurrent state truncates only into its last pass of at most " +
                                          std::to_string(kMaxTruncatableRows) + " rows (to " + std::to_string(length) +
                                          " from " + std::to_string(current) + ")");
  }
  for (size_t i = 0; i < layers_.size(); ++i) copy_layer(checkpoint_[i], layers_[i]);
  kept_rows_ = length - pass_start_;
  pass_rows_ = 0;
  pass_start_ = -1;
}

void RecurrentState::clear() {
  for (Layer& layer : layers_) {
    for (Tensor* t : {&layer.conv_q, &layer.conv_k, &layer.conv_v, &layer.matrix}) zero(backend_, *t);
  }
  pass_rows_ = 0;
  pass_start_ = -1;
  kept_rows_ = -1;
}

int64_t RecurrentState::state_bytes_per_layer() const {
  const int64_t per_layer = (shape_.conv_kernel - 1) * (2 * shape_.key_dim() + shape_.value_dim()) +
                            shape_.value_heads * shape_.key_head_dim * shape_.value_head_dim;
  return per_layer * static_cast<int64_t>(sizeof(float));
}

void RecurrentState::copy_live_from(const RecurrentState& other) {
  check_invariant(other.layers() == layers(), "a state is copied from one of the same layers");
  for (size_t i = 0; i < layers_.size(); ++i) copy_layer(other.layers_[i], layers_[i]);
  pass_rows_ = 0;
  pass_start_ = -1;
  kept_rows_ = -1;
}

int64_t RecurrentState::checkpoint_bytes() const {
  const int64_t inputs = kMaxTruncatableRows * (2 * shape_.key_dim() + shape_.value_dim() + 2 * shape_.value_heads);
  return state_bytes() + inputs * layers() * static_cast<int64_t>(sizeof(float));
}

}  // namespace flashq
