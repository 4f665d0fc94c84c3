// The table's positions, attention and KV-cache ops: RoPE at scattered positions, the q/k norm
// with it, grouped-query attention over one row, causal and draft blocks, many sequences and long
// contexts, and the fused store_and_attend and store_kv over more sequences than one launch
// takes, each also bit for bit the ops it fuses. Tolerances relative to the largest reference
// value: attention 1e-4, RoPE 1e-4, the q/k norm and RoPE 1e-5; caches stored without the norm
// exact.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

// ---- How these cases call the backend's RoPE and q/k norm: the one place that spells the
// arguments of rope, head_norm_rope and QkNormRope (store_and_attend, store_kv). ----

constexpr float kEps = 1e-6f, kTheta = 1e6f;

void apply_rope(Backend& b, Tensor& x, const Tensor& positions) { b.rope(x, positions, kTheta); }

void apply_head_norm_rope(Backend& b, Tensor& x, const Tensor& w, const Tensor& positions) {
  b.head_norm_rope(x, w, kEps, positions, kTheta);
}

// For store_and_attend and store_kv; store_kv reads no q norm (null), and a family without a
// q/k norm passes neither (RoPE alone).
QkNormRope norm_rope_of(const Tensor* q_norm, const Tensor* k_norm, const Tensor* positions) {
  return QkNormRope{q_norm, k_norm, positions, kEps, {kTheta}};
}

// What store_and_attend and store_kv apply to q and k before storing: nothing, RoPE alone (a
// family without a q/k norm), or the q/k norm then RoPE (Qwen3).
enum class QkPrep { kNone, kRope, kNormRope };

const char* prep_name(QkPrep prep) {
  switch (prep) {
    case QkPrep::kNone: return "";
    case QkPrep::kRope: return ", RoPE";
    case QkPrep::kNormRope: return ", q/k norm and RoPE";
  }
  return "";
}

std::vector<float> reference_rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int64_t heads,
                                  int64_t head_dim) {
  return reference::rope(x, positions, heads, head_dim, kTheta);
}

std::vector<float> reference_head_norm_rope(const std::vector<float>& x, const std::vector<float>& w,
                                            const std::vector<int32_t>& positions, int64_t heads, int64_t head_dim) {
  return reference::head_norm_rope(x, w, positions, heads, head_dim, kEps, kTheta);
}

// ---- rope and head_norm_rope ----

OpCase rope_case(int64_t rows, int64_t heads, int64_t head_dim) {
  struct Data {
    std::vector<float> x;
    std::vector<int32_t> positions;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(rows * 3 + heads * 5 + head_dim));
  d->x = random_floats(static_cast<size_t>(rows * heads * head_dim), rng);
  std::uniform_int_distribution<int32_t> position(0, 40000);
  for (int64_t r = 0; r < rows; ++r) d->positions.push_back(r == 0 ? 0 : position(rng));
  return {"rope",
          "rows=" + std::to_string(rows) + " heads=" + std::to_string(heads) + " head_dim=" + std::to_string(head_dim),
          [=](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {rows, heads, head_dim}), positions = dev.ints(d->positions);
            return PreparedRun{[&dev, x, positions]() mutable { apply_rope(dev.backend(), x, positions); },
                               [&dev, x] { return Outputs{dev.read(x)}; }};
          },
          [=] {
            return std::vector<Expected>{{"x", reference_rope(d->x, d->positions, heads, head_dim), 1e-4}};
          }};
}

OpCase head_norm_rope_case(DType dtype, int64_t rows, int64_t heads, int64_t head_dim) {
  struct Data {
    std::vector<float> x, w;
    std::vector<int32_t> positions;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(13 + rows * 7 + heads * 3 + head_dim));
  d->x = random_floats(static_cast<size_t>(rows * heads * head_dim), rng, 3.0f);
  d->w = random_floats(static_cast<size_t>(head_dim), rng);
  round_to(dtype, d->w);
  for (int64_t r = 0; r < rows; ++r) d->positions.push_back(static_cast<int32_t>((r * 977) % 40000));
  return {
      "head_norm_rope",
      std::string(dtype_name(dtype)) + " rows=" + std::to_string(rows) + " heads=" + std::to_string(heads) +
          " head_dim=" + std::to_string(head_dim),
      [=](OpDevice& dev) {
        Tensor x = dev.upload(d->x, {rows, heads, head_dim}), w = dev.weight(d->w, dtype, {head_dim});
        Tensor positions = dev.ints(d->positions);
        return PreparedRun{[&dev, x, w, positions]() mutable { apply_head_norm_rope(dev.backend(), x, w, positions); },
                           [&dev, x] { return Outputs{dev.read(x)}; }};
      },
      [=] {
        return std::vector<Expected>{{"x", reference_head_norm_rope(d->x, d->w, d->positions, heads, head_dim), 1e-5}};
      }};
}

// ---- attention ----

const std::vector<AttentionCaseShape>& attention_shapes() {
  static const std::vector<AttentionCaseShape> shapes = {
      {"DecodeGqa4", 1, 32, 8, 128, 300, true},
      {"BlockGqa2", 16, 16, 8, 128, 77, true},
      {"PerRowCountsGqa4", 16, 8, 2, 64, 129, false},
      {"MhaOddHeadDim", 5, 4, 4, 20, 33, false},
      {"OneKvHeadDim80", 9, 6, 1, 80, 200, false},
      {"HeadDim256", 3, 2, 1, 256, 40, false},
      {"SingleKey", 4, 4, 2, 16, 1, true},
      {"LongContext", 2, 8, 8, 128, 4099, false},
      {"ManyRowsOneSlice", 300, 8, 2, 64, 200, false},
      {"SixteenHeadsPerKvHead", 2, 16, 1, 128, 500, false},
      // On a GPU, chunks of 4 rows or more take the 64-query tiles, fewer the 8-query (decode)
      // tiles; a head dim not a multiple of 4 or a misaligned q the one-row kernel.
      {"VerifyBlockLongContext", 16, 32, 8, 128, 4099, false},
      {"HeadDim256Block", 6, 4, 1, 256, 100, false},
      {"SixteenHeadsBlock", 12, 16, 1, 128, 300, false},
      {"HeadDim18OneRowKernel", 6, 8, 2, 18, 150, false},
      {"HeadDim18DecodeOneRowKernel", 1, 8, 2, 18, 700, true},
      {"MisalignedDecodeOneRowKernel", 1, 32, 8, 128, 300, true, true},
      {"MisalignedBlockOneRowKernel", 16, 8, 2, 64, 129, false, true},
      {"MisalignedLongContextOneRowKernel", 2, 8, 8, 128, 4099, false, true},
      {"DecodeTilesNoRowSeesAKey", 3, 32, 8, 128, 300, false, false, true},
      {"BlockTilesNoRowSeesAKey", 8, 8, 2, 64, 300, false, false, true},
  };
  return shapes;
}

// ---- many sequences in one call: chunks of 0, 1, 3 and 16 rows at different cache lengths ----

// Host side of a batch of sequences, each with its own cache.
struct Sequences {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0, rows = 0;
  std::vector<int64_t> first_row, row_count, capacity;
  std::vector<std::vector<float>> keys, values;  // what each cache held before
  std::vector<int32_t> store_at, key_counts, positions;
  std::vector<float> q, k, v, q_norm, k_norm;

  int64_t row_size() const { return kv_heads * head_dim; }
};

// The caches of a batch on one device, and the chunks that point at them.
struct DeviceCaches {
  std::vector<Tensor> caches;  // keys, values of each sequence
  std::vector<CacheChunk> chunks;
};

std::shared_ptr<DeviceCaches> upload_caches(OpDevice& dev, const Sequences& s) {
  auto d = std::make_shared<DeviceCaches>();
  d->caches.reserve(2 * s.first_row.size());
  for (size_t c = 0; c < s.first_row.size(); ++c) {
    d->caches.push_back(dev.upload(s.keys[c], {s.capacity[c], s.kv_heads, s.head_dim}));
    d->caches.push_back(dev.upload(s.values[c], {s.capacity[c], s.kv_heads, s.head_dim}));
  }
  for (size_t c = 0; c < s.first_row.size(); ++c) {
    d->chunks.push_back({&d->caches[2 * c], &d->caches[2 * c + 1], s.first_row[c], s.row_count[c]});
  }
  return d;
}

// Each cache's keys and values after the batch's k and v rows are stored (k and v as given).
std::vector<std::vector<float>> reference_caches(const Sequences& s, const std::vector<float>& k) {
  std::vector<std::vector<float>> caches;
  for (size_t c = 0; c < s.first_row.size(); ++c) {
    const std::vector<int32_t> at(s.store_at.begin() + s.first_row[c],
                                  s.store_at.begin() + s.first_row[c] + s.row_count[c]);
    const auto rows_of = [&](const std::vector<float>& x) {
      return std::vector<float>(x.begin() + s.first_row[c] * s.row_size(),
                                x.begin() + (s.first_row[c] + s.row_count[c]) * s.row_size());
    };
    caches.push_back(reference::store_rows(rows_of(k), s.keys[c], at, s.row_size()));
    caches.push_back(reference::store_rows(rows_of(s.v), s.values[c], at, s.row_size()));
  }
  return caches;
}

std::string cache_name(size_t i) { return "cache " + std::to_string(i / 2) + (i % 2 ? " values" : " keys"); }

// 70 sequences of 0, 1, 3 and 16 rows (more than one launch takes) at different cache lengths,
// causal counts, and some draft-like chunks that see all their rows.
Sequences attend_sequences(bool rotated) {
  Sequences made;
  Sequences* s = &made;
  std::mt19937 rng(rotated ? 15 : 21);
  s->q_heads = 8, s->kv_heads = 2, s->head_dim = 64;
  const int64_t row_sizes[] = {1, 16, 0, 3};
  for (int64_t c = 0; c < 70; ++c) {
    const int64_t n = row_sizes[c % 4], start = (c * 37) % 300;
    // Unrotated, some caches are far larger than what is used: the attention grid follows
    // the capacity, each row's slices its own count.
    const int64_t capacity = start + n + 5 + (!rotated && c % 3 == 0 ? 700 : 0);
    s->first_row.push_back(s->rows);
    s->row_count.push_back(n);
    s->capacity.push_back(capacity);
    s->keys.push_back(random_floats(static_cast<size_t>(capacity * s->row_size()), rng, 2.0f));
    s->values.push_back(random_floats(static_cast<size_t>(capacity * s->row_size()), rng, 2.0f));
    for (int64_t i = 0; i < n; ++i) {
      s->store_at.push_back(static_cast<int32_t>(start + i));
      s->positions.push_back(static_cast<int32_t>(start + i + 40000 * (c % 2)));  // angles far from the rows
      s->key_counts.push_back(static_cast<int32_t>(c % 5 == 1 ? start + n : start + i + 1));  // causal, or all
    }
    s->rows += n;
  }
  const float scale = rotated ? 3.0f : 2.0f;
  s->q = random_floats(static_cast<size_t>(s->rows * s->q_heads * s->head_dim), rng, scale);
  s->k = random_floats(static_cast<size_t>(s->rows * s->row_size()), rng, scale);
  s->v = random_floats(static_cast<size_t>(s->rows * s->row_size()), rng);
  s->q_norm = random_floats(static_cast<size_t>(s->head_dim), rng);
  s->k_norm = random_floats(static_cast<size_t>(s->head_dim), rng);
  round_to(DType::kBF16, s->q_norm);  // the two norms in different dtypes
  return made;
}

OpCase store_and_attend_case(QkPrep prep) {
  const bool with_norm = prep == QkPrep::kNormRope;
  const LazyInputs<Sequences> s([prep] { return attend_sequences(prep != QkPrep::kNone); });
  return {"store_and_attend", std::string("70 sequences") + prep_name(prep),
          [=](OpDevice& dev) {
            const Shape q_shape = {s->rows, s->q_heads, s->head_dim}, kv_shape = {s->rows, s->kv_heads, s->head_dim};
            Tensor q = dev.upload(s->q, q_shape), k = dev.upload(s->k, kv_shape), v = dev.upload(s->v, kv_shape);
            Tensor store_at = dev.ints(s->store_at), counts = dev.ints(s->key_counts), out = dev.poisoned(q_shape);
            auto fused = upload_caches(dev, *s);
            if (prep == QkPrep::kNone) {
              return PreparedRun{[&dev, q, k, v, fused, store_at, counts, out]() mutable {
                                   dev.backend().store_and_attend(q, k, v, fused->chunks, store_at, counts, out);
                                 },
                                 [&dev, fused, out] {
                                   Outputs got{dev.read(out)};
                                   for (const Tensor& cache : fused->caches) got.push_back(dev.read(cache));
                                   return got;
                                 }};
            }
            auto norms = std::make_shared<std::vector<Tensor>>(
                std::vector<Tensor>{dev.weight(s->q_norm, DType::kBF16, {s->head_dim}),
                                    dev.weight(s->k_norm, DType::kF32, {s->head_dim}), dev.ints(s->positions)});
            auto apart = upload_caches(dev, *s);
            Tensor q_apart = dev.upload(s->q, q_shape), k_apart = dev.upload(s->k, kv_shape);
            Tensor out_apart = dev.poisoned(q_shape);
            return PreparedRun{
                [&dev, q, k, v, fused, store_at, counts, out, norms, with_norm]() mutable {
                  const QkNormRope norm_rope = with_norm ? norm_rope_of(&(*norms)[0], &(*norms)[1], &(*norms)[2])
                                                         : norm_rope_of(nullptr, nullptr, &(*norms)[2]);
                  dev.backend().store_and_attend(q, k, v, fused->chunks, store_at, counts, out, &norm_rope);
                },
                [&dev, q, k, v, fused, store_at, counts, out, norms, apart, q_apart, k_apart, out_apart,
                 with_norm]() mutable {
                  if (with_norm) {
                    apply_head_norm_rope(dev.backend(), q_apart, (*norms)[0], (*norms)[2]);
                    apply_head_norm_rope(dev.backend(), k_apart, (*norms)[1], (*norms)[2]);
                  } else {
                    apply_rope(dev.backend(), q_apart, (*norms)[2]);
                    apply_rope(dev.backend(), k_apart, (*norms)[2]);
                  }
                  dev.backend().store_and_attend(q_apart, k_apart, v, apart->chunks, store_at, counts, out_apart);
                  Outputs got{dev.read(out),     dev.read(out_apart), dev.read(q),
                              dev.read(q_apart), dev.read(k),         dev.read(k_apart)};
                  for (size_t i = 0; i < fused->caches.size(); ++i) {
                    got.push_back(dev.read(fused->caches[i]));
                    got.push_back(dev.read(apart->caches[i]));
                  }
                  return got;
                }};
          },
          [=] {
            const auto prepared = [&](const std::vector<float>& x, const std::vector<float>& norm, int64_t heads) {
              if (prep == QkPrep::kNone) return x;
              if (prep == QkPrep::kRope) return reference_rope(x, s->positions, heads, s->head_dim);
              return reference_head_norm_rope(x, norm, s->positions, heads, s->head_dim);
            };
            const std::vector<float> q = prepared(s->q, s->q_norm, s->q_heads);
            const std::vector<float> k = prepared(s->k, s->k_norm, s->kv_heads);
            const std::vector<std::vector<float>> caches = reference_caches(*s, k);
            std::vector<float> out(q.size());
            for (size_t c = 0; c < s->first_row.size(); ++c) {
              const int64_t first = s->first_row[c], n = s->row_count[c], q_row = s->q_heads * s->head_dim;
              const std::vector<float> chunk_out = reference::attention(
                  std::vector<float>(q.begin() + first * q_row, q.begin() + (first + n) * q_row), caches[2 * c],
                  caches[2 * c + 1],
                  std::vector<int32_t>(s->key_counts.begin() + first, s->key_counts.begin() + first + n), s->q_heads,
                  s->kv_heads, s->head_dim);
              std::copy(chunk_out.begin(), chunk_out.end(), out.begin() + first * q_row);
            }
            std::vector<Expected> expected = {{"out", out, 1e-4}};
            if (prep == QkPrep::kNone) {
              for (size_t i = 0; i < caches.size(); ++i) expected.push_back({cache_name(i), caches[i]});
              return expected;
            }
            expected.push_back({"out, unfused", out, 1e-4, -1, "out"});
            expected.push_back({"q", q, 1e-5});
            expected.push_back({"q, unfused", q, 1e-5, -1, "q"});
            expected.push_back({"k", k, 1e-5});
            expected.push_back({"k, unfused", k, 1e-5, -1, "k"});
            for (size_t i = 0; i < caches.size(); ++i) {
              expected.push_back({cache_name(i), caches[i], 1e-5});
              expected.push_back({cache_name(i) + ", unfused", caches[i], 1e-5, -1, cache_name(i)});
            }
            return expected;
          }};
}

// store_kv of many sequences: nothing applied to k, RoPE alone, or k's norm and RoPE; also bit for bit
// rope or head_norm_rope then store_rows.
Sequences store_sequences(bool rotated) {
  Sequences made;
  Sequences* s = &made;
  std::mt19937 rng(rotated ? 16 : 17);
  s->kv_heads = 2, s->head_dim = 64;
  for (int64_t c = 0; c < 70; ++c) {
    const int64_t n = 1 + c % 3, start = (c * 13) % 50, capacity = start + n + 2;
    s->first_row.push_back(s->rows);
    s->row_count.push_back(n);
    s->capacity.push_back(capacity);
    s->keys.push_back(random_floats(static_cast<size_t>(capacity * s->row_size()), rng));
    s->values.push_back(random_floats(static_cast<size_t>(capacity * s->row_size()), rng));
    for (int64_t i = 0; i < n; ++i) {
      s->store_at.push_back(static_cast<int32_t>(start + i));
      s->positions.push_back(static_cast<int32_t>(start + i + 1000 * c));
    }
    s->rows += n;
  }
  s->k = random_floats(static_cast<size_t>(s->rows * s->row_size()), rng, 3.0f);
  s->v = random_floats(static_cast<size_t>(s->rows * s->row_size()), rng);
  s->k_norm = random_floats(static_cast<size_t>(s->head_dim), rng);
  round_to(DType::kBF16, s->k_norm);
  return made;
}

OpCase store_kv_case(QkPrep prep) {
  const bool with_norm = prep == QkPrep::kNormRope, with_rope = prep != QkPrep::kNone;
  const LazyInputs<Sequences> s([with_rope] { return store_sequences(with_rope); });
  return {"store_kv", std::string("70 sequences") + (with_norm ? ", k norm and RoPE" : prep_name(prep)),
          [=](OpDevice& dev) {
            const Shape kv_shape = {s->rows, s->kv_heads, s->head_dim};
            Tensor k = dev.upload(s->k, kv_shape), v = dev.upload(s->v, kv_shape), store_at = dev.ints(s->store_at);
            auto norms = std::make_shared<std::vector<Tensor>>(
                std::vector<Tensor>{dev.weight(s->k_norm, DType::kBF16, {s->head_dim}), dev.ints(s->positions)});
            auto fused = upload_caches(dev, *s), apart = upload_caches(dev, *s);
            Tensor k_apart = dev.upload(s->k, kv_shape);
            return PreparedRun{
                [&dev, k, v, fused, store_at, norms, with_norm, with_rope] {
                  const QkNormRope norm_rope = norm_rope_of(nullptr, with_norm ? &(*norms)[0] : nullptr, &(*norms)[1]);
                  dev.backend().store_kv(k, v, fused->chunks, store_at, with_rope ? &norm_rope : nullptr);
                },
                [&dev, v, store_at, norms, apart, k, k_apart, fused, with_norm, with_rope]() mutable {
                  if (with_norm) {
                    apply_head_norm_rope(dev.backend(), k_apart, (*norms)[0], (*norms)[1]);
                  } else if (with_rope) {
                    apply_rope(dev.backend(), k_apart, (*norms)[1]);
                  }
                  for (size_t c = 0; c < apart->chunks.size(); ++c) {
                    const CacheChunk& chunk = apart->chunks[c];
                    Tensor rows_at = store_at.slice_rows(chunk.first_row, chunk.rows);
                    dev.backend().store_rows(k_apart.slice_rows(chunk.first_row, chunk.rows), *chunk.keys, rows_at);
                    dev.backend().store_rows(v.slice_rows(chunk.first_row, chunk.rows), *chunk.values, rows_at);
                  }
                  Outputs got{dev.read(k), dev.read(k_apart)};
                  for (size_t i = 0; i < fused->caches.size(); ++i) {
                    got.push_back(dev.read(fused->caches[i]));
                    got.push_back(dev.read(apart->caches[i]));
                  }
                  return got;
                }};
          },
          [=] {
            const std::vector<float> k =
                with_norm   ? reference_head_norm_rope(s->k, s->k_norm, s->positions, s->kv_heads, s->head_dim)
                : with_rope ? reference_rope(s->k, s->positions, s->kv_heads, s->head_dim)
                            : s->k;
            const std::vector<std::vector<float>> caches = reference_caches(*s, k);
            std::vector<Expected> expected = {{"k", k, 1e-5}, {"k, unfused", k, 1e-5, -1, "k"}};
            for (size_t i = 0; i < caches.size(); ++i) {
              expected.push_back({cache_name(i), caches[i], 1e-5});
              expected.push_back({cache_name(i) + ", unfused", caches[i], 1e-5, -1, cache_name(i)});
            }
            return expected;
          }};
}

}  // namespace

OpCase attention_case(const AttentionCaseShape& a) {
  struct Data {
    std::vector<float> q, k, v;
    std::vector<int32_t> counts;
  };
  const LazyInputs<Data> d([a] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(a.rows * 11 + a.keys * 3 + a.head_dim));
    made.q = random_floats(static_cast<size_t>(a.rows * a.q_heads * a.head_dim), rng, 2.0f);
    made.k = random_floats(static_cast<size_t>(a.keys * a.kv_heads * a.head_dim), rng, 2.0f);
    made.v = random_floats(static_cast<size_t>(a.keys * a.kv_heads * a.head_dim), rng);
    made.counts.assign(static_cast<size_t>(a.rows), static_cast<int32_t>(a.keys));
    if (!a.same_count) {
      std::uniform_int_distribution<int32_t> count(0, static_cast<int32_t>(a.keys));
      for (int32_t& n : made.counts) n = count(rng);
      made.counts[0] = static_cast<int32_t>(a.keys);
      if (a.rows > 2) made.counts[1] = 0;  // a row that sees nothing gets zeros
      if (a.rows > 3) made.counts[2] = 1;
    }
    if (a.no_keys) std::fill(made.counts.begin(), made.counts.end(), 0);
    round_to(a.cache_dtype, made.k);
    round_to(a.cache_dtype, made.v);
    return made;
  });
  const Shape q_shape = {a.rows, a.q_heads, a.head_dim}, kv_shape = {a.keys, a.kv_heads, a.head_dim};
  return {"attention", a.name,
          [=](OpDevice& dev) {
            Tensor q = dev.upload(d->q, DType::kF32, q_shape, a.misaligned_q);
            Tensor k = dev.upload(d->k, a.cache_dtype, kv_shape), v = dev.upload(d->v, a.cache_dtype, kv_shape);
            Tensor counts = dev.ints(d->counts);
            Tensor out = dev.poisoned(q_shape), again = dev.poisoned(q_shape);
            return PreparedRun{
                [&dev, q, k, v, counts, out]() mutable { dev.backend().attention(q, k, v, counts, out); },
                // Again: a GPU's slice counters must be back at zero, or no block
                // would merge this time.
                [&dev, q, k, v, counts, out, again]() mutable {
                  dev.backend().attention(q, k, v, counts, again);
                  return Outputs{dev.read(out), dev.read(again)};
                }};
          },
          [=] {
            const std::vector<float> out =
                reference::attention(d->q, d->k, d->v, d->counts, a.q_heads, a.kv_heads, a.head_dim);
            return std::vector<Expected>{{"out", out, 1e-4}, {"out of a second call", out, 1e-4, -1, "out"}};
          }};
}

std::vector<OpCase> attention_op_cases() {
  struct Heads {
    int64_t rows, heads, head_dim;
  };
  std::vector<OpCase> cases;
  for (const Heads h : {Heads{1, 32, 128}, Heads{16, 8, 128}, Heads{7, 4, 16}, Heads{33, 3, 10}, Heads{300, 2, 64}}) {
    cases.push_back(rope_case(h.rows, h.heads, h.head_dim));
  }
  // Qwen3's shapes and odd ones, every weight dtype; rows at scattered positions.
  for (const Heads h : {Heads{1, 32, 128}, Heads{16, 8, 128}, Heads{7, 3, 10}, Heads{33, 2, 64}, Heads{5, 4, 7}}) {
    for (DType dtype : {DType::kF32, DType::kBF16})
      cases.push_back(head_norm_rope_case(dtype, h.rows, h.heads, h.head_dim));
  }
  for (const AttentionCaseShape& shape : attention_shapes()) cases.push_back(attention_case(shape));
  // A bf16 cache: keys and values widened as they are read, in each kernel's shape.
  for (const char* name : {"DecodeGqa4", "BlockGqa2", "PerRowCountsGqa4", "MhaOddHeadDim", "LongContext",
                           "HeadDim18OneRowKernel", "MisalignedDecodeOneRowKernel", "VerifyBlockLongContext"}) {
    for (AttentionCaseShape shape : attention_shapes()) {
      if (shape.name != name) continue;
      shape.name += "Bf16Cache";
      shape.cache_dtype = DType::kBF16;
      cases.push_back(attention_case(shape));
    }
  }
  for (QkPrep prep : {QkPrep::kNone, QkPrep::kNormRope, QkPrep::kRope}) cases.push_back(store_and_attend_case(prep));
  for (QkPrep prep : {QkPrep::kNormRope, QkPrep::kNone, QkPrep::kRope}) cases.push_back(store_kv_case(prep));
  for (OpCase& c : gptoss_attention_op_cases()) cases.push_back(std::move(c));
  for (OpCase& c : paged_attention_op_cases()) cases.push_back(std::move(c));
  return cases;
}

}  // namespace flashq
