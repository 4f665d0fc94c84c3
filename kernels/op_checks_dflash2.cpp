// The checks of DFlash2's drafter ops (kernels/op_checks.h), shared by every backend.
#include <string>

#include "kernels/op_checks.h"

namespace flashq {

void OpChecks::grouped_dynamic_conv(const Tensor& x, const Tensor& dynamic, const Tensor& base,
                                    const Tensor& row_in_block, int64_t group_size, const Tensor& out) const {
  f32(x, "grouped_dynamic_conv x");
  f32(dynamic, "grouped_dynamic_conv dynamic");
  f32(out, "grouped_dynamic_conv out");
  on_device(base, "grouped_dynamic_conv base");
  on_device(row_in_block, "grouped_dynamic_conv row_in_block");
  require(base.dtype() == DType::kF32 || base.dtype() == DType::kBF16,
          "grouped_dynamic_conv: base must be f32 or bf16");
  require(row_in_block.dtype() == DType::kI32, "grouped_dynamic_conv: row_in_block must be int32");
  require(x.rank() == 2 && out.shape() == x.shape() && x.raw() != out.raw(),
          "grouped_dynamic_conv: x and out must be two distinct [rows, channels]");
  require(group_size > 0 && x.dim(1) % group_size == 0, [&] {
    return "grouped_dynamic_conv: a group size of " + std::to_string(group_size) + " must divide " +
           std::to_string(x.dim(1)) + " channels";
  });
  const int64_t groups = x.dim(1) / group_size;
  require(base.rank() == 2 && base.dim(1) == x.dim(1) && base.dim(0) >= 1,
          [&] { return "grouped_dynamic_conv: base must be [taps, channels], got " + shape_to_string(base.shape()); });
  require(dynamic.rank() == 2 && dynamic.dim(0) == x.dim(0) && dynamic.dim(1) == base.dim(0) * groups, [&] {
    return "grouped_dynamic_conv: dynamic must be [rows, taps * groups], got " + shape_to_string(dynamic.shape());
  });
  require(row_in_block.rank() == 1 && row_in_block.dim(0) == x.dim(0), "grouped_dynamic_conv: one row_in_block a row");
}

void OpChecks::top_k(const Tensor& logits, const Tensor& values, const Tensor& ids) const {
  f32(logits, "top_k logits");
  f32(values, "top_k values");
  on_device(ids, "top_k ids");
  require(ids.dtype() == DType::kI32, "top_k: ids must be int32");
  require(logits.rank() == 2 && ids.rank() == 2 && values.shape() == ids.shape() && ids.dim(0) == logits.dim(0) &&
              ids.dim(1) >= 1 && ids.dim(1) <= logits.dim(1),
          [&] {
            return "top_k: logits [rows, vocab], values and ids [rows, k] with 1 <= k <= vocab, got " +
                   shape_to_string(logits.shape()) + ", " + shape_to_string(values.shape()) + ", " +
                   shape_to_string(ids.shape());
          });
}

void OpChecks::selector_pair_scores(const Tensor& a, const Tensor& h, const Tensor& b, const Tensor& out) const {
  for (const auto& [t, name] : {std::pair{&a, "a"}, {&h, "h"}, {&b, "b"}, {&out, "out"}}) f32(*t, name);
  require(h.rank() == 2 && out.rank() == 3 && out.dim(0) == h.dim(0) && out.dim(1) == out.dim(2) && a.rank() == 2 &&
              b.shape() == a.shape() && a.dim(0) == h.dim(0) * out.dim(1) && a.dim(1) == h.dim(1),
          [&] {
            return "selector_pair_scores: a and b [rows * k, rank], h [rows, rank], out [rows, k, k], got " +
                   shape_to_string(a.shape()) + ", " + shape_to_string(h.shape()) + ", " + shape_to_string(b.shape()) +
                   ", " + shape_to_string(out.shape());
          });
}

}  // namespace flashq
