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

std::vector<Tensor> Workspace::upload_int32s(const std::string& name,
                                             std::initializer_list<std::span<const int32_t>> parts) {
  return upload_parts(name, std::span(parts.begin(), parts.size()));
}

std::vector<Tensor> Workspace::upload_int32s(const std::string& name, std::span<const std::vector<int32_t>> parts) {
  const std::vector<std::span<const int32_t>> spans(parts.begin(), parts.end());
  return upload_parts(name, spans);
}

std::vector<Tensor> Workspace::upload_parts(const std::string& name, std::span<const std::span<const int32_t>> parts) {
  std::vector<int32_t> packed;
  for (std::span<const int32_t> part : parts) packed.insert(packed.end(), part.begin(), part.end());
  Tensor all = get(name, DType::kI32, {static_cast<int64_t>(packed.size())});
  backend_.copy_from_host(packed.data(), all);
  std::vector<Tensor> views;
  int64_t first = 0;
  for (std::span<const int32_t> part : parts) {
    views.push_back(all.slice_rows(first, static_cast<int64_t>(part.size())));
    first += static_cast<int64_t>(part.size());
  }
  return views;
}

}  // namespace flashq
