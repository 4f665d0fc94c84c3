// The key/value cache of one sequence: per layer, keys and values of every position run so far,
// [capacity, kv_heads, head_dim] float32 on the backend's device. Positions [0, length) are
// valid. Truncation only moves the length back (rejected draft tokens are simply overwritten).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/cache_pool.h"

namespace flashq {

class KvCache {
 public:
  KvCache(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t max_length);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t max_length() const { return max_length_; }

  // Makes room for `length` positions, growing geometrically (copying what is there).
  // kInvalidArgument when `length` exceeds max_length.
  void reserve(int64_t length);
  // Takes room for max_length positions of every layer at once, in one run of `pool` (nothing is
  // allocated after); only while nothing is cached. False, and nothing changed, when no run of
  // the pool is long enough now.
  bool take_whole(CachePool& pool);
  // The bytes take_whole needs.
  int64_t whole_bytes() const;
  // Gives the memory back (to its pool, if it came from one); only while nothing is cached.
  void release();
  // Marks `count` more positions as written (the model wrote their rows at [length, length+count)).
  void commit(int64_t count);
  // Keeps positions [0, length).
  void truncate(int64_t length);

  Tensor& keys(int64_t layer) { return keys_[layer]; }
  Tensor& values(int64_t layer) { return values_[layer]; }

  size_t bytes_per_token() const;

 private:
  Backend& backend_;
  int64_t kv_heads_, head_dim_, max_length_;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  std::vector<Tensor> keys_, values_;
};

}  // namespace flashq
