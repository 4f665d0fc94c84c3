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

 private:
  Backend& backend_;
  std::map<std::string, Tensor> slots_;
};

}  // namespace flashq
