// Fast deterministic random numbers for writing random checkpoints (splitmix64): the same seed
// always gives the same model, on every machine.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dtype.h"

namespace flashq {

class RandomWeights {
 public:
  explicit RandomWeights(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float symmetric() { return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0); }

  // `count` values center + U(-1, 1) * spread, encoded in `dtype`.
  std::string fill(DType dtype, int64_t count, float center, float spread);

 private:
  uint64_t state_;
};

}  // namespace flashq
