// Each row's argmax of a logits tensor, worked out by the backend, so that only the ids reach the
// host (on a GPU: 4 bytes a row instead of a vocabulary of floats). Keeps its device buffer
// between calls: no allocation per step once it is large enough.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace flashq {

class RowArgmax {
 public:
  // ids[m] = argmax of row m of logits[M, V] (lowest index on ties), valid until the next call.
  const std::vector<int32_t>& operator()(Backend& backend, const Tensor& logits);

 private:
  Tensor device_ids_;
  std::vector<int32_t> ids_;
};

}  // namespace flashq
