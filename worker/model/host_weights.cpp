#include "worker/model/host_weights.h"

#include <cstring>
#include <vector>

#include "shared/error.h"

namespace flashq {

Tensor gather_host_rows(const Tensor& host, std::span<const RowRun> runs) {
  check_invariant(host.device() == Device::kCpu && host.rank() >= 1, "rows are gathered from a host tensor");
  int64_t rows = 0;
  for (const RowRun& run : runs) {
    check_invariant(run.first >= 0 && run.count >= 0 && run.first + run.count <= host.dim(0), "row runs in range");
    rows += run.count;
  }
  Shape shape = host.shape();
  shape[0] = rows;
  Tensor out = Tensor::zeros_cpu(host.dtype(), shape);
  const size_t row_bytes = host.dim(0) == 0 ? 0 : host.nbytes() / static_cast<size_t>(host.dim(0));
  auto* to = static_cast<char*>(out.raw());
  const auto* from = static_cast<const char*>(host.raw());
  for (const RowRun& run : runs) {
    std::memcpy(to, from + static_cast<size_t>(run.first) * row_bytes, static_cast<size_t>(run.count) * row_bytes);
    to += static_cast<size_t>(run.count) * row_bytes;
  }
  return out;
}

std::vector<RowRun> rows_of_each_group(int64_t groups, int64_t group_rows, int64_t offset, int64_t count) {
  std::vector<RowRun> runs;
  for (int64_t g = 0; g < groups; ++g) runs.push_back({g * group_rows + offset, count});
  return runs;
}

Tensor one_plus_weight(const Tensor& host) {
  check_invariant(host.device() == Device::kCpu, "a norm weight is rescaled on the host");
  Tensor out = Tensor::zeros_cpu(DType::kF32, host.shape());
  float* to = out.data<float>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    float w = 0.0f;
    switch (host.dtype()) {
      case DType::kF32:
        w = host.data<float>()[i];
        break;
      case DType::kBF16:
        w = bf16_to_f32(host.data<uint16_t>()[i]);
        break;
      case DType::kF16:
        w = f16_to_f32(host.data<uint16_t>()[i]);
        break;
      default:
        check_invariant(false, "a norm weight is f32, f16 or bf16");
    }
    to[i] = 1.0f + w;
  }
  return out;
}

}  // namespace flashq
