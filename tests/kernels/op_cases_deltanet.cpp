// The table's cases for the Qwen3.5 / Qwen3-Next layers' ops. rope and head_norm_rope with a
// partial rotary (RopeOptions::rotary_dims: 64 of a head of 256, as partial_rotary_factor 0.25
// gives, theta 1e7): the reference's RoPE of a 64-wide head on each head's first 64 dims, the
// rest unchanged. delta_rule_gates, gated_rmsnorm, sigmoid_gate:
// element-wise, held to their definitions in double (torch's softplus threshold of 20 reached,
// bf16 and f32 weights, Qwen3.5's 32 value heads of 128). causal_conv1d: the depthwise causal convolution
// with SiLU held to its definition (transformers' torch_causal_conv1d_update: the state's inputs
// then the chunk's, K taps a channel, SiLU), kernel 4 as published and 2, bf16 and f32 weights,
// sequences of 0 to 9 rows and one shorter than the kernel, outputs and states after exact to
// 1e-6. gated_delta_rule: the recurrence, held to a plain
// double-precision transcription of the published layer (transformers' Qwen3-Next
// torch_recurrent_gated_delta_rule with use_qk_l2norm_in_kernel): q and k L2-normalised with eps
// 1e-6 inside the square root, key heads repeated to the value heads, q scaled by 1/sqrt(Dk),
// S *= exp(g); u = beta (v - S^T k); S += k u^T; o = S^T q. Shapes: Qwen3.5-9B's (16 key heads
// and 32 value heads of 128) cut to 4 and 8 heads, Qwen3-Next's equal counts, a decode row, a
// prompt of 70 rows, and five sequences of 0 to 9 rows, each from a state of its own (zero, or
// carried from earlier rows). The outputs and the states after are compared (1e-5; the
// reference runs in double). gated_delta_rule_chunked: held to the same reference, over prompts
// of several chunks and one cut short, with decays down to exp(-8) a row.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_reference.h"
#include "tests/kernels/op_cases.h"

namespace flashq {
namespace {

struct DeltaShape {
  std::string name;
  int64_t key_heads, value_heads, key_dim, value_dim;
  std::vector<int64_t> chunk_rows;  // per sequence
  bool carried_state = true;        // random starting states (else zero)
  float min_log_decay = -1.0f;      // g drawn from [min_log_decay, 0]
};

struct DeltaData {
  std::vector<float> q, k, v, g, beta, states;  // states: every sequence's, one after another
};

// The reference, per sequence and value head, in double.
std::vector<double> reference_delta_rule(const DeltaShape& s, const DeltaData& d, std::vector<double>& states) {
  const int64_t group = s.value_heads / s.key_heads, state_size = s.key_dim * s.value_dim;
  int64_t rows = 0;
  for (int64_t n : s.chunk_rows) rows += n;
  std::vector<double> out(static_cast<size_t>(rows * s.value_heads * s.value_dim));
  states.assign(d.states.begin(), d.states.end());
  auto normalised = [&](const std::vector<float>& x, int64_t at, double scale) {
    double sum = 0.0;
    for (int64_t i = 0; i < s.key_dim; ++i) sum += static_cast<double>(x[at + i]) * x[at + i];
    std::vector<double> y(static_cast<size_t>(s.key_dim));
    for (int64_t i = 0; i < s.key_dim; ++i) y[i] = x[at + i] * scale / std::sqrt(sum + 1e-6);
    return y;
  };
  int64_t first = 0;
  for (size_t c = 0; c < s.chunk_rows.size(); ++c) {
    for (int64_t h = 0; h < s.value_heads; ++h) {
      double* S = states.data() + (static_cast<int64_t>(c) * s.value_heads + h) * state_size;
      for (int64_t t = first; t < first + s.chunk_rows[c]; ++t) {
        const int64_t qk_at = (t * s.key_heads + h / group) * s.key_dim, at = t * s.value_heads + h;
        const std::vector<double> q = normalised(d.q, qk_at, 1.0 / std::sqrt(static_cast<double>(s.key_dim)));
        const std::vector<double> k = normalised(d.k, qk_at, 1.0);
        const double decay = std::exp(static_cast<double>(d.g[at]));
        for (int64_t j = 0; j < s.value_dim; ++j) {
          double kv = 0.0;
          for (int64_t i = 0; i < s.key_dim; ++i) kv += (S[i * s.value_dim + j] *= decay) * k[i];
          const double u = d.beta[at] * (d.v[at * s.value_dim + j] - kv);
          double o = 0.0;
          for (int64_t i = 0; i < s.key_dim; ++i) o += (S[i * s.value_dim + j] += k[i] * u) * q[i];
          out[at * s.value_dim + j] = o;
        }
      }
    }
    first += s.chunk_rows[c];
  }
  return out;
}

// `chunked`: the chunked form (Backend::gated_delta_rule_chunked), held to the same reference.
OpCase delta_rule_case(const DeltaShape& s, bool chunked) {
  int64_t rows = 0;
  for (int64_t n : s.chunk_rows) rows += n;
  const int64_t state_size = s.value_heads * s.key_dim * s.value_dim;
  const LazyInputs<DeltaData> d([s, rows, state_size] {
    DeltaData made;
    std::mt19937 rng(static_cast<unsigned>(rows * 13 + s.key_heads * 7 + s.value_dim));
    made.q = random_floats(static_cast<size_t>(rows * s.key_heads * s.key_dim), rng, 2.0f);
    made.k = random_floats(made.q.size(), rng, 2.0f);
    made.v = random_floats(static_cast<size_t>(rows * s.value_heads * s.value_dim), rng);
    // g = -exp(A_log) softplus(a + dt_bias) <= 0: decays between exp(min_log_decay) and 1.
    std::uniform_real_distribution<float> log_decay(s.min_log_decay, 0.0f), gate(0.0f, 1.0f);
    for (int64_t i = 0; i < rows * s.value_heads; ++i) made.g.push_back(log_decay(rng)), made.beta.push_back(gate(rng));
    made.states = s.carried_state ? random_floats(static_cast<size_t>(state_size) * s.chunk_rows.size(), rng, 0.5f)
                                  : std::vector<float>(static_cast<size_t>(state_size) * s.chunk_rows.size(), 0.0f);
    return made;
  });
  return {chunked ? "gated_delta_rule_chunked" : "gated_delta_rule", s.name,
          [=](OpDevice& dev) {
            Tensor q = dev.upload(d->q, {rows, s.key_heads, s.key_dim});
            Tensor k = dev.upload(d->k, {rows, s.key_heads, s.key_dim});
            Tensor v = dev.upload(d->v, {rows, s.value_heads, s.value_dim});
            Tensor g = dev.upload(d->g, {rows, s.value_heads}), beta = dev.upload(d->beta, {rows, s.value_heads});
            Tensor out = dev.poisoned({rows, s.value_heads, s.value_dim});
            auto states = std::make_shared<std::vector<Tensor>>();
            for (size_t c = 0; c < s.chunk_rows.size(); ++c) {
              const auto first = static_cast<std::ptrdiff_t>(c) * state_size;
              states->push_back(dev.upload(std::vector<float>(d->states.begin() + first, d->states.begin() + first + state_size),
                                           {s.value_heads, s.key_dim, s.value_dim}));
            }
            return PreparedRun{[&dev, q, k, v, g, beta, out, states, s, chunked]() mutable {
                                 std::vector<StateChunk> chunks;
                                 int64_t first = 0;
                                 for (size_t c = 0; c < s.chunk_rows.size(); ++c) {
                                   chunks.push_back({&(*states)[c], first, s.chunk_rows[c]});
                                   first += s.chunk_rows[c];
                                 }
                                 if (chunked) {
                                   dev.backend().gated_delta_rule_chunked(q, k, v, g, beta, chunks, out);
                                 } else {
                                   dev.backend().gated_delta_rule(q, k, v, g, beta, chunks, out);
                                 }
                               },
                               [&dev, out, states] {
                                 Outputs outputs{dev.read(out)};
                                 std::vector<float> all;
                                 for (const Tensor& state : *states) {
                                   const std::vector<float> one = dev.read(state);
                                   all.insert(all.end(), one.begin(), one.end());
                                 }
                                 outputs.push_back(all);
                                 return outputs;
                               }};
          },
          [=] {
            std::vector<double> states;
            const std::vector<double> out = reference_delta_rule(s, *d, states);
            return std::vector<Expected>{{"out", std::vector<float>(out.begin(), out.end()), 1e-5},
                                         {"states", std::vector<float>(states.begin(), states.end()), 1e-5}};
          }};
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The reference's RoPE on the first `rotary` dims of every head of x [rows, heads, head_dim].
std::vector<float> partial_rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int64_t heads,
                                int64_t head_dim, int64_t rotary, float theta) {
  const auto vectors = static_cast<int64_t>(x.size()) / head_dim;
  std::vector<float> part;
  for (int64_t n = 0; n < vectors; ++n) part.insert(part.end(), x.begin() + n * head_dim, x.begin() + n * head_dim + rotary);
  const std::vector<float> rotated = reference::rope_with_frequencies(part, positions, heads, rotary,
                                                                      reference::inverse_frequencies(theta, rotary));
  std::vector<float> y = x;
  for (int64_t n = 0; n < vectors; ++n) {
    std::copy(rotated.begin() + n * rotary, rotated.begin() + (n + 1) * rotary, y.begin() + n * head_dim);
  }
  return y;
}

OpCase partial_rope_case(bool with_norm, int64_t rows, int64_t heads) {
  constexpr int64_t kHeadDim = 256, kRotary = 64;
  constexpr float kTheta = 1e7f, kEps = 1e-6f;
  struct Data {
    std::vector<float> x, w;
    std::vector<int32_t> positions;
  };
  const LazyInputs<Data> d([rows, heads] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows * 11 + heads));
    made.x = random_floats(static_cast<size_t>(rows * heads * kHeadDim), rng, 2.0f);
    made.w = random_floats(static_cast<size_t>(kHeadDim), rng);
    round_to(DType::kBF16, made.w);
    std::uniform_int_distribution<int32_t> position(0, 262143);
    for (int64_t r = 0; r < rows; ++r) made.positions.push_back(r == 0 ? 0 : position(rng));
    return made;
  });
  const RopeOptions rope{.theta = kTheta, .rotary_dims = kRotary};
  return {with_norm ? "head_norm_rope" : "rope",
          "partial rotary 64 of 256, rows=" + std::to_string(rows) + " heads=" + std::to_string(heads),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {rows, heads, kHeadDim}), w = dev.weight(d->w, DType::kBF16, {kHeadDim});
            Tensor positions = dev.ints(d->positions);
            return PreparedRun{[&dev, x, w, positions, rope, with_norm]() mutable {
                                 if (with_norm) {
                                   dev.backend().head_norm_rope(x, w, kEps, positions, rope);
                                 } else {
                                   dev.backend().rope(x, positions, rope);
                                 }
                               },
                               [&dev, x] { return Outputs{dev.read(x)}; }};
          },
          [=] {
            const std::vector<float> in = with_norm ? reference::rmsnorm(d->x, d->w, kHeadDim, kEps) : d->x;
            return std::vector<Expected>{{"x", partial_rope(in, d->positions, heads, kHeadDim, kRotary, kTheta), 1e-5}};
          }};
}

OpCase delta_rule_gates_case(int64_t rows, int64_t heads, DType weight_dtype) {
  struct Data {
    std::vector<float> a, b, a_log, dt_bias;
  };
  const LazyInputs<Data> d([rows, heads, weight_dtype] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows * 5 + heads));
    made.a = random_floats(static_cast<size_t>(rows * heads), rng, 12.0f);  // past softplus's threshold of 20 too
    made.b = random_floats(made.a.size(), rng, 6.0f);
    made.a_log = random_floats(static_cast<size_t>(heads), rng, 2.0f);
    made.dt_bias = random_floats(static_cast<size_t>(heads), rng, 12.0f);
    round_to(weight_dtype, made.a_log);
    round_to(weight_dtype, made.dt_bias);
    return made;
  });
  return {"delta_rule_gates", std::to_string(rows) + " rows of " + std::to_string(heads) + " heads, " +
                                  (weight_dtype == DType::kBF16 ? "bf16" : "f32") + " A_log and dt_bias",
          [=](OpDevice& dev) {
            Tensor a = dev.upload(d->a, {rows, heads}), b = dev.upload(d->b, {rows, heads});
            Tensor a_log = dev.weight(d->a_log, weight_dtype, {heads});
            Tensor dt_bias = dev.weight(d->dt_bias, weight_dtype, {heads});
            Tensor g = dev.poisoned({rows, heads}), beta = dev.poisoned({rows, heads});
            return PreparedRun{[&dev, a, b, a_log, dt_bias, g, beta]() mutable {
                                 dev.backend().delta_rule_gates(a, b, a_log, dt_bias, g, beta);
                               },
                               [&dev, g, beta] { return Outputs{dev.read(g), dev.read(beta)}; }};
          },
          [=] {
            std::vector<float> g, beta;
            for (int64_t i = 0; i < rows * heads; ++i) {
              const double x = static_cast<double>(d->a[i]) + d->dt_bias[i % heads];
              const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));
              g.push_back(static_cast<float>(-std::exp(static_cast<double>(d->a_log[i % heads])) * softplus));
              beta.push_back(static_cast<float>(sigmoid(d->b[i])));
            }
            return std::vector<Expected>{{"g", g, 1e-6}, {"beta", beta, 1e-6}};
          }};
}

OpCase gated_rmsnorm_case(int64_t rows, int64_t heads, int64_t dim, DType w_dtype) {
  struct Data {
    std::vector<float> x, z, w;
  };
  constexpr float kEps = 1e-6f;
  const LazyInputs<Data> d([rows, heads, dim, w_dtype] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows * 3 + heads * 5 + dim));
    made.x = random_floats(static_cast<size_t>(rows * heads * dim), rng, 3.0f);
    made.z = random_floats(made.x.size(), rng, 4.0f);
    made.w = random_floats(static_cast<size_t>(dim), rng);
    round_to(w_dtype, made.w);
    return made;
  });
  return {"gated_rmsnorm", std::to_string(rows) + " rows of " + std::to_string(heads) + " heads of " +
                               std::to_string(dim) + (w_dtype == DType::kBF16 ? ", bf16 w" : ", f32 w"),
          [=](OpDevice& dev) {
            const Shape shape{rows, heads, dim};
            Tensor x = dev.upload(d->x, shape), z = dev.upload(d->z, shape), w = dev.weight(d->w, w_dtype, {dim});
            Tensor out = dev.poisoned(shape), in_place = dev.upload(d->x, shape);
            return PreparedRun{[&dev, x, z, w, out, in_place]() mutable {
                                 dev.backend().gated_rmsnorm(x, z, w, kEps, out);
                                 dev.backend().gated_rmsnorm(in_place, z, w, kEps, in_place);
                               },
                               [&dev, out, in_place] { return Outputs{dev.read(out), dev.read(in_place)}; }};
          },
          [=] {
            std::vector<float> out;
            for (int64_t n = 0; n < rows * heads; ++n) {
              double squares = 0.0;
              for (int64_t i = 0; i < dim; ++i) squares += static_cast<double>(d->x[n * dim + i]) * d->x[n * dim + i];
              const double inverse = 1.0 / std::sqrt(squares / static_cast<double>(dim) + kEps);
              for (int64_t i = 0; i < dim; ++i) {
                const double zi = d->z[n * dim + i];
                out.push_back(static_cast<float>(d->x[n * dim + i] * inverse * d->w[i] * zi * sigmoid(zi)));
              }
            }
            return std::vector<Expected>{{"out", out, 1e-6}, {"out, in place", out, 1e-6, -1, "out"}};
          }};
}

// gate_width: width (element-wise) or 1 (one gate per row).
OpCase sigmoid_gate_case(int64_t rows, int64_t width, int64_t gate_width) {
  struct Data {
    std::vector<float> x, gate;
  };
  const LazyInputs<Data> d([rows, width, gate_width] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows + width + gate_width));
    made.x = random_floats(static_cast<size_t>(rows * width), rng, 2.0f);
    made.gate = random_floats(static_cast<size_t>(rows * gate_width), rng, 8.0f);
    return made;
  });
  const std::string gates = gate_width == 1 ? ", a gate per row" : "";
  return {"sigmoid_gate", std::to_string(rows) + " rows of " + std::to_string(width) + gates,
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {rows, width}), gate = dev.upload(d->gate, {rows, gate_width});
            return PreparedRun{[&dev, x, gate]() mutable { dev.backend().sigmoid_gate(x, gate); },
                               [&dev, x] { return Outputs{dev.read(x)}; }};
          },
          [=] {
            std::vector<float> out;
            for (size_t i = 0; i < d->x.size(); ++i) {
              const size_t g = gate_width == 1 ? i / static_cast<size_t>(width) : i;
              out.push_back(static_cast<float>(d->x[i] * sigmoid(d->gate[g])));
            }
            return std::vector<Expected>{{"x", out, 1e-6}};
          }};
}

struct ConvShape {
  std::string name;
  int64_t channels, kernel;
  DType weight_dtype;
  std::vector<int64_t> chunk_rows;
};

OpCase causal_conv1d_case(const ConvShape& s) {
  struct Data {
    std::vector<float> x, weight, states;
  };
  int64_t rows = 0;
  for (int64_t n : s.chunk_rows) rows += n;
  const int64_t history = s.kernel - 1, state_size = history * s.channels;
  const LazyInputs<Data> d([s, rows, state_size] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(rows * 3 + s.channels + s.kernel));
    made.x = random_floats(static_cast<size_t>(rows * s.channels), rng, 2.0f);
    made.weight = random_floats(static_cast<size_t>(s.channels * s.kernel), rng);
    round_to(s.weight_dtype, made.weight);
    made.states = random_floats(static_cast<size_t>(state_size) * s.chunk_rows.size(), rng, 2.0f);
    return made;
  });
  return {"causal_conv1d", s.name,
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {rows, s.channels}), out = dev.poisoned({rows, s.channels});
            Tensor weight = dev.weight(d->weight, s.weight_dtype, {s.channels, s.kernel});
            auto states = std::make_shared<std::vector<Tensor>>();
            for (size_t c = 0; c < s.chunk_rows.size(); ++c) {
              const auto first = static_cast<std::ptrdiff_t>(c) * state_size;
              states->push_back(dev.upload(
                  std::vector<float>(d->states.begin() + first, d->states.begin() + first + state_size),
                  {history, s.channels}));
            }
            return PreparedRun{[&dev, x, weight, out, states, s]() mutable {
                                 std::vector<StateChunk> chunks;
                                 int64_t first = 0;
                                 for (size_t c = 0; c < s.chunk_rows.size(); ++c) {
                                   chunks.push_back({&(*states)[c], first, s.chunk_rows[c]});
                                   first += s.chunk_rows[c];
                                 }
                                 dev.backend().causal_conv1d(x, weight, chunks, out);
                               },
                               [&dev, out, states] {
                                 std::vector<float> all;
                                 for (const Tensor& state : *states) {
                                   const std::vector<float> one = dev.read(state);
                                   all.insert(all.end(), one.begin(), one.end());
                                 }
                                 return Outputs{dev.read(out), all};
                               }};
          },
          [=] {
            std::vector<float> out(d->x.size()), states;
            int64_t first = 0;
            for (size_t c = 0; c < s.chunk_rows.size(); ++c) {
              // The sequence's inputs: its state's rows, then its own.
              std::vector<double> inputs(d->states.begin() + static_cast<std::ptrdiff_t>(c) * state_size,
                                         d->states.begin() + static_cast<std::ptrdiff_t>(c + 1) * state_size);
              inputs.insert(inputs.end(), d->x.begin() + first * s.channels,
                            d->x.begin() + (first + s.chunk_rows[c]) * s.channels);
              for (int64_t t = 0; t < s.chunk_rows[c]; ++t) {
                for (int64_t ch = 0; ch < s.channels; ++ch) {
                  double sum = 0.0;
                  for (int64_t j = 0; j < s.kernel; ++j) sum += d->weight[ch * s.kernel + j] * inputs[(t + j) * s.channels + ch];
                  out[(first + t) * s.channels + ch] = static_cast<float>(sum / (1.0 + std::exp(-sum)));
                }
              }
              states.insert(states.end(), inputs.end() - state_size, inputs.end());
              first += s.chunk_rows[c];
            }
            return std::vector<Expected>{{"out", out, 1e-6}, {"states", states, 0.0}};
          }};
}

}  // namespace

std::vector<OpCase> deltanet_op_cases() {
  std::vector<OpCase> cases;
  for (bool with_norm : {false, true}) {
    cases.push_back(partial_rope_case(with_norm, 1, 16));
    cases.push_back(partial_rope_case(with_norm, 9, 4));
  }
  cases.push_back(delta_rule_gates_case(1, 32, DType::kF32));
  cases.push_back(delta_rule_gates_case(37, 32, DType::kBF16));
  cases.push_back(gated_rmsnorm_case(1, 32, 128, DType::kBF16));
  cases.push_back(gated_rmsnorm_case(9, 6, 20, DType::kF32));
  cases.push_back(sigmoid_gate_case(1, 4096, 4096));
  cases.push_back(sigmoid_gate_case(13, 200, 200));
  cases.push_back(sigmoid_gate_case(13, 200, 1));
  for (const ConvShape& s : {
           ConvShape{"Qwen3.5 kernel 4, bf16, a decode row", 1024, 4, DType::kBF16, {1}},
           ConvShape{"kernel 4, f32, 5 sequences of 0-9 rows", 96, 4, DType::kF32, {3, 0, 9, 1, 5}},
           ConvShape{"kernel 4, bf16, a prompt of 40 rows and one of 2 (shorter than the kernel)", 200, 4,
                     DType::kBF16, {40, 2}},
           ConvShape{"kernel 2, f32", 33, 2, DType::kF32, {6, 1}},
       }) {
    cases.push_back(causal_conv1d_case(s));
  }
  for (const DeltaShape& s : {
           DeltaShape{"Qwen3.5 heads (4 key, 8 value, 128) decode row", 4, 8, 128, 128, {1}},
           DeltaShape{"Qwen3.5 heads prompt of 70 rows from a zero state", 4, 8, 128, 128, {70}, false},
           DeltaShape{"Qwen3-Next equal heads, 5 sequences of 0-9 rows", 4, 4, 64, 96, {3, 0, 9, 1, 5}},
           DeltaShape{"odd dims (key 24, value 20), 2 sequences", 2, 6, 24, 20, {4, 7}},
       }) {
    cases.push_back(delta_rule_case(s, false));
  }
  // The chunked form over chunks whole and cut short (64 rows a chunk on the CPU, 16 on a GPU),
  // decays strong enough that exp(G) of a chunk's last row underflows.
  for (const DeltaShape& s : {
           DeltaShape{"Qwen3.5 heads (4 key, 8 value, 128) decode row", 4, 8, 128, 128, {1}},
           DeltaShape{"Qwen3.5 heads prompt of 70 rows from a zero state", 4, 8, 128, 128, {70}, false},
           DeltaShape{"Qwen3.5 heads, 2 prompts of 130 and 64 rows, strong decays", 4, 8, 128, 128, {130, 64}, true,
                      -8.0f},
           DeltaShape{"Qwen3-Next equal heads, 5 sequences of 0-33 rows", 4, 4, 64, 96, {3, 0, 33, 1, 17}},
           DeltaShape{"odd dims (key 24, value 20), 2 sequences", 2, 6, 24, 20, {4, 7}},
       }) {
    cases.push_back(delta_rule_case(s, true));
  }
  return cases;
}

}  // namespace flashq
