// The table's cases for Gated DeltaNet's recurrence (Backend::gated_delta_rule), held to a plain
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
                                 std::vector<DeltaRuleChunk> chunks;
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

}  // namespace

std::vector<OpCase> deltanet_op_cases() {
  std::vector<OpCase> cases;
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
