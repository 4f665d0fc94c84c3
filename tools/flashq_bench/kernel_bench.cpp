#include "tools/flashq_bench/kernel_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/backend_factory.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_path.h"
#include "kernels/tensor.h"
#include "tools/flashq_bench/cpu_peak.h"
#include "tools/flashq_bench/deltanet_bench.h"
#include "tools/flashq_bench/dflash2_bench.h"
#include "tools/flashq_bench/moe_bench.h"
#include "tools/flashq_bench/paged_attention_bench.h"
#include "tools/flashq_bench/recurrent_state_bench.h"
#include "worker/model/kv_cache_dtype.h"

namespace flashq {
namespace {

struct KernelBenchOptions {
  std::vector<int64_t> rows = {1, 2, 4, 8, 16, 32, 259};
  int64_t n = 3072;
  int64_t k = 1024;
  double min_seconds = 0.5;
  std::string device = "all";  // cpu, cuda or all
  // Up to 128 rows the tensor-core kernel for few rows (matmul_bf16_rows.h), from 129 cuBLAS.
  std::vector<int64_t> cuda_rows = {1, 2, 4, 8, 16, 32, 64, 128, 129, 512};
  int64_t cuda_n = 4096;
  int64_t cuda_k = 4096;
  std::vector<int64_t> cuda_keys = {512, 4096};
  std::vector<int64_t> cpu_keys = {259, 2048};
  // CPU matmul paths to time (kernels/cpu/matmul_path.h): "chosen" (the one this CPU takes),
  // "all", or names; each M runs every path in turn, so their ratios are side by side.
  std::vector<std::string> cpu_matmul_paths = {"chosen"};
  bool cpu_matmul_only = false;
  bool moe_only = false;       // CPU: the read bandwidth and the mixture-of-experts lines only
  bool deltanet_only = false;  // CPU: the read bandwidth and the Gated DeltaNet lines only
  bool dflash2_only = false;   // CPU: DFlash2's drafter ops only
  // Paged attention against contiguous (paged_attention_bench.h): keys per sequence, rounds.
  std::vector<int64_t> paged_keys = {2000, 8000};
  int paged_rounds = 3;
  std::string kv_cache_dtype = "bf16";
  bool paged_only = false;  // the paged-attention lines only (CPU and CUDA)
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
// write (a 1 GiB buffer, far beyond the caches), with the same threads the kernels use. Returns
// it in GB/s.
double report_read_bandwidth(double min_seconds) {
  const int64_t count = int64_t{1} << 28;  // 4-byte words: 1 GiB
  std::vector<uint32_t> buffer(static_cast<size_t>(count), 1u);
  uint32_t sink = 0;
  const double seconds = time_per_call(min_seconds, [&] {
    uint32_t total = 0;  // integer sums vectorise (float sums would be latency-bound)
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int64_t i = 0; i < count; ++i) total += buffer[static_cast<size_t>(i)];
    sink += total;
  });
  nlohmann::json row = {{"kernel", "read_bandwidth"},
                        {"bytes", count * 4},
                        {"gb_per_s", count * 4.0 / seconds / 1e9},
                        {"checksum", sink}};
  std::cout << row.dump() << std::endl;
  return count * 4.0 / seconds / 1e9;
}

// Sampling one token per row of a Qwen3 vocabulary (151,936), for 1 and 16 rows: temperature
// only, and with top-k 50 and top-p 0.9 (each bisects for its threshold). The floor is one read
// of the logits per pass over them.
template <typename Timer>
void report_sampling(Backend& backend, const std::string& name, Timer&& time) {
  constexpr int64_t kVocab = 151936;
  for (int64_t rows : {int64_t{1}, int64_t{16}}) {
    std::vector<float> logits(static_cast<size_t>(rows * kVocab));
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7919) % 10007) * 1e-3f;
    Tensor logits_on = backend.allocate(DType::kF32, {rows, kVocab});
    backend.copy_from_host(logits.data(), logits_on);
    for (const auto& [top_k, top_p] : {std::pair{0.0f, 1.0f}, std::pair{50.0f, 0.9f}}) {
      std::vector<float> params;
      for (int64_t m = 0; m < rows; ++m) params.insert(params.end(), {0.8f, top_k, top_p, 0.37f});
      Tensor params_on = backend.allocate(DType::kF32, {rows, 4});
      backend.copy_from_host(params.data(), params_on);
      Tensor ids = backend.allocate(DType::kI32, {rows});
      const double seconds = time(backend, [&] { backend.sample(logits_on, params_on, ids); });
      std::cout << nlohmann::json{{"kernel", name},
                                  {"rows", rows},
                                  {"vocab", kVocab},
                                  {"temperature", 0.8},
                                  {"top_k", top_k},
                                  {"top_p", top_p},
                                  {"us_per_call", seconds * 1e6},
                                  {"logits_gb_per_s", static_cast<double>(logits_on.nbytes()) / seconds / 1e9}}
                       .dump()
                << std::endl;
    }
    // Temperature 0: argmax, also with the logits 4 bytes off 16-byte alignment (on the GPU that
    // takes the kernel's 4-byte scan; the CPU's is the same either way).
    Tensor ids = backend.allocate(DType::kI32, {rows});
    Tensor shifted = backend.allocate(DType::kF32, {rows * kVocab + 1});
    Tensor logits_shifted = shifted.slice_rows(1, rows * kVocab).reshape({rows, kVocab});
    const double seconds = time(backend, [&] { backend.argmax(logits_on, ids); });
    const double unaligned = time(backend, [&] { backend.argmax(logits_shifted, ids); });
    std::cout << nlohmann::json{{"kernel", name},
                                {"rows", rows},
                                {"vocab", kVocab},
                                {"temperature", 0},
                                {"us_per_call", seconds * 1e6},
                                {"us_unaligned", unaligned * 1e6},
                                {"logits_gb_per_s", static_cast<double>(logits_on.nbytes()) / seconds / 1e9}}
                     .dump()
              << std::endl;
  }
}

// Attention at Qwen3-0.6B's shape (16 query heads over 8 KV heads of 128) over a cache of
// `keys`: one decode row seeing them all, and the causal prefill of all of them (quadratic: at
// 2048 tokens its multiply-adds are a fifth of the model's).
void report_cpu_attention(const std::vector<int64_t>& keys_list, double min_seconds) {
  const cpu::AttentionShape base{.rows = 1, .q_heads = 16, .kv_heads = 8, .head_dim = 128};
  // Tensors as the worker's caches are (64-byte aligned): a key row's 512 bytes in 8 cache lines,
  // not 9 (std::vector's 16-byte alignment costs about a tenth).
  auto filled = [](int64_t rows, int64_t width, float value) {
    Tensor t = Tensor::zeros_cpu(DType::kF32, {rows, width});
    std::fill_n(t.data<float>(), t.numel(), value);
    return t;
  };
  for (int64_t keys : keys_list) {
    const Tensor k = filled(keys, base.kv_heads * base.head_dim, 0.01f),
                 v = filled(keys, base.kv_heads * base.head_dim, 0.01f);
    for (int64_t rows : {int64_t{1}, keys}) {
      const cpu::AttentionShape shape{rows, base.q_heads, base.kv_heads, base.head_dim};
      const Tensor q = filled(rows, shape.q_heads * shape.head_dim, 0.02f);
      Tensor out = filled(rows, shape.q_heads * shape.head_dim, 0.0f);
      std::vector<int32_t> counts(static_cast<size_t>(rows));
      int64_t scored = 0;  // (query row, key) pairs, per head
      for (int64_t m = 0; m < rows; ++m) {
        counts[static_cast<size_t>(m)] = static_cast<int32_t>(rows == 1 ? keys : m + 1);
        scored += counts[static_cast<size_t>(m)];
      }
      const double seconds = time_per_call(min_seconds, [&] {
        cpu::attention(q.data<float>(), k.data<float>(), v.data<float>(), counts.data(), out.data<float>(), shape);
      });
      // q.k and p.v: 2 multiply-adds per element of a head, per pair.
      const double flops = 4.0 * static_cast<double>(scored * shape.q_heads * shape.head_dim);
      std::cout << nlohmann::json{{"kernel", "attention"},
                                  {"rows", rows},
                                  {"keys", keys},
                                  {"q_heads", shape.q_heads},
                                  {"kv_heads", shape.kv_heads},
                                  {"head_dim", shape.head_dim},
                                  {"us_per_call", seconds * 1e6},
                                  {"gflop_per_s", flops / seconds / 1e9}}
                       .dump()
                << std::endl;
    }
  }
}

// Attention at gpt-oss's shape (64 query heads over 8 KV heads of 64) at a context of `context`
// positions: a sliding layer (window 128 over a ring of 144 rows, sinks) and a full layer (sinks,
// every key), each for one decode row and a verification block of 16 rows. GB/s counts the keys
// and values a call reads once.
void report_cpu_gpt_oss_attention(int64_t context, double min_seconds) {
  const int64_t q_heads = 64, kv_heads = 8, head_dim = 64, window = 128, ring = window + 16;
  std::vector<float> sinks(static_cast<size_t>(q_heads));
  for (int64_t h = 0; h < q_heads; ++h) sinks[static_cast<size_t>(h)] = 0.1f * static_cast<float>(h % 7);
  for (const int64_t layer_window : {window, int64_t{0}}) {
    const int64_t keys = layer_window > 0 ? ring : context;
    const std::vector<float> k(static_cast<size_t>(keys * kv_heads * head_dim), 0.01f), v = k;
    for (const int64_t rows : {int64_t{1}, int64_t{16}}) {
      const cpu::AttentionShape shape{rows, q_heads, kv_heads, head_dim};
      std::vector<float> q(static_cast<size_t>(rows * q_heads * head_dim), 0.02f), out(q.size());
      std::vector<int32_t> counts(static_cast<size_t>(rows));
      for (int64_t m = 0; m < rows; ++m) counts[static_cast<size_t>(m)] = static_cast<int32_t>(context - rows + 1 + m);
      const int64_t attended = layer_window > 0 ? std::min(layer_window, context) : context;  // keys the last row reads
      const cpu::AttentionExtras extras{sinks.data(), layer_window, keys};
      const double seconds = time_per_call(
          min_seconds, [&] { cpu::attention(q.data(), k.data(), v.data(), counts.data(), out.data(), shape, extras); });
      const double bytes = 2.0 * static_cast<double>(attended * kv_heads * head_dim) * sizeof(float);
      std::cout << nlohmann::json{{"kernel", "attention_gpt_oss"},
                                  {"layer", layer_window > 0 ? "sliding" : "full"},
                                  {"window", layer_window},
                                  {"sinks", true},
                                  {"rows", rows},
                                  {"context", context},
                                  {"q_heads", q_heads},
                                  {"kv_heads", kv_heads},
                                  {"head_dim", head_dim},
                                  {"us_per_call", seconds * 1e6},
                                  {"kv_gb_per_s", bytes / seconds / 1e9}}
                       .dump()
                << std::endl;
    }
  }
}

// The paths the options name, in their order; a path this CPU cannot run prints why and is left
// out.
std::vector<cpu::MatmulPath> cpu_matmul_paths(const KernelBenchOptions& o) {
  std::vector<cpu::MatmulPath> paths;
  for (const std::string& name : o.cpu_matmul_paths) {
    if (name == "chosen") {
      paths.push_back(cpu::matmul_path());
      continue;
    }
    for (cpu::MatmulPath path :
         name == "all" ? cpu::all_matmul_paths() : std::vector<cpu::MatmulPath>{cpu::parse_matmul_path(name)}) {
      const std::string why = cpu::matmul_path_unsupported(path);
      if (why.empty()) {
        paths.push_back(path);
      } else {
        std::cout
            << nlohmann::json{{"kernel", "matmul_bf16"}, {"path", cpu::matmul_path_name(path)}, {"skipped", why}}.dump()
            << std::endl;
      }
    }
  }
  return paths;
}

void report_cpu_matmul(const KernelBenchOptions& o) {
  const cpu::MatmulPath chosen = cpu::matmul_path();
  const std::vector<cpu::MatmulPath> paths = cpu_matmul_paths(o);
  Tensor w = Tensor::zeros_cpu(DType::kBF16, {o.n, o.k});
  for (int64_t i = 0; i < w.numel(); ++i)
    w.data<uint16_t>()[i] = f32_to_bf16(static_cast<float>((i * 7919) % 1000) * 1e-3f);
  for (int64_t m : o.rows) {
    std::vector<float> x(static_cast<size_t>(m * o.k), 0.01f), y(static_cast<size_t>(m * o.n));
    for (cpu::MatmulPath path : paths) {
      cpu::set_matmul_path(path);
      // Also the fastest call: on a shared machine a neighbour only ever slows a call down, so
      // it is the kernel's own speed when the mean is not.
      double fastest = 1e30;
      const double seconds = time_per_call(o.min_seconds, [&] {
        const auto start = std::chrono::steady_clock::now();
        cpu::matmul(x.data(), w.raw(), DType::kBF16, y.data(), m, o.n, o.k);
        fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      });
      const double weight_bytes = static_cast<double>(w.nbytes());
      const double flop = 2.0 * static_cast<double>(m * o.n * o.k);
      nlohmann::json row = {
          {"kernel", "matmul_bf16"},
          {"path", cpu::matmul_path_name(path)},
          {"chosen", path == chosen},
          {"m", m},
          {"n", o.n},
          {"k", o.k},
          {"us_per_call", seconds * 1e6},
          {"weight_gb_per_s", weight_bytes / seconds / 1e9},
          {"gflop_per_s", flop / seconds / 1e9},
          {"gflop_per_s_fastest_call", flop / fastest / 1e9},
      };
      std::cout << row.dump() << std::endl;
    }
  }
  cpu::set_matmul_path(chosen);
}

void run_cpu_kernel_bench(const KernelBenchOptions& o) {
  const TimePerCall time_cpu = [&](const std::function<void()>& body) { return time_per_call(o.min_seconds, body); };
  if (o.paged_only) {
    std::cout << nlohmann::json{{"kernel", "cpu_threads"}, {"threads", omp_get_max_threads()}}.dump() << std::endl;
    return report_paged_attention(*make_cpu_backend(), "paged_attention", time_cpu, o.paged_keys, o.paged_rounds,
                                  parse_kv_cache_dtype(o.kv_cache_dtype));
  }
  std::cout << nlohmann::json{{"kernel", "cpu_matmul_path"}, {"path", cpu::matmul_path_name(cpu::matmul_path())}}.dump()
            << std::endl;
  std::cout << measure_cpu_peak(omp_get_max_threads()).dump() << std::endl;
  const double read_gb_per_s =
      o.cpu_matmul_only && !o.moe_only && !o.deltanet_only ? 0.0 : report_read_bandwidth(o.min_seconds);
  if (o.moe_only) return report_moe(*make_cpu_backend(), time_cpu, read_gb_per_s);
  if (o.deltanet_only) {
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    report_gated_delta_rule(*backend, "gated_delta_rule", time_cpu, read_gb_per_s);
    return report_speculation_state(*backend, time_cpu);
  }
  if (o.dflash2_only) return report_dflash2_ops(*make_cpu_backend(), "", time_cpu);
  report_cpu_matmul(o);
  if (o.cpu_matmul_only) return;
  report_cpu_attention(o.cpu_keys, o.min_seconds);
  report_cpu_gpt_oss_attention(4096, o.min_seconds);
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  report_paged_attention(*cpu, "paged_attention", time_cpu, o.paged_keys, o.paged_rounds,
                         parse_kv_cache_dtype(o.kv_cache_dtype));
  report_sampling(*cpu, "sample", [&](Backend&, auto&& body) { return time_per_call(o.min_seconds, body); });
  report_moe(*cpu, time_cpu, read_gb_per_s);
  report_gated_delta_rule(*cpu, "gated_delta_rule", time_cpu, read_gb_per_s);
  report_dflash2_ops(*cpu, "", time_cpu);
}

// GPU timing through the Backend interface: launches are queued in batches and the clock stops
// after copy_to_host has synchronised the stream, so launch overhead counts, as it does in
// serving. Returns seconds per call.
template <typename F>
double time_per_gpu_call(Backend& gpu, double min_seconds, F&& body) {
  using Clock = std::chrono::steady_clock;
  Tensor fence = gpu.allocate(DType::kF32, {1});
  float sink = 0;
  body();  // first launch: module loading, cuBLAS heuristics
  gpu.copy_to_host(fence, &sink);
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    for (int i = 0; i < 20; ++i, ++calls) body();
    gpu.copy_to_host(fence, &sink);
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / static_cast<double>(calls);
}

// The floor for weight-streaming kernels on the GPU: a device-to-device copy of 1 GiB (read and
// written, so 2 GiB of traffic per copy).
double report_cuda_copy_bandwidth(Backend& gpu, double min_seconds) {
  const int64_t count = int64_t{1} << 28;
  Tensor from = gpu.allocate(DType::kF32, {count}), to = gpu.allocate(DType::kF32, {count});
  const double seconds = time_per_gpu_call(gpu, min_seconds, [&] { gpu.copy_rows(from, to, 0); });
  const double gb_per_s = 2.0 * static_cast<double>(from.nbytes()) / seconds / 1e9;
  std::cout
      << nlohmann::json{{"kernel", "cuda_copy_bandwidth"}, {"bytes", from.nbytes()}, {"gb_per_s", gb_per_s}}.dump()
      << std::endl;
  return gb_per_s;
}

// Qwen3-8B's fused products against the ops they replace, at decode (1 row) and a verify block
// (16): q, k and v of one x in one launch (k and v alone fill only half of an H100's SMs), and
// gate, up and SwiGLU in one.
void report_cuda_fused_products(Backend& gpu, double copy_gb_per_s, double min_seconds) {
  const int64_t hidden = 4096, kv_width = 1024, inter = 12288;
  auto weight = [&](int64_t n, int64_t k) { return gpu.upload_weight(Tensor::zeros_cpu(DType::kBF16, {n, k})); };
  const Tensor q_proj = weight(hidden, hidden), k_proj = weight(kv_width, hidden), v_proj = weight(kv_width, hidden);
  const Tensor gate_proj = weight(inter, hidden), up_proj = weight(inter, hidden);
  auto report = [&](const char* kernel, int64_t rows, size_t weight_bytes, double fused, double apart) {
    const double gb_per_s = static_cast<double>(weight_bytes) / fused / 1e9;
    std::cout << nlohmann::json{{"kernel", kernel},
                                {"rows", rows},
                                {"us_fused", fused * 1e6},
                                {"us_apart", apart * 1e6},
                                {"weight_gb_per_s", gb_per_s},
                                {"fraction_of_copy_bandwidth", gb_per_s / copy_gb_per_s}}
                     .dump()
              << std::endl;
  };
  for (int64_t rows : {int64_t{1}, int64_t{16}}) {
    Tensor x = gpu.allocate(DType::kF32, {rows, hidden});
    Tensor q = gpu.allocate(DType::kF32, {rows, hidden});
    Tensor k = gpu.allocate(DType::kF32, {rows, kv_width}), v = gpu.allocate(DType::kF32, {rows, kv_width});
    const WeightProduct qkv[] = {{&q_proj, &q}, {&k_proj, &k}, {&v_proj, &v}};
    const double qkv_fused = time_per_gpu_call(gpu, min_seconds, [&] { gpu.matmul_many(x, qkv); });
    const double qkv_apart = time_per_gpu_call(gpu, min_seconds, [&] {
      gpu.matmul(x, q_proj, q);
      gpu.matmul(x, k_proj, k);
      gpu.matmul(x, v_proj, v);
    });
    report("cuda_matmul_qkv", rows, q_proj.nbytes() + k_proj.nbytes() + v_proj.nbytes(), qkv_fused, qkv_apart);

    Tensor gate = gpu.allocate(DType::kF32, {rows, inter}), up = gpu.allocate(DType::kF32, {rows, inter});
    const double mlp_fused =
        time_per_gpu_call(gpu, min_seconds, [&] { gpu.matmul_swiglu(x, gate_proj, up_proj, gate, up); });
    const double mlp_apart = time_per_gpu_call(gpu, min_seconds, [&] {
      gpu.matmul(x, gate_proj, gate);
      gpu.matmul(x, up_proj, up);
      gpu.swiglu(gate, up, gate);
    });
    report("cuda_matmul_swiglu", rows, gate_proj.nbytes() + up_proj.nbytes(), mlp_fused, mlp_apart);
  }
}

// The residual add + RMSNorm of Qwen3-8B's hidden size (two a layer) at decode and a verify
// block: the float4 kernel against the same call with h 4 bytes off 16-byte alignment, which
// sends it to the kernel that loops over the row (kernels/cuda/rmsnorm.cu).
void report_cuda_add_rmsnorm(Backend& gpu, double min_seconds) {
  const int64_t hidden = 4096;
  const Tensor norm = gpu.upload_weight(Tensor::zeros_cpu(DType::kBF16, {hidden}));
  for (int64_t rows : {int64_t{1}, int64_t{16}}) {
    Tensor h = gpu.allocate(DType::kF32, {rows, hidden}), delta = gpu.allocate(DType::kF32, {rows, hidden});
    Tensor y = gpu.allocate(DType::kF32, {rows, hidden});
    Tensor spaced = gpu.allocate(DType::kF32, {rows * hidden + 1});
    Tensor h_shifted = spaced.slice_rows(1, rows * hidden).reshape({rows, hidden});
    const double seconds = time_per_gpu_call(gpu, min_seconds, [&] { gpu.add_rmsnorm(h, delta, norm, 1e-6f, y); });
    const double unaligned =
        time_per_gpu_call(gpu, min_seconds, [&] { gpu.add_rmsnorm(h_shifted, delta, norm, 1e-6f, y); });
    // h and delta read, h and y written.
    const double bytes = 4.0 * static_cast<double>(h.nbytes());
    std::cout << nlohmann::json{{"kernel", "cuda_add_rmsnorm"},
                                {"rows", rows},
                                {"dim", hidden},
                                {"us_per_call", seconds * 1e6},
                                {"us_unaligned", unaligned * 1e6},
                                {"gb_per_s", bytes / seconds / 1e9}}
                     .dump()
              << std::endl;
  }
}

// The bf16 matmul of --cuda-n x --cuda-k weights at each of --cuda-rows rows: weight bytes read
// against the copy bandwidth.
void report_cuda_matmul(Backend& gpu, const KernelBenchOptions& o, double copy_gb_per_s) {
  const double min_seconds = o.min_seconds;
  Tensor w_host = Tensor::zeros_cpu(DType::kBF16, {o.cuda_n, o.cuda_k});
  for (int64_t i = 0; i < w_host.numel(); ++i) {
    w_host.data<uint16_t>()[i] = f32_to_bf16(static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f);
  }
  Tensor w = gpu.upload_weight(w_host);
  for (int64_t m : o.cuda_rows) {
    Tensor x = gpu.allocate(DType::kF32, {m, o.cuda_k}), y = gpu.allocate(DType::kF32, {m, o.cuda_n});
    const double seconds = time_per_gpu_call(gpu, min_seconds, [&] { gpu.matmul(x, w, y); });
    const double weight_gb_per_s = static_cast<double>(w.nbytes()) / seconds / 1e9;
    std::cout << nlohmann::json{{"kernel", "cuda_matmul_bf16"},
                                {"m", m},
                                {"n", o.cuda_n},
                                {"k", o.cuda_k},
                                {"us_per_call", seconds * 1e6},
                                {"weight_gb_per_s", weight_gb_per_s},
                                {"fraction_of_copy_bandwidth", weight_gb_per_s / copy_gb_per_s},
                                {"gflop_per_s", 2.0 * static_cast<double>(m * o.cuda_n * o.cuda_k) / seconds / 1e9}}
                     .dump()
              << std::endl;
  }
}

// Qwen3-8B q heads (32 of 128): the fused norm + RoPE against the two kernels it replaces.
void report_cuda_head_norm_rope(Backend& gpu, double min_seconds) {
  for (int64_t rows : {int64_t{1}, int64_t{16}}) {
    Tensor x = gpu.allocate(DType::kF32, {rows, 32, 128});
    Tensor norm = gpu.upload_weight(Tensor::zeros_cpu(DType::kBF16, {128}));
    Tensor positions = gpu.allocate(DType::kI32, {rows});
    Tensor heads = x.reshape({rows * 32, 128});
    const double fused =
        time_per_gpu_call(gpu, min_seconds, [&] { gpu.head_norm_rope(x, norm, 1e-6f, positions, 1e6f); });
    const double apart = time_per_gpu_call(gpu, min_seconds, [&] {
      gpu.rmsnorm(heads, norm, 1e-6f, heads);
      gpu.rope(x, positions, 1e6f);
    });
    std::cout
        << nlohmann::json{{"kernel", "cuda_head_norm_rope"}, {"rows", rows},           {"heads", 32}, {"head_dim", 128},
                          {"us_fused", fused * 1e6},         {"us_apart", apart * 1e6}}
               .dump()
        << std::endl;
  }
}

// Qwen3-8B attention shapes (docs/dflash.md §1): 32 query heads over 8 KV heads of 128.
constexpr int64_t kQwen3QHeads = 32, kQwen3KvHeads = 8, kQwen3HeadDim = 128;

// A layer's path from its q/k/v products to attention over 512 cached keys: the q/k norm and
// RoPE fused into the KV store, against the two head_norm_rope launches before it.
void report_cuda_norm_rope_store_attend(Backend& gpu, double min_seconds) {
  const int64_t q_heads = kQwen3QHeads, kv_heads = kQwen3KvHeads, head_dim = kQwen3HeadDim;
  for (int64_t rows : {int64_t{1}, int64_t{16}}) {
    const int64_t keys = 512;
    Tensor q = gpu.allocate(DType::kF32, {rows, q_heads, head_dim});
    Tensor k = gpu.allocate(DType::kF32, {rows, kv_heads, head_dim});
    Tensor v = gpu.allocate(DType::kF32, {rows, kv_heads, head_dim});
    Tensor cache_k = gpu.allocate(DType::kF32, {keys, kv_heads, head_dim});
    Tensor cache_v = gpu.allocate(DType::kF32, {keys, kv_heads, head_dim});
    Tensor out = gpu.allocate(DType::kF32, {rows, q_heads, head_dim});
    Tensor norm = gpu.upload_weight(Tensor::zeros_cpu(DType::kBF16, {head_dim}));
    std::vector<int32_t> at(static_cast<size_t>(rows)), counts(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      at[static_cast<size_t>(i)] = static_cast<int32_t>(keys - rows + i);
      counts[static_cast<size_t>(i)] = static_cast<int32_t>(keys - rows + i + 1);
    }
    Tensor store_at = gpu.allocate(DType::kI32, {rows}), key_counts = gpu.allocate(DType::kI32, {rows});
    gpu.copy_from_host(at.data(), store_at);
    gpu.copy_from_host(counts.data(), key_counts);
    const CacheChunk chunk[] = {{&cache_k, &cache_v, 0, rows}};
    const QkNormRope norm_rope{&norm, &norm, &store_at, 1e-6f, {1e6f}};
    const double fused = time_per_gpu_call(
        gpu, min_seconds, [&] { gpu.store_and_attend(q, k, v, chunk, store_at, key_counts, out, &norm_rope); });
    const double apart = time_per_gpu_call(gpu, min_seconds, [&] {
      gpu.head_norm_rope(q, norm, 1e-6f, store_at, 1e6f);
      gpu.head_norm_rope(k, norm, 1e-6f, store_at, 1e6f);
      gpu.store_and_attend(q, k, v, chunk, store_at, key_counts, out);
    });
    std::cout << nlohmann::json{{"kernel", "cuda_norm_rope_store_attend"},
                                {"rows", rows},
                                {"keys", keys},
                                {"us_fused", fused * 1e6},
                                {"us_apart", apart * 1e6}}
                     .dump()
              << std::endl;
  }
}

// Attention over each of --cuda-keys keys at decode and a verify block, and the one-row kernel
// an unaligned q takes.
void report_cuda_attention(Backend& gpu, const std::vector<int64_t>& keys_list, double min_seconds,
                           double copy_gb_per_s) {
  const int64_t q_heads = kQwen3QHeads, kv_heads = kQwen3KvHeads, head_dim = kQwen3HeadDim;
  for (int64_t keys : keys_list) {
    for (int64_t rows : {int64_t{1}, int64_t{16}}) {
      Tensor q = gpu.allocate(DType::kF32, {rows, q_heads, head_dim});
      Tensor k = gpu.allocate(DType::kF32, {keys, kv_heads, head_dim});
      Tensor v = gpu.allocate(DType::kF32, {keys, kv_heads, head_dim});
      Tensor out = gpu.allocate(DType::kF32, {rows, q_heads, head_dim});
      Tensor counts = gpu.allocate(DType::kI32, {rows});
      std::vector<int32_t> all_keys(static_cast<size_t>(rows), static_cast<int32_t>(keys));
      gpu.copy_from_host(all_keys.data(), counts);
      const double seconds = time_per_gpu_call(gpu, min_seconds, [&] { gpu.attention(q, k, v, counts, out); });
      const double kv_gb_per_s = 2.0 * static_cast<double>(k.nbytes()) / seconds / 1e9;
      // The same call with q 4 bytes off 16-byte alignment, which the float4 tile kernels need:
      // the one-row kernel they replaced takes it (kernels/cuda/attention.cu).
      const int64_t q_floats = rows * q_heads * head_dim;
      Tensor shifted = gpu.allocate(DType::kF32, {q_floats + 1});
      Tensor q_shifted = shifted.slice_rows(1, q_floats).reshape({rows, q_heads, head_dim});
      const double one_row = time_per_gpu_call(gpu, min_seconds, [&] { gpu.attention(q_shifted, k, v, counts, out); });
      std::cout << nlohmann::json{{"kernel", "cuda_attention"},
                                  {"rows", rows},
                                  {"keys", keys},
                                  {"q_heads", q_heads},
                                  {"kv_heads", kv_heads},
                                  {"head_dim", head_dim},
                                  {"us_per_call", seconds * 1e6},
                                  {"us_one_row_kernel", one_row * 1e6},
                                  {"kv_gb_per_s", kv_gb_per_s},
                                  {"fraction_of_copy_bandwidth", kv_gb_per_s / copy_gb_per_s}}
                       .dump()
                << std::endl;
    }
  }
}

// gpt-oss's attention (64 query heads over 8 KV heads of 64, bf16 sinks) at a context of 4096:
// a sliding layer (window 128 over a ring of 144 rows) and a full one, on the simple kernel
// those options take.
void report_cuda_gpt_oss_attention(Backend& gpu, double min_seconds, double copy_gb_per_s) {
  const int64_t oss_q_heads = 64, oss_kv_heads = 8, oss_head_dim = 64, context = 4096, window = 128;
  Tensor sinks = gpu.upload_weight(Tensor::zeros_cpu(DType::kBF16, {oss_q_heads}));
  for (const int64_t layer_window : {window, int64_t{0}}) {
    const int64_t keys = layer_window > 0 ? window + 16 : context;
    for (int64_t rows : {int64_t{1}, int64_t{16}}) {
      Tensor q = gpu.allocate(DType::kF32, {rows, oss_q_heads, oss_head_dim});
      Tensor k = gpu.allocate(DType::kF32, {keys, oss_kv_heads, oss_head_dim});
      Tensor v = gpu.allocate(DType::kF32, {keys, oss_kv_heads, oss_head_dim});
      Tensor out = gpu.allocate(DType::kF32, {rows, oss_q_heads, oss_head_dim});
      Tensor counts = gpu.allocate(DType::kI32, {rows});
      std::vector<int32_t> causal(static_cast<size_t>(rows));
      for (int64_t m = 0; m < rows; ++m) causal[static_cast<size_t>(m)] = static_cast<int32_t>(context - rows + 1 + m);
      gpu.copy_from_host(causal.data(), counts);
      const AttentionOptions options{&sinks, layer_window};
      const double seconds = time_per_gpu_call(gpu, min_seconds, [&] { gpu.attention(q, k, v, counts, out, options); });
      const double attended = static_cast<double>(layer_window > 0 ? layer_window : context);
      const double kv_gb_per_s = 2.0 * attended * oss_kv_heads * oss_head_dim * sizeof(float) / seconds / 1e9;
      std::cout << nlohmann::json{{"kernel", "cuda_attention_gpt_oss"},
                                  {"layer", layer_window > 0 ? "sliding" : "full"},
                                  {"window", layer_window},
                                  {"rows", rows},
                                  {"context", context},
                                  {"us_per_call", seconds * 1e6},
                                  {"kv_gb_per_s", kv_gb_per_s},
                                  {"fraction_of_copy_bandwidth", kv_gb_per_s / copy_gb_per_s}}
                       .dump()
                << std::endl;
    }
  }
}

void run_cuda_kernel_bench(const KernelBenchOptions& o) {
  if (cuda_device_count() == 0) {
    std::cout << nlohmann::json{{"kernel", "cuda"}, {"skipped", "no CUDA device visible to this build"}}.dump()
              << std::endl;
    return;
  }
  std::unique_ptr<Backend> gpu = make_backend("cuda");
  const TimePerCall time_gpu = [&](const std::function<void()>& body) {
    return time_per_gpu_call(*gpu, o.min_seconds, body);
  };
  if (o.paged_only)
    return report_paged_attention(*gpu, "cuda_paged_attention", time_gpu, o.paged_keys, o.paged_rounds,
                                  parse_kv_cache_dtype(o.kv_cache_dtype));
  const double copy_gb_per_s = report_cuda_copy_bandwidth(*gpu, o.min_seconds);
  report_cuda_matmul(*gpu, o, copy_gb_per_s);
  report_cuda_fused_products(*gpu, copy_gb_per_s, o.min_seconds);
  report_moe(*gpu, time_gpu, copy_gb_per_s);
  report_gated_delta_rule(*gpu, "cuda_gated_delta_rule", time_gpu, copy_gb_per_s);
  report_dflash2_ops(*gpu, "cuda_", time_gpu);
  report_cuda_add_rmsnorm(*gpu, o.min_seconds);
  report_sampling(*gpu, "cuda_sample",
                  [&](Backend& device, auto&& body) { return time_per_gpu_call(device, o.min_seconds, body); });
  report_cuda_head_norm_rope(*gpu, o.min_seconds);
  report_cuda_norm_rope_store_attend(*gpu, o.min_seconds);
  report_cuda_attention(*gpu, o.cuda_keys, o.min_seconds, copy_gb_per_s);
  report_cuda_gpt_oss_attention(*gpu, o.min_seconds, copy_gb_per_s);
  // Paged attention (the simple kernel) against contiguous (the flash-decoding tiles).
  report_paged_attention(*gpu, "cuda_paged_attention", time_gpu, o.paged_keys, o.paged_rounds,
                         parse_kv_cache_dtype(o.kv_cache_dtype));
}

void run_kernel_bench(const KernelBenchOptions& o) {
  if (o.device == "cpu" || o.device == "all") run_cpu_kernel_bench(o);
  if (o.device == "cuda" || o.device == "all") run_cuda_kernel_bench(o);
}

}  // namespace

std::function<void()> add_kernel_bench(CLI::App& app) {
  auto o = std::make_shared<KernelBenchOptions>();
  CLI::App* cmd = app.add_subcommand("kernels", "microbenchmarks of the CPU and CUDA kernels");
  cmd->add_option("--rows", o->rows, "M values (rows of x)")->capture_default_str();
  cmd->add_option("--n", o->n, "output features")->capture_default_str();
  cmd->add_option("--k", o->k, "input features")->capture_default_str();
  cmd->add_option("--min-seconds", o->min_seconds, "time per case")->capture_default_str();
  cmd->add_option("--device", o->device, "which kernels: cpu, cuda or all (CUDA skips, saying why, without a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  cmd->add_option("--cuda-rows", o->cuda_rows, "M values for the CUDA bf16 matmul")->capture_default_str();
  cmd->add_option("--cuda-n", o->cuda_n, "output features of the CUDA matmul")->capture_default_str();
  cmd->add_option("--cuda-k", o->cuda_k, "input features of the CUDA matmul")->capture_default_str();
  cmd->add_option("--cuda-keys", o->cuda_keys, "key counts for the CUDA attention")->capture_default_str();
  cmd->add_option("--cpu-keys", o->cpu_keys, "key counts for the CPU attention")->capture_default_str();
  cmd->add_option("--cpu-matmul-paths", o->cpu_matmul_paths,
                  "CPU matmul paths to time side by side: chosen, all, or avx2 avx512 avx512bf16 avx512bf16-round")
      ->capture_default_str();
  cmd->add_flag("--cpu-matmul-only", o->cpu_matmul_only, "CPU: time the matmul paths only");
  cmd->add_option("--paged-keys", o->paged_keys, "keys per sequence for paged against contiguous attention")
      ->capture_default_str();
  cmd->add_option("--paged-rounds", o->paged_rounds, "paged and contiguous timed in turn this many times")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "bf16|float32: the paged attention lines' cache element type")
      ->check(CLI::IsMember({"bf16", "float32"}))
      ->capture_default_str();
  cmd->add_flag("--paged-only", o->paged_only,
                "time paged attention against contiguous only (block 16, Qwen3-0.6B's attention shape)");
  cmd->add_flag("--deltanet-only", o->deltanet_only,
                "CPU: time Gated DeltaNet's recurrence only (Qwen3.5-9B's linear-attention heads)");
  cmd->add_flag("--dflash2-only", o->dflash2_only,
                "CPU: time DFlash2's drafter ops only (Qwen3-0.6B's shape, the published selector settings)");
  cmd->add_flag("--moe-only", o->moe_only,
                "CPU: time the mixture-of-experts kernels only (MXFP4 products, experts of gpt-oss-20b and "
                "Qwen3-30B-A3B)");
  return [cmd, o] {
    if (*cmd) run_kernel_bench(*o);
  };
}

}  // namespace flashq
