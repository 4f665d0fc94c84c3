#include "worker/model/workspace.h"

#include <algorithm>

namespace flashq {

Tensor Workspace::get(const std::string& name, DType dtype, Shape shape) {
  Tensor probe(nullptr, nullptr, dtype, backend_.device(), shape);
  Tensor& slot = slots_[name];
  if (!slot.defined() || slot.dtype() != dtype || slot.nbytes() < probe.nbytes()) {
    Shape grown = shape;
    if (slot.defined() && slot.dtype() == dtype && !grown.empty()) {
      // Grow rows geometrically so a slowly growing batch does not reallocate every step.
      const int64_t row_elements = probe.numel() / std::max<int64_t>(grown[0], 1);
      grown[0] = std::max(grown[0], 2 * slot.numel() / std::max<int64_t>(row_elements, 1));
    }
    slot = backend_.allocate(dtype, grown);
    ++generation_;
  }
  return slot.reshape({slot.numel()}).slice_rows(0, probe.numel()).reshape(std::move(shape));
}

}  // namespace flashq
