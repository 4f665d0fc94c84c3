#include "kernels/op_checks.h"

#include <algorithm>
#include <string>

#include "kernels/cpu/sampling.h"
#include "shared/error.h"

namespace flashq {

void OpChecks::fail(const std::string& what) const {
  throw Error(ErrorCode::kInternal, std::string(backend_) + " backend: " + what);
}

void OpChecks::on_device(const Tensor& t, const char* name) const {
  require(t.defined() && t.device() == device_, [&] {
    return std::string(name) +
           (device_ == Device::kCuda ? " must be a tensor on the CUDA device" : " must be a tensor in host memory");
  });
}

void OpChecks::f32(const Tensor& t, const char* name) const {
  on_device(t, name);
  require(t.dtype() == DType::kF32, [&] { return std::string(name) + " must be a float32 tensor"; });
}

void OpChecks::kv_cache(const Tensor& t, const char* name) const {
  on_device(t, name);
  require(t.dtype() == DType::kF32 || t.dtype() == DType::kBF16,
          [&] { return std::string(name) + " must be a float32 or bf16 tensor"; });
}

void OpChecks::weight(const Tensor& w, const char* name) const {
  on_device(w, name);
  require(w.dtype() != DType::kI32 && w.dtype() != DType::kU8,
          [&] { return std::string(name) + " must be f32, f16 or bf16"; });
}

void OpChecks::copy_rows(const Tensor& src, const Tensor& dst, int64_t first_row) const {
  on_device(src, "copy_rows src");
  on_device(dst, "copy_rows dst");
  auto row_elements = [](const Tensor& t) { return t.dim(0) == 0 ? 0 : t.numel() / t.dim(0); };
  require(src.dtype() == dst.dtype() && (src.dim(0) == 0 || row_elements(src) == row_elements(dst)),
          "copy_rows: dtypes or row sizes differ");
  require(first_row >= 0 && first_row + src.dim(0) <= dst.dim(0), "copy_rows: rows out of range");
}

void OpChecks::copy_columns(const Tensor& src, const Tensor& dst, int64_t first_col) const {
  on_device(src, "copy_columns src");
  on_device(dst, "copy_columns dst");
  require(
      src.dtype() == dst.dtype() && src.rows() == dst.rows() && first_col >= 0 && first_col + src.cols() <= dst.cols(),
      [&] { return "copy_columns: shapes " + shape_to_string(src.shape()) + " into " + shape_to_string(dst.shape()); });
}

void OpChecks::gather_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) const {
  f32(src, "gather_rows src");
  f32(dst, "gather_rows dst");
  on_device(rows, "gather_rows rows");
  row_index(dst, src, rows, "gather_rows");
}

void OpChecks::store_rows(const Tensor& src, const Tensor& dst, const Tensor& rows) const {
  f32(src, "store_rows src");
  kv_cache(dst, "store_rows dst");
  on_device(rows, "store_rows rows");
  row_index(src, dst, rows, "store_rows");
}

void OpChecks::row_index(const Tensor& listed, const Tensor& indexed, const Tensor& rows, const char* op) const {
  const auto row_size = [](const Tensor& t) { return t.numel() / std::max<int64_t>(t.dim(0), 1); };
  require(listed.rank() >= 1 && indexed.rank() >= 1 && rows.dtype() == DType::kI32 && rows.numel() == listed.dim(0) &&
              (listed.dim(0) == 0 || row_size(listed) == row_size(indexed)),
          [&] { return std::string(op) + " shapes"; });
}

void OpChecks::matmul(const Tensor& x, const Tensor& w, const Tensor& y) const {
  f32(x, "matmul x");
  f32(y, "matmul y");
  weight(w, "matmul w");
  require(w.rank() == 2 && x.cols() == w.dim(1) && y.rows() == x.rows() && y.cols() == w.dim(0), [&] {
    return "matmul shapes x" + shape_to_string(x.shape()) + " w" + shape_to_string(w.shape()) + " y" +
           shape_to_string(y.shape());
  });
}

void OpChecks::matmul_many(const Tensor& x, std::span<const WeightProduct> products) const {
  for (const WeightProduct& product : products) {
    require(product.w != nullptr && product.y != nullptr, "matmul_many: every product needs a weight and an output");
    matmul(x, *product.w, *product.y);
  }
}

void OpChecks::rmsnorm(const Tensor& x, const Tensor& w, const Tensor& y) const {
  f32(x, "rmsnorm x");
  f32(y, "rmsnorm y");
  weight(w, "rmsnorm w");
  require(x.numel() == y.numel() && w.numel() == x.cols(), "rmsnorm shapes");
}

void OpChecks::add_rmsnorm(const Tensor& h, const Tensor& delta, const Tensor& w, const Tensor& y) const {
  f32(h, "add_rmsnorm h");
  f32(delta, "add_rmsnorm delta");
  f32(y, "add_rmsnorm y");
  weight(w, "add_rmsnorm w");
  require(h.numel() == delta.numel() && h.numel() == y.numel() && w.numel() == h.cols(), "add_rmsnorm shapes");
}

void OpChecks::add(const Tensor& h, const Tensor& delta) const {
  f32(h, "add h");
  f32(delta, "add delta");
  require(h.numel() == delta.numel(), "add shapes");
}

void OpChecks::add_bias(const Tensor& y, const Tensor& bias) const {
  f32(y, "add_bias y");
  weight(bias, "add_bias bias");
  require(y.rank() == 2 && bias.rank() == 1 && bias.dim(0) == y.dim(1), [&] {
    return "add_bias: shapes " + shape_to_string(y.shape()) + " and " + shape_to_string(bias.shape());
  });
}

void OpChecks::rope(const Tensor& x, const Tensor& positions) const {
  f32(x, "rope x");
  on_device(positions, "rope positions");
  require(x.rank() == 3 && positions.dtype() == DType::kI32 && positions.numel() == x.dim(0), "rope shapes");
}

void OpChecks::head_norm_rope(const Tensor& x, const Tensor& w, const Tensor& positions) const {
  f32(x, "head_norm_rope x");
  weight(w, "head_norm_rope w");
  on_device(positions, "head_norm_rope positions");
  require(x.rank() == 3 && w.numel() == x.dim(2) && positions.dtype() == DType::kI32 && positions.numel() == x.dim(0),
          "head_norm_rope shapes");
}

void OpChecks::attention_queries(const Tensor& q, const Tensor& key_counts, const Tensor& out) const {
  f32(q, "attention q");
  f32(out, "attention out");
  on_device(key_counts, "attention key_counts");
  require(q.rank() == 3 && out.shape() == q.shape(), "attention shapes");
  require(key_counts.dtype() == DType::kI32 && key_counts.numel() == q.dim(0), "attention key_counts");
}

void OpChecks::attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_counts,
                         const Tensor& out) const {
  attention_queries(q, key_counts, out);
  kv_cache(k, "attention k");
  kv_cache(v, "attention v");
  require(k.rank() == 3 && v.shape() == k.shape() && v.dtype() == k.dtype(), "attention shapes");
  require(q.dim(2) == k.dim(2) && k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0, "attention heads");
}

void OpChecks::swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) const {
  f32(gate, "swiglu gate");
  f32(up, "swiglu up");
  f32(out, "swiglu out");
  require(gate.numel() == up.numel() && gate.numel() == out.numel(), "swiglu shapes");
}

void OpChecks::embedding(const Tensor& table, const Tensor& ids, const Tensor& out) const {
  weight(table, "embedding table");
  on_device(ids, "embedding ids");
  f32(out, "embedding out");
  require(table.rank() == 2 && ids.dtype() == DType::kI32 && out.rows() == ids.numel() && out.cols() == table.dim(1),
          "embedding shapes");
}

void OpChecks::argmax(const Tensor& logits, const Tensor& ids) const {
  f32(logits, "argmax logits");
  on_device(ids, "argmax ids");
  require(ids.dtype() == DType::kI32 && ids.numel() == logits.rows(), "argmax shapes");
}

void OpChecks::sample(const Tensor& logits, const Tensor& params, const Tensor& ids) const {
  f32(logits, "sample logits");
  f32(params, "sample params");
  on_device(ids, "sample ids");
  require(ids.dtype() == DType::kI32 && ids.numel() == logits.rows() &&
              params.numel() == cpu::kSampleParams * logits.rows(),
          "sample shapes");
}

}  // namespace flashq
