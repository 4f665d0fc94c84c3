#include "worker/model/kv_cache.h"

#include <algorithm>
#include <string>

#include "shared/error.h"

namespace flashq {

KvCache::KvCache(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t max_length)
    : backend_(backend), kv_heads_(kv_heads), head_dim_(head_dim), max_length_(max_length),
      keys_(static_cast<size_t>(layers)), values_(static_cast<size_t>(layers)) {}

void KvCache::reserve(int64_t length) {
  if (length <= capacity_) return;
  if (length > max_length_) {
    throw Error(ErrorCode::kInvalidArgument, "sequence of " + std::to_string(length) +
                                                 " tokens exceeds the model's context of " +
                                                 std::to_string(max_length_));
  }
  int64_t grown = std::min(max_length_, std::max({length, capacity_ * 2, int64_t{64}}));
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    for (Tensor* slot : {&keys_[layer], &values_[layer]}) {
      Tensor bigger = backend_.allocate(DType::kF32, {grown, kv_heads_, head_dim_});
      if (length_ > 0) backend_.copy_rows(slot->slice_rows(0, length_), bigger, 0);
      *slot = bigger;
    }
  }
  capacity_ = grown;
}

void KvCache::commit(int64_t count) {
  check_invariant(length_ + count <= capacity_, "kv cache commit within capacity");
  length_ += count;
}

void KvCache::truncate(int64_t length) {
  check_invariant(length >= 0 && length <= length_, "kv cache truncates to a shorter length");
  length_ = length;
}

bool KvCache::take_whole(CachePool& pool) {
  check_invariant(length_ == 0, "a kv cache is taken whole before anything is cached");
  const auto layers = static_cast<int64_t>(keys_.size());
  std::optional<Tensor> run = pool.try_allocate(DType::kF32, {2 * layers, max_length_, kv_heads_, head_dim_});
  if (!run) return false;
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (int64_t kind = 0; kind < 2; ++kind) {
      Tensor& slot = kind == 0 ? keys_[layer] : values_[layer];
      slot = run->slice_rows(2 * layer + kind, 1).reshape({max_length_, kv_heads_, head_dim_});
    }
  }
  capacity_ = max_length_;
  return true;
}

void KvCache::release() {
  check_invariant(length_ == 0, "a kv cache is released before anything is cached");
  for (size_t layer = 0; layer < keys_.size(); ++layer) keys_[layer] = values_[layer] = Tensor();
  capacity_ = 0;
}

int64_t KvCache::whole_bytes() const {
  return static_cast<int64_t>(bytes_per_token()) * max_length_;
}

size_t KvCache::bytes_per_token() const {
  return keys_.size() * 2 * static_cast<size_t>(kv_heads_ * head_dim_) * sizeof(float);
}

}  // namespace flashq
