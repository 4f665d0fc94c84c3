// The element types a KV cache may hold (kernels/backend.h): float32, or bf16 at half the bytes.
// The kernels that read or write a cache are templated on that type (`Kv`: float or
// __nv_bfloat16) and touch its elements only through these overloads, so the float32
// instantiation is the plain loads and stores it always was. A bf16 element is rounded once
// when stored (to nearest even, NaN stays NaN: as f32_to_bf16 in kernels/dtype.h) and widened
// exactly when read; everything computed from it stays float32.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "kernels/dtype.h"
#include "shared/error.h"

namespace flashq::cuda {

// Whether a cache of `dtype` takes a kernel's bf16 instantiation (else its float one). The backend
// refuses other dtypes before launching, so one here is a bug in the caller (`op`).
inline bool bf16_cache(DType dtype, const char* op) {
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    throw Error(ErrorCode::kInternal,
                std::string(op) + ": a cache of f32 or bf16 only, not " + std::string(dtype_name(dtype)));
  }
  return dtype == DType::kBF16;
}

__device__ inline float read_kv(const float* p, int64_t i) { return p[i]; }
__device__ inline float read_kv(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

__device__ inline void write_kv(float* p, int64_t i, float value) { p[i] = value; }
__device__ inline void write_kv(__nv_bfloat16* p, int64_t i, float value) { p[i] = __float2bfloat16_rn(value); }

// Elements 4c .. 4c + 3 of a row as a float4: the row 16-byte aligned (the tile kernels'
// condition). bf16 takes one 8-byte load; a bf16 is the high half of the float32 it widens to,
// so each is its 16 bits shifted up (what __bfloat162float does). Whether wider bf16 loads (8
// elements a load) pay is left to measurement.
__device__ inline float4 read_kv4(const float* row, int c) { return reinterpret_cast<const float4*>(row)[c]; }
__device__ inline float4 read_kv4(const __nv_bfloat16* row, int c) {
  const uint2 pairs = reinterpret_cast<const uint2*>(row)[c];  // little-endian: element 4c in the low half
  return make_float4(__uint_as_float(pairs.x << 16), __uint_as_float(pairs.x & 0xffff0000u),
                     __uint_as_float(pairs.y << 16), __uint_as_float(pairs.y & 0xffff0000u));
}

}  // namespace flashq::cuda
