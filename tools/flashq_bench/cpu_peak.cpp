#include "tools/flashq_bench/cpu_peak.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "kernels/cpu/matmul_path.h"

namespace flashq {
namespace {

using Clock = std::chrono::steady_clock;

// Twelve independent accumulators (more than latency x issue width needs), one instruction each
// per iteration; the operands are registers, so nothing but the arithmetic units bounds it.
#define FLASHQ_TWELVE(OP, R)                                                                        \
  OP " %%" R "12, %%" R "13, %%" R "0\n\t" OP " %%" R "12, %%" R "13, %%" R "1\n\t" OP " %%" R     \
     "12, %%" R "13, %%" R "2\n\t" OP " %%" R "12, %%" R "13, %%" R "3\n\t" OP " %%" R "12, %%" R \
     "13, %%" R "4\n\t" OP " %%" R "12, %%" R "13, %%" R "5\n\t" OP " %%" R "12, %%" R "13, %%" R \
     "6\n\t" OP " %%" R "12, %%" R "13, %%" R "7\n\t" OP " %%" R "12, %%" R "13, %%" R "8\n\t" OP \
     " %%" R "12, %%" R "13, %%" R "9\n\t" OP " %%" R "12, %%" R "13, %%" R "10\n\t" OP " %%" R   \
     "12, %%" R "13, %%" R "11\n\t"
#define FLASHQ_CLOBBERS \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13"

// Zero operands and accumulators (no denormals, which some cores handle slowly).
#define FLASHQ_ZERO(OP, R)                                                                                  \
  asm volatile(OP " %%" R "0, %%" R "0, %%" R "0\n\t" OP " %%" R "1, %%" R "1, %%" R "1\n\t" OP " %%" R "2, %%" R \
               "2, %%" R "2\n\t" OP " %%" R "3, %%" R "3, %%" R "3\n\t" OP " %%" R "4, %%" R "4, %%" R "4\n\t" OP \
               " %%" R "5, %%" R "5, %%" R "5\n\t" OP " %%" R "6, %%" R "6, %%" R "6\n\t" OP " %%" R "7, %%" R \
               "7, %%" R "7\n\t" OP " %%" R "8, %%" R "8, %%" R "8\n\t" OP " %%" R "9, %%" R "9, %%" R "9\n\t" OP \
               " %%" R "10, %%" R "10, %%" R "10\n\t" OP " %%" R "11, %%" R "11, %%" R "11\n\t" OP " %%" R "12, %%" R \
               "12, %%" R "12\n\t" OP " %%" R "13, %%" R "13, %%" R "13" ::: FLASHQ_CLOBBERS)

void fma_ymm(int64_t n) {
  FLASHQ_ZERO("vxorps", "ymm");
  for (int64_t i = 0; i < n; ++i) asm volatile(FLASHQ_TWELVE("vfmadd231ps", "ymm") ::: FLASHQ_CLOBBERS);
}
__attribute__((target("avx512f"))) void fma_zmm(int64_t n) {
  FLASHQ_ZERO("vpxord", "zmm");
  for (int64_t i = 0; i < n; ++i) asm volatile(FLASHQ_TWELVE("vfmadd231ps", "zmm") ::: FLASHQ_CLOBBERS);
}
__attribute__((target("avx512f,avx512bf16"))) void dpbf16_zmm(int64_t n) {
  FLASHQ_ZERO("vpxord", "zmm");
  for (int64_t i = 0; i < n; ++i) asm volatile(FLASHQ_TWELVE("vdpbf16ps", "zmm") ::: FLASHQ_CLOBBERS);
}

// Best of many short trials: a neighbour that takes the core only ever makes a trial slower, so
// the fastest is the core's own speed.
template <typename F>
double fastest_seconds(F&& trial) {
  double best = 1e30;
  for (int t = 0; t < 200; ++t) {
    const auto start = Clock::now();
    trial();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// Eight dependent adds per iteration: one cycle each on every x86 core.
double measure_ghz() {
  const int64_t n = 250'000;
  const double seconds = fastest_seconds([&] {
    uint64_t value = 0;
    for (int64_t i = 0; i < n; ++i) {
      asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                   : "+r"(value));
    }
  });
  return 8.0 * static_cast<double>(n) / seconds / 1e9;
}

// Instructions per cycle of `body` (12 per iteration).
double per_cycle(void (*body)(int64_t), double ghz) {
  const int64_t n = 100'000;
  const double seconds = fastest_seconds([&] { body(n); });
  return 12.0 * static_cast<double>(n) / seconds / (ghz * 1e9);
}

}  // namespace

nlohmann::json measure_cpu_peak(int cores) {
  const double ghz = measure_ghz();
  nlohmann::json out = {{"kernel", "cpu_peak"}, {"ghz", ghz}, {"cores", cores}};
  auto add = [&](const std::string& name, void (*body)(int64_t), int products) {
    const double instructions = per_cycle(body, ghz);
    const double macs = instructions * products;
    out[name] = {{"per_cycle", instructions},
                 {"multiply_adds_per_cycle", macs},
                 {"peak_gflop_per_s", 2.0 * macs * ghz * cores}};
  };
  add("fma_8_lanes", fma_ymm, 8);
  if (cpu::matmul_path_unsupported(cpu::MatmulPath::kAvx512).empty()) add("fma_16_lanes", fma_zmm, 16);
  if (cpu::matmul_path_unsupported(cpu::MatmulPath::kAvx512Bf16).empty()) add("vdpbf16ps", dpbf16_zmm, 32);
  return out;
}

}  // namespace flashq
