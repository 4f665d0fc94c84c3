// Activation buffers reused from one forward pass to the next, so a decode step allocates
// nothing. Each named slot grows to the largest row count seen; callers get a view of the rows
// they need. Views stay valid until the slot is requested again with more rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kernels/backend.h"

namespace flashq {

class Workspace {
 public:
  explicit Workspace(Backend& backend) : backend_(backend) {}

  // A [rows, cols...] tensor of `dtype` for slot `name`.
  Tensor get(const std::string& name, DType dtype, Shape shape);

  // Counts the allocations so far: while it stands still, every view handed out keeps its
  // address (what a recorded pass relies on).
  uint64_t generation() const { return generation_; }

 private:
  Backend& backend_;
  std::map<std::string, Tensor> slots_;
  uint64_t generation_ = 0;
};

}  // namespace flashq
