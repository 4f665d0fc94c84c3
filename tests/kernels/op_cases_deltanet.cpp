// The table's cases for Gated DeltaNet's ops. causal_conv1d: the depthwise causal convolution
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
// reference runs in double).
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"

namespace flashq {
namespace {

struct DeltaShape {
  std::string name;
  int64_t key_heads, value_heads, key_dim, value_dim;
  std::vector<int64_t> chunk_rows;  // per sequence
  bool carried_state = true;        // random starting states (else zero)
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

OpCase delta_rule_case(const DeltaShape& s) {
  int64_t rows = 0;
  for (int64_t n : s.chunk_rows) rows += n;
  const int64_t state_size = s.value_heads * s.key_dim * s.value_dim;
  const LazyInputs<DeltaData> d([s, rows, state_size] {
    DeltaData made;
    std::mt19937 rng(static_cast<unsigned>(rows * 13 + s.key_heads * 7 + s.value_dim));
    made.q = random_floats(static_cast<size_t>(rows * s.key_heads * s.key_dim), rng, 2.0f);
    made.k = random_floats(made.q.size(), rng, 2.0f);
    made.v = random_floats(static_cast<size_t>(rows * s.value_heads * s.value_dim), rng);
    // g = -exp(A_log) softplus(a + dt_bias) <= 0: decays between about 0.37 and 1.
    std::uniform_real_distribution<float> log_decay(-1.0f, 0.0f), gate(0.0f, 1.0f);
    for (int64_t i = 0; i < rows * s.value_heads; ++i) made.g.push_back(log_decay(rng)), made.beta.push_back(gate(rng));
    made.states = s.carried_state ? random_floats(static_cast<size_t>(state_size) * s.chunk_rows.size(), rng, 0.5f)
                                  : std::vector<float>(static_cast<size_t>(state_size) * s.chunk_rows.size(), 0.0f);
    return made;
  });
  return {"gated_delta_rule", s.name,
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
            return PreparedRun{[&dev, q, k, v, g, beta, out, states, s]() mutable {
                                 std::vector<StateChunk> chunks;
                                 int64_t first = 0;
                                 for (size_t c = 0; c < s.chunk_rows.size(); ++c) {
                                   chunks.push_back({&(*states)[c], first, s.chunk_rows[c]});
                                   first += s.chunk_rows[c];
                                 }
                                 dev.backend().gated_delta_rule(q, k, v, g, beta, chunks, out);
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
    cases.push_back(delta_rule_case(s));
  }
  return cases;
}

}  // namespace flashq
