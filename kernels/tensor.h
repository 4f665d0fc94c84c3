// A dense, contiguous, row-major tensor: a typed view of memory on one device. Copies are cheap
// views that share ownership of the memory; a tensor viewing an mmapped checkpoint keeps the
// mapping alive.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace flashq {

enum class Device : uint8_t { kCpu, kCuda };

using Shape = std::vector<int64_t>;

std::string shape_to_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<void> owner, void* data, DType dtype, Device device, Shape shape);

  // Host memory, 64-byte aligned, zero-filled.
  static Tensor zeros_cpu(DType dtype, Shape shape);

  bool defined() const { return data_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  // Rows = product of all but the last dimension; columns = the last dimension.
  int64_t rows() const { return numel() / (shape_.empty() ? 1 : shape_.back()); }
  int64_t cols() const { return shape_.empty() ? 1 : shape_.back(); }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const { return static_cast<T*>(data_); }

  // Rows [first, first + count) along dimension 0, as a view.
  Tensor slice_rows(int64_t first, int64_t count) const;
  // The same memory with another shape of the same element count.
  Tensor reshape(Shape shape) const;

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  Shape shape_;
};

}  // namespace flashq
