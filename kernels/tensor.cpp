#include "kernels/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "shared/error.h"

namespace flashq {

std::string shape_to_string(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

Tensor::Tensor(std::shared_ptr<void> owner, void* data, DType dtype, Device device, Shape shape)
    : owner_(std::move(owner)), data_(data), dtype_(dtype), device_(device), shape_(std::move(shape)) {}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

Tensor Tensor::zeros_cpu(DType dtype, Shape shape) {
  Tensor probe(nullptr, nullptr, dtype, Device::kCpu, shape);
  size_t bytes = (probe.nbytes() + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (!memory) throw std::bad_alloc();
  std::memset(memory, 0, bytes);
  std::shared_ptr<void> owner(memory, std::free);
  return Tensor(owner, memory, dtype, Device::kCpu, std::move(shape));
}

Tensor Tensor::slice_rows(int64_t first, int64_t count) const {
  check_invariant(rank() >= 1 && first >= 0 && count >= 0 && first + count <= dim(0),
                  "slice_rows within dimension 0");
  Shape sliced = shape_;
  sliced[0] = count;
  size_t row_bytes = dim(0) == 0 ? 0 : nbytes() / static_cast<size_t>(dim(0));
  return Tensor(owner_, static_cast<char*>(data_) + first * row_bytes, dtype_, device_, std::move(sliced));
}

Tensor Tensor::reshape(Shape shape) const {
  Tensor reshaped(owner_, data_, dtype_, device_, std::move(shape));
  check_invariant(reshaped.numel() == numel(), "reshape keeps the element count");
  return reshaped;
}

}  // namespace flashq
