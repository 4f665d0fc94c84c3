#include "tools/flashq_bench/kernel_bench.h"

#include <chrono>
#include <iostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/matmul.h"
#include "kernels/tensor.h"

namespace flashq {
namespace {

struct KernelBenchOptions {
  std::vector<int64_t> rows = {1, 2, 4, 8, 16, 32, 259};
  int64_t n = 3072;
  int64_t k = 1024;
  double min_seconds = 0.5;
};

// Runs `body` until min_seconds have passed; returns seconds per call.
template <typename F>
double time_per_call(double min_seconds, F&& body) {
  using Clock = std::chrono::steady_clock;
  body();  // warm caches and thread pools
  int64_t calls = 0;
  auto start = Clock::now();
  double elapsed = 0;
  do {
    body();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / static_cast<double>(calls);
}

// The floor for weight-streaming kernels: how fast this machine reads memory it did not just
// write (a 1 GiB buffer, far beyond the caches), with the same threads the kernels use.
void report_read_bandwidth(double min_seconds) {
  const int64_t count = int64_t{1} << 28;  // 4-byte words: 1 GiB
  std::vector<uint32_t> buffer(static_cast<size_t>(count), 1u);
  uint32_t sink = 0;
  const double seconds = time_per_call(min_seconds, [&] {
    uint32_t total = 0;  // integer sums vectorise (float sums would be latency-bound)
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int64_t i = 0; i < count; ++i) total += buffer[static_cast<size_t>(i)];
    sink += total;
  });
  nlohmann::json row = {{"kernel", "read_bandwidth"}, {"bytes", count * 4}, {"gb_per_s", count * 4.0 / seconds / 1e9},
                        {"checksum", sink}};
  std::cout << row.dump() << std::endl;
}

void run_kernel_bench(const KernelBenchOptions& o) {
  report_read_bandwidth(o.min_seconds);
  Tensor w = Tensor::zeros_cpu(DType::kBF16, {o.n, o.k});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<uint16_t>()[i] = f32_to_bf16(static_cast<float>((i * 7919) % 1000) * 1e-3f);
  for (int64_t m : o.rows) {
    std::vector<float> x(static_cast<size_t>(m * o.k), 0.01f), y(static_cast<size_t>(m * o.n));
    const double seconds = time_per_call(o.min_seconds, [&] {
      cpu::matmul(x.data(), w.raw(), DType::kBF16, y.data(), m, o.n, o.k);
    });
    const double weight_bytes = static_cast<double>(w.nbytes());
    nlohmann::json row = {
        {"kernel", "matmul_bf16"},
        {"m", m},
        {"n", o.n},
        {"k", o.k},
        {"us_per_call", seconds * 1e6},
        {"weight_gb_per_s", weight_bytes / seconds / 1e9},
        {"gflop_per_s", 2.0 * static_cast<double>(m * o.n * o.k) / seconds / 1e9},
    };
    std::cout << row.dump() << std::endl;
  }
}

}  // namespace

std::function<void()> add_kernel_bench(CLI::App& app) {
  auto o = std::make_shared<KernelBenchOptions>();
  CLI::App* cmd = app.add_subcommand("kernels", "microbenchmarks of the CPU kernels");
  cmd->add_option("--rows", o->rows, "M values (rows of x)")->capture_default_str();
  cmd->add_option("--n", o->n, "output features")->capture_default_str();
  cmd->add_option("--k", o->k, "input features")->capture_default_str();
  cmd->add_option("--min-seconds", o->min_seconds, "time per case")->capture_default_str();
  return [cmd, o] {
    if (*cmd) run_kernel_bench(*o);
  };
}

}  // namespace flashq
