// Activation buffers reused from one forward pass to the next, so a decode step allocates
// nothing. Each named slot grows to the largest row count seen; callers get a view of the rows
// they need. Views stay valid until the slot is requested again with more rows.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace flashq {

class Workspace {
 public:
  explicit Workspace(Backend& backend) : backend_(backend) {}

  // A [rows, cols...] tensor of `dtype` for slot `name`.
  Tensor get(const std::string& name, DType dtype, Shape shape);

  // The int32 vectors `parts`, copied to the device in one transfer into slot `name`, as a view
  // each: a pass's ids, positions, key counts... cost one copy instead of one per vector.
  std::vector<Tensor> upload_int32s(const std::string& name, std::initializer_list<std::span<const int32_t>> parts);
  // The same for a number of parts known only at run time.
  std::vector<Tensor> upload_int32s(const std::string& name, std::span<const std::vector<int32_t>> parts);

  // Counts the allocations so far: while it stands still, every view handed out keeps its
  // address (what a recorded pass relies on).
  uint64_t generation() const { return generation_; }

 private:
  std::vector<Tensor> upload_parts(const std::string& name, std::span<const std::span<const int32_t>> parts);

  Backend& backend_;
  std::map<std::string, Tensor> slots_;
  uint64_t generation_ = 0;
};

}  // namespace flashq
