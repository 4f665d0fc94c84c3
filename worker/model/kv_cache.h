// The key/value cache of one sequence: per layer, keys and values of the positions run so far,
// [rows, kv_heads, head_dim] float32 on the backend's device. Positions [0, length) are valid.
// Truncation only moves the length back (rejected draft tokens are simply overwritten).
//
// A layer that attends only the last W positions (a sliding-window layer, gpt-oss) keeps only
// them: its rows are a ring of W + kMaxRowsPerPass, position t at row t % rows (ring_row), so a
// pass that stores up to kMaxRowsPerPass positions and is later truncated never overwrote a key
// still attended. Every other layer keeps every position, growing up to max_length.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "worker/model/cache_pool.h"

namespace flashq {

class KvCache {
 public:
  // The most positions of one sequence a forward pass may store into a ring layer (the decoder
  // model runs longer chunks in parts).
  static constexpr int64_t kMaxRowsPerPass = 256;

  // `windows`: per layer, 0 (every position) or the window W it attends; empty: none windowed.
  KvCache(Backend& backend, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t max_length,
          std::vector<int64_t> windows = {});

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }  // of the layers that keep every position
  int64_t max_length() const { return max_length_; }
  // Rows of a windowed layer's ring (0 when no layer is windowed); the cache row of position t
  // there is t % ring_rows().
  int64_t ring_rows() const { return ring_rows_; }
  bool ring(int64_t layer) const { return !windows_.empty() && windows_[static_cast<size_t>(layer)] > 0; }

  // Makes room for `length` positions, growing geometrically (copying what is there).
  // kInvalidArgument when `length` exceeds max_length.
  void reserve(int64_t length);
  // Takes room for max_length positions of every layer at once (a ring layer's ring), in one run
  // of `pool` (nothing is allocated after); only while nothing is cached. False, and nothing
  // changed, when no run of the pool is long enough now.
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

 private:
  // Rows layer `layer` holds once whole: max_length, or its ring.
  int64_t whole_rows(int64_t layer) const { return ring(layer) ? ring_rows_ : max_length_; }
  size_t bytes_per_row() const { return 2 * static_cast<size_t>(kv_heads_ * head_dim_) * sizeof(float); }

  Backend& backend_;
  int64_t kv_heads_, head_dim_, max_length_;
  std::vector<int64_t> windows_;
  int64_t ring_rows_ = 0;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  std::vector<Tensor> keys_, values_;
};

}  // namespace flashq
