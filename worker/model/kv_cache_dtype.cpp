#include "worker/model/kv_cache_dtype.h"

#include "shared/error.h"

namespace flashq {

DType parse_kv_cache_dtype(std::string_view name) {
  if (name == "bf16") return DType::kBF16;
  if (name == "float32") return DType::kF32;
  throw Error(ErrorCode::kInvalidArgument, "the KV cache dtype must be bf16 or float32, not '" + std::string(name) + "'");
}

std::string_view kv_cache_dtype_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "float32"; }

}  // namespace flashq
