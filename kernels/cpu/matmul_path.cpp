#include "kernels/cpu/matmul_path.h"

#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "shared/error.h"

namespace flashq::cpu {
namespace {

struct CpuFeatures {
  bool avx512 = false;  // F, BW, VL and DQ, with the OS saving the zmm and mask registers
  bool avx512_bf16 = false;
};

// CPUID leaf 7 names the instructions; XGETBV says whether the OS saves the registers they use
// (XCR0 bits 1-2: SSE and AVX state, 5-7: mask, upper zmm0-15, zmm16-31).
CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) return f;
  uint32_t xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xe6u) != 0xe6u) return f;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return f;
  f.avx512 = (ebx & bit_AVX512F) != 0 && (ebx & bit_AVX512BW) != 0 && (ebx & bit_AVX512VL) != 0 &&
             (ebx & bit_AVX512DQ) != 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return f;
  f.avx512_bf16 = f.avx512 && (eax & (1u << 5)) != 0;  // leaf 7.1 EAX bit 5: AVX512_BF16
  return f;
}

const CpuFeatures& features() {
  static const CpuFeatures f = detect();
  return f;
}

void require_supported(MatmulPath path) {
  const std::string why = matmul_path_unsupported(path);
  if (!why.empty()) {
    throw Error(ErrorCode::kUnsupported, "CPU matmul path " + std::string(matmul_path_name(path)) + ": " + why);
  }
}

MatmulPath chosen_at_start() {
  if (const char* forced = std::getenv("FLASHQ_CPU_MATMUL"); forced != nullptr && *forced != '\0') {
    const MatmulPath path = parse_matmul_path(forced);
    require_supported(path);
    return path;
  }
  // Not avx512bf16 even where AVX512_BF16 is present: with float32-accurate activations it
  // needs two vdpbf16ps per pair of products and measured no faster than float32 FMAs.
  if (features().avx512) return MatmulPath::kAvx512;
  return MatmulPath::kAvx2;
}

// -1: not chosen yet. Read on every matmul call, so one relaxed atomic load.
std::atomic<int> chosen{-1};

}  // namespace

std::string_view matmul_path_name(MatmulPath path) {
  switch (path) {
    case MatmulPath::kAvx2: return "avx2";
    case MatmulPath::kAvx512: return "avx512";
    case MatmulPath::kAvx512Bf16: return "avx512bf16";
    case MatmulPath::kAvx512Bf16Round: return "avx512bf16-round";
  }
  return "?";
}

const std::vector<MatmulPath>& all_matmul_paths() {
  static const std::vector<MatmulPath> paths = {MatmulPath::kAvx2, MatmulPath::kAvx512, MatmulPath::kAvx512Bf16,
                                                MatmulPath::kAvx512Bf16Round};
  return paths;
}

std::string matmul_path_unsupported(MatmulPath path) {
  switch (path) {
    case MatmulPath::kAvx2: return "";
    case MatmulPath::kAvx512: return features().avx512 ? "" : "this CPU has no AVX-512 (F, BW, VL, DQ)";
    case MatmulPath::kAvx512Bf16:
    case MatmulPath::kAvx512Bf16Round: return features().avx512_bf16 ? "" : "this CPU has no AVX512_BF16";
  }
  return "unknown path";
}

MatmulPath parse_matmul_path(std::string_view name) {
  for (MatmulPath path : all_matmul_paths()) {
    if (matmul_path_name(path) == name) return path;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "FLASHQ_CPU_MATMUL: unknown path '" + std::string(name) +
                  "' (avx2, avx512, avx512bf16, avx512bf16-round)");
}

MatmulPath matmul_path() {
  int value = chosen.load(std::memory_order_relaxed);
  if (value < 0) {
    static const MatmulPath at_start = chosen_at_start();  // thread-safe, once
    int expected = -1;
    chosen.compare_exchange_strong(expected, static_cast<int>(at_start));
    value = chosen.load(std::memory_order_relaxed);
  }
  return static_cast<MatmulPath>(value);
}

void set_matmul_path(MatmulPath path) {
  require_supported(path);
  chosen.store(static_cast<int>(path), std::memory_order_relaxed);
}

}  // namespace flashq::cpu
