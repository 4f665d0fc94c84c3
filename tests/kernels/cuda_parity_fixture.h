// The CUDA tests' fixture: both backends, host tensors rounded to a weight dtype so both see the
// same numbers, and NaN-poisoned outputs (random inputs and the error measure are the op
// harness's, op_harness.h). Every test of a class derived from CudaParity skips (GTEST_SKIP)
// where no CUDA device is visible.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "tests/kernels/op_harness.h"

namespace flashq {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class CudaParity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device visible: CUDA-vs-CPU parity runs only on a GPU machine";
    }
    cpu_ = make_cpu_backend();
    gpu_ = make_backend("cuda");
    ASSERT_EQ(gpu_->device(), Device::kCuda);
  }

  // A host tensor holding `values` (rounded to `dtype`, and `values` updated to the rounded
  // numbers so both backends see the same inputs).
  static Tensor host_tensor(std::vector<float>& values, DType dtype, Shape shape) {
    Tensor t = Tensor::zeros_cpu(dtype, std::move(shape));
    for (size_t i = 0; i < values.size(); ++i) {
      switch (dtype) {
        case DType::kF32: t.data<float>()[i] = values[i]; break;
        case DType::kBF16:
          t.data<uint16_t>()[i] = f32_to_bf16(values[i]);
          values[i] = bf16_to_f32(t.data<uint16_t>()[i]);
          break;
        case DType::kF16:
          t.data<uint16_t>()[i] = f32_to_f16(values[i]);
          values[i] = f16_to_f32(t.data<uint16_t>()[i]);
          break;
        case DType::kI32:
        case DType::kU8: break;
      }
    }
    return t;
  }

  static Tensor host_ints(const std::vector<int32_t>& values) {
    Tensor t = Tensor::zeros_cpu(DType::kI32, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.data<int32_t>());
    return t;
  }

  // The same contents on the GPU (through allocate and copy_from_host).
  Tensor to_gpu(const Tensor& host) {
    Tensor t = gpu_->allocate(host.dtype(), host.shape());
    gpu_->copy_from_host(host.raw(), t);
    return t;
  }

  // A GPU float32 tensor full of NaN: every element the op must write.
  Tensor poisoned(Shape shape) {
    Tensor t = gpu_->allocate(DType::kF32, std::move(shape));
    std::vector<float> nans(static_cast<size_t>(t.numel()), kNaN);
    gpu_->copy_from_host(nans.data(), t);
    return t;
  }

  std::vector<float> download(const Tensor& t) {
    std::vector<float> values(static_cast<size_t>(t.numel()));
    gpu_->copy_to_host(t, values.data());
    return values;
  }

  static std::vector<float> host_values(const Tensor& t) {
    return {t.data<float>(), t.data<float>() + t.numel()};
  }

  std::unique_ptr<Backend> cpu_, gpu_;
};

}  // namespace flashq
