#include "worker/engine/row_argmax.h"

#include <algorithm>

namespace flashq {

const std::vector<int32_t>& RowArgmax::operator()(Backend& backend, const Tensor& logits) {
  const int64_t rows = logits.rows();
  if (!device_ids_.defined() || device_ids_.numel() < rows) {
    device_ids_ = backend.allocate(DType::kI32, {std::max<int64_t>(rows, 256)});
  }
  Tensor ids = device_ids_.slice_rows(0, rows);
  backend.argmax(logits, ids);
  ids_.resize(static_cast<size_t>(rows));
  backend.copy_to_host(ids, ids_.data());
  return ids_;
}

}  // namespace flashq
