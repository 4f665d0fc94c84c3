// The element type of KV caches (`--kv-cache-dtype`): float32, or bf16 (half the memory per
// position; keys and values rounded once as stored and widened as attention reads them, as
// Hugging Face's bf16 models keep them). One for a model's caches, its paged store and its
// drafter's context, chosen at load (ServingModel::set_kv_cache_dtype).
#pragma once

#include <string>
#include <string_view>

#include "kernels/dtype.h"

namespace flashq {

// "bf16" or "float32"; anything else is kInvalidArgument naming the choices.
DType parse_kv_cache_dtype(std::string_view name);
std::string_view kv_cache_dtype_name(DType dtype);

}  // namespace flashq
