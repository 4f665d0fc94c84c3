#include "tools/flashq_bench/deltanet_bench.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <vector>

namespace flashq {
namespace {

constexpr int64_t kKeyHeads = 16, kValueHeads = 32, kDim = 128;

Tensor random_tensor(Backend& backend, Shape shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = backend.allocate(DType::kF32, std::move(shape));
  std::vector<float> values(static_cast<size_t>(t.numel()));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : values) x = dist(rng);
  backend.copy_from_host(values.data(), t);
  return t;
}

// A case's rows: `sequences` sequences of `rows_each` rows, one after another.
struct Rows {
  int64_t sequences, rows_each;
  int64_t rows() const { return sequences * rows_each; }
};

// A random state of `shape` per sequence of `at` (held in `states`), each chunk its rows.
std::vector<StateChunk> random_states(Backend& backend, const Rows& at, const Shape& shape, float range,
                                      std::mt19937& rng, std::vector<Tensor>& states) {
  for (int64_t s = 0; s < at.sequences; ++s) states.push_back(random_tensor(backend, shape, rng, -range, range));
  std::vector<StateChunk> chunks;
  for (int64_t s = 0; s < at.sequences; ++s) {
    chunks.push_back({&states[static_cast<size_t>(s)], s * at.rows_each, at.rows_each});
  }
  return chunks;
}

// The convolution of the case's rows over q, k and v's channels (bf16 weights, kernel 4).
void report_causal_conv1d(Backend& backend, const std::string& device, const TimePerCall& time, const Rows& at,
                          std::mt19937& rng) {
  const int64_t channels = 2 * kKeyHeads * kDim + kValueHeads * kDim;
  Tensor conv_in = random_tensor(backend, {at.rows(), channels}, rng, -1.0f, 1.0f);
  Tensor conv_out = backend.allocate(DType::kF32, {at.rows(), channels});
  Tensor conv_weight = backend.allocate(DType::kBF16, {channels, 4});
  std::vector<uint16_t> weight_bits(static_cast<size_t>(channels * 4), 0x3e80);  // 0.25
  backend.copy_from_host(weight_bits.data(), conv_weight);
  std::vector<Tensor> conv_states;
  const std::vector<StateChunk> conv_chunks = random_states(backend, at, {3, channels}, 1.0f, rng, conv_states);
  const double seconds = time([&] { backend.causal_conv1d(conv_in, conv_weight, conv_chunks, conv_out); });
  std::cout << nlohmann::json{{"kernel", device + "causal_conv1d"},
                              {"sequences", at.sequences},
                              {"rows_each", at.rows_each},
                              {"channels", channels},
                              {"us_per_call", seconds * 1e6}}
                   .dump()
            << std::endl;
}

// The element-wise pieces on the case's rows: the gates (into g and beta), the output norm (v
// into out), the attention's gate (16 heads of 256 in Qwen3.5-9B's attention layers).
void report_element_wise(Backend& backend, const std::string& device, const TimePerCall& time, const Rows& at,
                         const Tensor& v, Tensor& g, Tensor& beta, Tensor& out, std::mt19937& rng) {
  const int64_t rows = at.rows();
  Tensor a_log = random_tensor(backend, {kValueHeads}, rng, -1.0f, 1.0f);
  Tensor dt_bias = random_tensor(backend, {kValueHeads}, rng, -1.0f, 1.0f);
  Tensor a = random_tensor(backend, {rows, kValueHeads}, rng, -2.0f, 2.0f);
  Tensor b = random_tensor(backend, {rows, kValueHeads}, rng, -2.0f, 2.0f);
  Tensor norm_w = random_tensor(backend, {kDim}, rng, 0.5f, 1.5f);
  Tensor z = random_tensor(backend, {rows, kValueHeads, kDim}, rng, -2.0f, 2.0f);
  Tensor attention = random_tensor(backend, {rows, 16 * 256}, rng, -1.0f, 1.0f);
  Tensor attention_gate = random_tensor(backend, {rows, 16 * 256}, rng, -2.0f, 2.0f);
  const double gates_seconds = time([&] { backend.delta_rule_gates(a, b, a_log, dt_bias, g, beta); });
  const double norm_seconds = time([&] { backend.gated_rmsnorm(v, z, norm_w, 1e-6f, out); });
  const double gate_seconds = time([&] { backend.sigmoid_gate(attention, attention_gate); });
  for (const auto& [name, s] : {std::pair{"delta_rule_gates", gates_seconds},
                                {"gated_rmsnorm", norm_seconds},
                                {"sigmoid_gate", gate_seconds}}) {
    std::cout << nlohmann::json{{"kernel", device + name},
                                {"sequences", at.sequences},
                                {"rows_each", at.rows_each},
                                {"us_per_call", s * 1e6}}
                     .dump()
              << std::endl;
  }
}

// A prefill's rows through the chunked form against the recurrent form's `recurrent_seconds`, on
// the same tensors (the states go on from wherever the timing left them: the cost is the same).
void report_chunked_form(Backend& backend, const std::string& kernel, const TimePerCall& time, const Tensor& q,
                         const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                         std::span<const StateChunk> chunks, Tensor& out, double recurrent_seconds) {
  const double seconds = time([&] { backend.gated_delta_rule_chunked(q, k, v, g, beta, chunks, out); });
  std::cout << nlohmann::json{{"kernel", kernel + "_chunked"},
                              {"rows", q.dim(0)},
                              {"chunk_rows", backend.delta_rule_chunk_rows()},
                              {"us_per_call", seconds * 1e6},
                              {"us_recurrent", recurrent_seconds * 1e6},
                              {"chunked_over_recurrent", seconds / recurrent_seconds}}
                   .dump()
            << std::endl;
}

}  // namespace

void report_gated_delta_rule(Backend& backend, const std::string& kernel, const TimePerCall& time,
                             double floor_gb_per_s) {
  std::mt19937 rng(5);
  const std::string device = kernel == "gated_delta_rule" ? "" : "cuda_";
  for (const auto& [sequences, rows_each] : {std::pair<int64_t, int64_t>{1, 1}, {16, 1}, {1, 256}, {1, 1024}}) {
    const Rows at{sequences, rows_each};
    const int64_t rows = at.rows();
    Tensor q = random_tensor(backend, {rows, kKeyHeads, kDim}, rng, -1.0f, 1.0f);
    Tensor k = random_tensor(backend, {rows, kKeyHeads, kDim}, rng, -1.0f, 1.0f);
    Tensor v = random_tensor(backend, {rows, kValueHeads, kDim}, rng, -1.0f, 1.0f);
    Tensor g = random_tensor(backend, {rows, kValueHeads}, rng, -0.1f, 0.0f);
    Tensor beta = random_tensor(backend, {rows, kValueHeads}, rng, 0.0f, 1.0f);
    Tensor out = backend.allocate(DType::kF32, {rows, kValueHeads, kDim});
    std::vector<Tensor> states;
    const std::vector<StateChunk> chunks = random_states(backend, at, {kValueHeads, kDim, kDim}, 0.1f, rng, states);
    report_causal_conv1d(backend, device, time, at, rng);
    report_element_wise(backend, device, time, at, v, g, beta, out, rng);

    const double seconds = time([&] { backend.gated_delta_rule(q, k, v, g, beta, chunks, out); });
    const double elements = static_cast<double>(rows) * kValueHeads * kDim * kDim;
    const double state_gb_per_s = 2.0 * 4.0 * elements / seconds / 1e9;  // read and written once a row
    std::cout << nlohmann::json{{"kernel", kernel},
                                {"sequences", sequences},
                                {"rows_each", rows_each},
                                {"key_heads", kKeyHeads},
                                {"value_heads", kValueHeads},
                                {"dim", kDim},
                                {"us_per_call", seconds * 1e6},
                                {"state_gb_per_s", state_gb_per_s},
                                {"fraction_of_floor", floor_gb_per_s > 0 ? state_gb_per_s / floor_gb_per_s : 0.0},
                                {"gflop_per_s", 8.0 * elements / seconds / 1e9}}
                     .dump()
              << std::endl;
    if (rows_each > 1) report_chunked_form(backend, kernel, time, q, k, v, g, beta, chunks, out, seconds);
  }
}

}  // namespace flashq
