// The table's cases for what the Llama family adds to the ops: add_bias (a linear layer's bias,
// in each weight dtype) and RoPE with linear and llama3 frequency scaling in every path that
// rotates: rope, head_norm_rope, and store_and_attend and store_kv with RoPE alone (Llama has no
// q/k norm). References: tests/kernels/op_reference.h (the scaled frequencies written from
// transformers' definitions). Tolerances as the unscaled cases': RoPE 1e-4, with the norm 1e-5,
// attention 1e-4; the bias exact.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

constexpr float kEps = 1e-5f;

// A scaling of each kind the backends implement, with its reference frequencies.
struct Scaling {
  std::string name;
  RopeOptions rope;
  std::vector<double> (*frequencies)(const RopeOptions&, int64_t head_dim);
};

std::vector<Scaling> scalings() {
  return {
      {"llama3 x8 (Llama 3.1)",
       {.theta = 500000.0f,
        .scaling = RopeScaling::kLlama3,
        .factor = 8.0f,
        .low_freq_factor = 1.0f,
        .high_freq_factor = 4.0f,
        .original_max_position = 8192.0f},
       [](const RopeOptions& r, int64_t d) {
         return reference::llama3_inverse_frequencies(r.theta, d, r.factor, r.low_freq_factor, r.high_freq_factor,
                                                      r.original_max_position);
       }},
      {"llama3 x32 (Llama 3.2)",
       {.theta = 500000.0f,
        .scaling = RopeScaling::kLlama3,
        .factor = 32.0f,
        .low_freq_factor = 1.0f,
        .high_freq_factor = 4.0f,
        .original_max_position = 8192.0f},
       [](const RopeOptions& r, int64_t d) {
         return reference::llama3_inverse_frequencies(r.theta, d, r.factor, r.low_freq_factor, r.high_freq_factor,
                                                      r.original_max_position);
       }},
      {"linear x4",
       {.theta = 10000.0f, .scaling = RopeScaling::kLinear, .factor = 4.0f},
       [](const RopeOptions& r, int64_t d) { return reference::linear_inverse_frequencies(r.theta, d, r.factor); }},
  };
}

std::vector<int32_t> scattered_positions(int64_t rows, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> position(0, 120000);
  std::vector<int32_t> positions;
  for (int64_t r = 0; r < rows; ++r) positions.push_back(r == 0 ? 0 : position(rng));
  return positions;
}

// ---- add_bias ----

OpCase add_bias_case(DType dtype, int64_t rows, int64_t cols) {
  struct Data {
    std::vector<float> y, bias;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(rows * 11 + cols));
  d->y = random_floats(static_cast<size_t>(rows * cols), rng, 3.0f);
  d->bias = random_floats(static_cast<size_t>(cols), rng);
  round_to(dtype, d->bias);
  return {"add_bias",
          std::string(dtype_name(dtype)) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols),
          [=](OpDevice& dev) {
            Tensor y = dev.upload(d->y, {rows, cols}), bias = dev.weight(d->bias, dtype, {cols});
            return PreparedRun{[&dev, y, bias]() mutable { dev.backend().add_bias(y, bias); },
                               [&dev, y] { return Outputs{dev.read(y)}; }};
          },
          [=] {
            return std::vector<Expected>{{"y", reference::add_bias(d->y, d->bias, cols)}};
          }};
}

// ---- rope and head_norm_rope, scaled ----

OpCase scaled_rope_case(const Scaling& scaling, int64_t rows, int64_t heads, int64_t head_dim) {
  struct Data {
    std::vector<float> x;
    std::vector<int32_t> positions;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(rows * 3 + heads * 5 + head_dim + 7));
  d->x = random_floats(static_cast<size_t>(rows * heads * head_dim), rng);
  d->positions = scattered_positions(rows, rng);
  const RopeOptions rope = scaling.rope;
  const auto frequencies = scaling.frequencies;
  return {
      "rope",
      scaling.name + " rows=" + std::to_string(rows) + " heads=" + std::to_string(heads) +
          " head_dim=" + std::to_string(head_dim),
      [=](OpDevice& dev) {
        Tensor x = dev.upload(d->x, {rows, heads, head_dim}), positions = dev.ints(d->positions);
        return PreparedRun{[&dev, x, positions, rope]() mutable { dev.backend().rope(x, positions, rope); },
                           [&dev, x] { return Outputs{dev.read(x)}; }};
      },
      [=] {
        return std::vector<Expected>{
            {"x", reference::rope_with_frequencies(d->x, d->positions, heads, head_dim, frequencies(rope, head_dim)),
             1e-4}};
      }};
}

OpCase scaled_head_norm_rope_case(const Scaling& scaling, int64_t rows, int64_t heads, int64_t head_dim) {
  struct Data {
    std::vector<float> x, w;
    std::vector<int32_t> positions;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(29 + rows * 7 + heads * 3 + head_dim));
  d->x = random_floats(static_cast<size_t>(rows * heads * head_dim), rng, 3.0f);
  d->w = random_floats(static_cast<size_t>(head_dim), rng);
  round_to(DType::kBF16, d->w);
  d->positions = scattered_positions(rows, rng);
  const RopeOptions rope = scaling.rope;
  const auto frequencies = scaling.frequencies;
  return {
      "head_norm_rope", scaling.name + " bf16 rows=" + std::to_string(rows) + " heads=" + std::to_string(heads),
      [=](OpDevice& dev) {
        Tensor x = dev.upload(d->x, {rows, heads, head_dim}), w = dev.weight(d->w, DType::kBF16, {head_dim});
        Tensor positions = dev.ints(d->positions);
        return PreparedRun{
            [&dev, x, w, positions, rope]() mutable { dev.backend().head_norm_rope(x, w, kEps, positions, rope); },
            [&dev, x] { return Outputs{dev.read(x)}; }};
      },
      [=] {
        const std::vector<float> normed = reference::rmsnorm(d->x, d->w, head_dim, kEps);
        return std::vector<Expected>{
            {"x", reference::rope_with_frequencies(normed, d->positions, heads, head_dim, frequencies(rope, head_dim)),
             1e-5}};
      }};
}

// ---- store_and_attend and store_kv with scaled RoPE alone ----

// Three sequences of 1, 4 and 2 new rows over caches already holding 5, 0 and 11 rows; causal.
struct ScaledSequences {
  int64_t q_heads = 8, kv_heads = 2, head_dim = 64, rows = 0;
  std::vector<int64_t> first_row, row_count, capacity;
  std::vector<std::vector<float>> keys, values;  // each cache's initial contents
  std::vector<float> q, k, v;
  std::vector<int32_t> store_at, positions, key_counts;
  int64_t row_size() const { return kv_heads * head_dim; }
};

ScaledSequences scaled_sequences() {
  ScaledSequences s;
  std::mt19937 rng(77);
  const int64_t counts[] = {1, 4, 2}, starts[] = {5, 0, 11};
  for (int c = 0; c < 3; ++c) {
    const int64_t n = counts[c], start = starts[c], capacity = start + n + 3;
    s.first_row.push_back(s.rows);
    s.row_count.push_back(n);
    s.capacity.push_back(capacity);
    s.keys.push_back(random_floats(static_cast<size_t>(capacity * s.row_size()), rng, 2.0f));
    s.values.push_back(random_floats(static_cast<size_t>(capacity * s.row_size()), rng, 2.0f));
    for (int64_t i = 0; i < n; ++i) {
      s.store_at.push_back(static_cast<int32_t>(start + i));
      s.positions.push_back(static_cast<int32_t>(start + i + 30000 * c));  // where the scaling shows
      s.key_counts.push_back(static_cast<int32_t>(start + i + 1));
    }
    s.rows += n;
  }
  s.q = random_floats(static_cast<size_t>(s.rows * s.q_heads * s.head_dim), rng, 2.0f);
  s.k = random_floats(static_cast<size_t>(s.rows * s.row_size()), rng, 2.0f);
  s.v = random_floats(static_cast<size_t>(s.rows * s.row_size()), rng);
  return s;
}

struct DeviceCaches {
  std::vector<Tensor> tensors;  // keys and values of each sequence, in turn
  std::vector<CacheChunk> chunks;
};

std::shared_ptr<DeviceCaches> upload_scaled_caches(OpDevice& dev, const ScaledSequences& s) {
  auto caches = std::make_shared<DeviceCaches>();
  caches->tensors.reserve(2 * s.first_row.size());  // chunks point into it
  for (size_t c = 0; c < s.first_row.size(); ++c) {
    caches->tensors.push_back(dev.upload(s.keys[c], {s.capacity[c], s.kv_heads, s.head_dim}));
    caches->tensors.push_back(dev.upload(s.values[c], {s.capacity[c], s.kv_heads, s.head_dim}));
    caches->chunks.push_back({&caches->tensors[2 * c], &caches->tensors[2 * c + 1], s.first_row[c], s.row_count[c]});
  }
  return caches;
}

// The caches after storing rows of `k` and s.v at store_at.
std::vector<std::vector<float>> reference_scaled_caches(const ScaledSequences& s, const std::vector<float>& k) {
  std::vector<std::vector<float>> caches;
  for (size_t c = 0; c < s.first_row.size(); ++c) {
    const auto rows_of = [&](const std::vector<float>& x) {
      return std::vector<float>(x.begin() + s.first_row[c] * s.row_size(),
                                x.begin() + (s.first_row[c] + s.row_count[c]) * s.row_size());
    };
    const std::vector<int32_t> at(s.store_at.begin() + s.first_row[c],
                                  s.store_at.begin() + s.first_row[c] + s.row_count[c]);
    caches.push_back(reference::store_rows(rows_of(k), s.keys[c], at, s.row_size()));
    caches.push_back(reference::store_rows(rows_of(s.v), s.values[c], at, s.row_size()));
  }
  return caches;
}

OpCase scaled_store_and_attend_case(const Scaling& scaling) {
  const LazyInputs<ScaledSequences> s(scaled_sequences);
  const RopeOptions rope = scaling.rope;
  const auto frequencies = scaling.frequencies;
  return {
      "store_and_attend", "3 sequences, RoPE " + scaling.name,
      [=](OpDevice& dev) {
        const Shape q_shape = {s->rows, s->q_heads, s->head_dim}, kv_shape = {s->rows, s->kv_heads, s->head_dim};
        Tensor q = dev.upload(s->q, q_shape), k = dev.upload(s->k, kv_shape), v = dev.upload(s->v, kv_shape);
        Tensor store_at = dev.ints(s->store_at), counts = dev.ints(s->key_counts), out = dev.poisoned(q_shape);
        auto positions = std::make_shared<Tensor>(dev.ints(s->positions));
        auto caches = upload_scaled_caches(dev, *s);
        return PreparedRun{[&dev, q, k, v, caches, store_at, counts, out, positions, rope]() mutable {
                             const QkNormRope norm_rope{.positions = positions.get(), .rope = rope};
                             dev.backend().store_and_attend(q, k, v, caches->chunks, store_at, counts, out, &norm_rope);
                           },
                           [&dev, out, caches] {
                             Outputs got{dev.read(out)};
                             for (const Tensor& cache : caches->tensors) got.push_back(dev.read(cache));
                             return got;
                           }};
      },
      [=] {
        const std::vector<double> f = frequencies(rope, s->head_dim);
        const std::vector<float> q = reference::rope_with_frequencies(s->q, s->positions, s->q_heads, s->head_dim, f);
        const std::vector<float> k = reference::rope_with_frequencies(s->k, s->positions, s->kv_heads, s->head_dim, f);
        const std::vector<std::vector<float>> caches = reference_scaled_caches(*s, k);
        std::vector<float> out(q.size());
        const int64_t q_row = s->q_heads * s->head_dim;
        for (size_t c = 0; c < s->first_row.size(); ++c) {
          const int64_t first = s->first_row[c], n = s->row_count[c];
          const std::vector<float> chunk_out = reference::attention(
              std::vector<float>(q.begin() + first * q_row, q.begin() + (first + n) * q_row), caches[2 * c],
              caches[2 * c + 1], std::vector<int32_t>(s->key_counts.begin() + first, s->key_counts.begin() + first + n),
              s->q_heads, s->kv_heads, s->head_dim);
          std::copy(chunk_out.begin(), chunk_out.end(), out.begin() + first * q_row);
        }
        std::vector<Expected> expected = {{"out", out, 1e-4}};
        for (size_t i = 0; i < caches.size(); ++i) {
          expected.push_back(
              {"cache " + std::to_string(i / 2) + (i % 2 ? " values" : " keys"), caches[i], i % 2 ? 0.0 : 1e-4});
        }
        return expected;
      }};
}

OpCase scaled_store_kv_case(const Scaling& scaling) {
  const LazyInputs<ScaledSequences> s(scaled_sequences);
  const RopeOptions rope = scaling.rope;
  const auto frequencies = scaling.frequencies;
  return {"store_kv", "3 sequences, RoPE " + scaling.name,
          [=](OpDevice& dev) {
            const Shape kv_shape = {s->rows, s->kv_heads, s->head_dim};
            Tensor k = dev.upload(s->k, kv_shape), v = dev.upload(s->v, kv_shape), store_at = dev.ints(s->store_at);
            auto positions = std::make_shared<Tensor>(dev.ints(s->positions));
            auto caches = upload_scaled_caches(dev, *s);
            return PreparedRun{[&dev, k, v, caches, store_at, positions, rope]() mutable {
                                 const QkNormRope norm_rope{.positions = positions.get(), .rope = rope};
                                 dev.backend().store_kv(k, v, caches->chunks, store_at, &norm_rope);
                               },
                               [&dev, caches] {
                                 Outputs got;
                                 for (const Tensor& cache : caches->tensors) got.push_back(dev.read(cache));
                                 return got;
                               }};
          },
          [=] {
            const std::vector<float> k = reference::rope_with_frequencies(s->k, s->positions, s->kv_heads, s->head_dim,
                                                                          frequencies(rope, s->head_dim));
            std::vector<Expected> expected;
            const std::vector<std::vector<float>> caches = reference_scaled_caches(*s, k);
            for (size_t i = 0; i < caches.size(); ++i) {
              expected.push_back(
                  {"cache " + std::to_string(i / 2) + (i % 2 ? " values" : " keys"), caches[i], i % 2 ? 0.0 : 1e-4});
            }
            return expected;
          }};
}

}  // namespace

std::vector<OpCase> llama_op_cases() {
  std::vector<OpCase> cases;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    cases.push_back(add_bias_case(dtype, 1, 7));
    cases.push_back(add_bias_case(dtype, 5, 96));
    cases.push_back(add_bias_case(dtype, 130, 1000));
  }
  for (const Scaling& scaling : scalings()) {
    cases.push_back(scaled_rope_case(scaling, 9, 4, 128));
    cases.push_back(scaled_rope_case(scaling, 17, 8, 64));
    cases.push_back(scaled_head_norm_rope_case(scaling, 9, 4, 128));
    cases.push_back(scaled_store_and_attend_case(scaling));
    cases.push_back(scaled_store_kv_case(scaling));
  }
  return cases;
}

}  // namespace flashq
