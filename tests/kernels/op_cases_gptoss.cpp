// The table's cases for what gpt-oss adds to the attention ops: attention sinks (f32 and bf16)
// and sliding windows over ring caches (AttentionOptions, kernels/backend.h) in attention and
// store_and_attend, and YaRN RoPE in every path that rotates (rope, head_norm_rope,
// store_and_attend and store_kv); and key starts (a first key per row: a DFlash drafter's
// windows, docs/dflash.md §2.5) in attention and store_and_attend. References: tests/kernels/op_reference.h, written
// from Hugging Face's gpt-oss attention and _compute_yarn_parameters. Tolerances as the other cases': attention 1e-4,
// RoPE 1e-4, with the norm 1e-5; values stored exact.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

// ---- YaRN settings and their reference frequencies ----

struct Yarn {
  std::string name;
  RopeOptions rope;
  double attention_factor;  // what the reference multiplies cos and sin by
};

std::vector<Yarn> yarn_settings() {
  // gpt-oss-20b / 120b (config.json's rope_scaling): the ramp's ends not rounded.
  const RopeOptions gpt_oss{.theta = 150000.0f,
                            .scaling = RopeScaling::kYarn,
                            .factor = 32.0f,
                            .original_max_position = 4096.0f,
                            .beta_fast = 32.0f,
                            .beta_slow = 1.0f,
                            .truncate = false};
  // Qwen3's documented long-context setting (factor 4 over 32768), ends rounded (HF's default).
  const RopeOptions qwen3{
      .theta = 1000000.0f, .scaling = RopeScaling::kYarn, .factor = 4.0f, .original_max_position = 32768.0f};
  RopeOptions given = gpt_oss;  // an attention factor given by the config
  given.attention_factor = 1.25f;
  given.truncate = true;
  return {{"yarn x32 (gpt-oss)", gpt_oss, reference::yarn_attention_factor(32.0)},
          {"yarn x4 truncated (Qwen3)", qwen3, reference::yarn_attention_factor(4.0)},
          {"yarn attention factor 1.25", given, 1.25}};
}

std::vector<double> yarn_frequencies(const RopeOptions& r, int64_t head_dim) {
  return reference::yarn_inverse_frequencies(r.theta, head_dim, r.factor, r.beta_fast, r.beta_slow,
                                             r.original_max_position, r.truncate);
}

std::vector<float> yarn_rope(const Yarn& yarn, const std::vector<float>& x, const std::vector<int32_t>& positions,
                             int64_t heads, int64_t head_dim) {
  return reference::rope_with_frequencies(x, positions, heads, head_dim, yarn_frequencies(yarn.rope, head_dim),
                                          yarn.attention_factor);
}

std::vector<int32_t> scattered_positions(int64_t rows, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> position(0, 131071);  // gpt-oss's whole context
  std::vector<int32_t> positions;
  for (int64_t r = 0; r < rows; ++r) positions.push_back(r == 0 ? 0 : position(rng));
  return positions;
}

// ---- rope and head_norm_rope with YaRN ----

OpCase yarn_rope_case(const Yarn& yarn, int64_t rows, int64_t heads, int64_t head_dim) {
  struct Data {
    std::vector<float> x;
    std::vector<int32_t> positions;
  };
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(rows * 5 + heads * 3 + head_dim + 11));
  d->x = random_floats(static_cast<size_t>(rows * heads * head_dim), rng);
  d->positions = scattered_positions(rows, rng);
  return {"rope",
          yarn.name + " rows=" + std::to_string(rows) + " heads=" + std::to_string(heads) +
              " head_dim=" + std::to_string(head_dim),
          [=, rope = yarn.rope](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {rows, heads, head_dim}), positions = dev.ints(d->positions);
            return PreparedRun{[&dev, x, positions, rope]() mutable { dev.backend().rope(x, positions, rope); },
                               [&dev, x] { return Outputs{dev.read(x)}; }};
          },
          [=] {
            return std::vector<Expected>{{"x", yarn_rope(yarn, d->x, d->positions, heads, head_dim), 1e-4}};
          }};
}

OpCase yarn_head_norm_rope_case(const Yarn& yarn, int64_t rows, int64_t heads, int64_t head_dim) {
  struct Data {
    std::vector<float> x, w;
    std::vector<int32_t> positions;
  };
  constexpr float kEps = 1e-5f;
  auto d = std::make_shared<Data>();
  std::mt19937 rng(static_cast<unsigned>(31 + rows * 7 + heads + head_dim));
  d->x = random_floats(static_cast<size_t>(rows * heads * head_dim), rng, 3.0f);
  d->w = random_floats(static_cast<size_t>(head_dim), rng);
  round_to(DType::kBF16, d->w);
  d->positions = scattered_positions(rows, rng);
  return {"head_norm_rope", yarn.name + " bf16 rows=" + std::to_string(rows) + " heads=" + std::to_string(heads),
          [=, rope = yarn.rope](OpDevice& dev) {
            Tensor x = dev.upload(d->x, {rows, heads, head_dim}), w = dev.weight(d->w, DType::kBF16, {head_dim});
            Tensor positions = dev.ints(d->positions);
            return PreparedRun{
                [&dev, x, w, positions, rope]() mutable { dev.backend().head_norm_rope(x, w, kEps, positions, rope); },
                [&dev, x] { return Outputs{dev.read(x)}; }};
          },
          [=] {
            const std::vector<float> normed = reference::rmsnorm(d->x, d->w, head_dim, kEps);
            return std::vector<Expected>{{"x", yarn_rope(yarn, normed, d->positions, heads, head_dim), 1e-5}};
          }};
}

// ---- attention with sinks and a window ----

struct OptionsCase {
  std::string name;
  int64_t rows, q_heads, kv_heads, head_dim, keys;  // keys: rows of k and v (the ring, with a window)
  std::vector<int32_t> counts;                      // per row; with a window they may exceed keys
  DType sinks_dtype = DType::kF32;
  bool sinks = true;
  int64_t window = 0;
  std::vector<int32_t> starts = {};  // key starts per row (AttentionOptions::key_starts); empty: none
};

// A DFlash drafter's non-causal sliding layer: a block of `rows` at position `start` over a
// context of `start` keys and the block's own, each row seeing positions less than `window`
// away on either side: counts min(start + rows, p + window), starts max(0, p - window + 1).
std::vector<int32_t> two_sided_counts(int64_t rows, int64_t start, int64_t window) {
  std::vector<int32_t> counts;
  for (int64_t j = 0; j < rows; ++j) counts.push_back(static_cast<int32_t>(std::min(start + rows, start + j + window)));
  return counts;
}
std::vector<int32_t> two_sided_starts(int64_t rows, int64_t start, int64_t window) {
  std::vector<int32_t> starts;
  for (int64_t j = 0; j < rows; ++j)
    starts.push_back(static_cast<int32_t>(std::max<int64_t>(0, start + j - window + 1)));
  return starts;
}

const std::vector<OptionsCase>& options_cases() {
  static const std::vector<OptionsCase> cases = {
      {"SinksDecodeGqa8", 1, 16, 2, 64, 300, {300}},
      {"Bf16SinksPerRowCounts", 9, 8, 2, 64, 129, {129, 0, 1, 64, 65, 100, 2, 128, 7}, DType::kBF16},
      {"SinksOddHeadDim", 5, 4, 4, 20, 33, {33, 1, 0, 17, 32}},
      {"WindowRingDecode", 1, 16, 2, 64, 160, {1000}, DType::kF32, false, 128},
      {"WindowRingSinksBlock", 16, 8, 2, 64, 144, causal_counts(16, 990), DType::kBF16, true, 128},
      {"WindowWiderThanCounts", 8, 8, 2, 64, 200, {0, 1, 5, 127, 128, 129, 200, 90}, DType::kF32, true, 128},
      {"WindowOddHeadDimWrap", 7, 6, 3, 20, 9, {50, 51, 52, 53, 0, 3, 9}, DType::kF32, true, 7},
      {"WindowOfOne", 6, 4, 2, 64, 4, {1, 2, 3, 4, 5, 900}, DType::kF32, false, 1},
      {"GptOssShapeWindow128", 4, 64, 8, 64, 132, causal_counts(4, 4093), DType::kBF16, true, 128},
      {"KeyStartsTwoSidedDraftBlock", 16, 8, 2, 64, 316, two_sided_counts(16, 300, 40), DType::kF32, false, 0,
       two_sided_starts(16, 300, 40)},
      {"KeyStartsNarrowWindowBlock", 16, 4, 4, 20, 70, two_sided_counts(16, 54, 6), DType::kF32, false, 0,
       two_sided_starts(16, 54, 6)},
      {"KeyStartsPastCountsAndSinks", 5, 4, 2, 64, 40, {40, 10, 0, 30, 40}, DType::kBF16, true, 0, {0, 10, 0, 31, 39}},
      {"KeyStartsInsideWindowRing",
       6,
       8,
       2,
       64,
       144,
       causal_counts(6, 700),
       DType::kF32,
       true,
       128,
       {0, 650, 690, 600, 705, 580}},
  };
  return cases;
}

OpCase attention_options_case(const OptionsCase& a) {
  struct Data {
    std::vector<float> q, k, v, sinks;
  };
  const LazyInputs<Data> d([a] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(a.rows * 13 + a.keys * 5 + a.head_dim + a.window));
    made.q = random_floats(static_cast<size_t>(a.rows * a.q_heads * a.head_dim), rng, 2.0f);
    made.k = random_floats(static_cast<size_t>(a.keys * a.kv_heads * a.head_dim), rng, 2.0f);
    made.v = random_floats(static_cast<size_t>(a.keys * a.kv_heads * a.head_dim), rng);
    if (a.sinks) {
      // Around the scores' range, some far above (the sink takes most of the weight).
      made.sinks = random_floats(static_cast<size_t>(a.q_heads), rng, 3.0f);
      made.sinks[0] = 8.0f;
      round_to(a.sinks_dtype, made.sinks);
    }
    return made;
  });
  const Shape q_shape = {a.rows, a.q_heads, a.head_dim}, kv_shape = {a.keys, a.kv_heads, a.head_dim};
  const std::string name =
      a.name + (a.sinks ? std::string(", ") + std::string(dtype_name(a.sinks_dtype)) + " sinks" : "") +
      (a.window > 0 ? ", window " + std::to_string(a.window) : "") + (a.starts.empty() ? "" : ", key starts");
  return {"attention", name,
          [=](OpDevice& dev) {
            Tensor q = dev.upload(d->q, q_shape), k = dev.upload(d->k, kv_shape), v = dev.upload(d->v, kv_shape);
            Tensor counts = dev.ints(a.counts), out = dev.poisoned(q_shape), by_row = dev.poisoned(q_shape);
            auto sinks =
                std::make_shared<Tensor>(a.sinks ? dev.weight(d->sinks, a.sinks_dtype, {a.q_heads}) : Tensor());
            const int64_t window = a.window;
            auto starts = std::make_shared<Tensor>(a.starts.empty() ? Tensor() : dev.ints(a.starts));
            return PreparedRun{[&dev, q, k, v, counts, out, sinks, window, starts]() mutable {
                                 AttentionOptions options{sinks->defined() ? sinks.get() : nullptr, window};
                                 options.key_starts = starts->defined() ? starts.get() : nullptr;
                                 dev.backend().attention(q, k, v, counts, out, options);
                               },
                               // Row by row: a row's bits do not depend on the rows beside it (a verification
                               // block gives the bits of decoding).
                               [&dev, q, k, v, counts, out, by_row, sinks, window, starts]() mutable {
                                 AttentionOptions options{sinks->defined() ? sinks.get() : nullptr, window};
                                 for (int64_t m = 0; m < q.dim(0); ++m) {
                                   Tensor row_out = by_row.slice_rows(m, 1);
                                   const Tensor row_start = starts->defined() ? starts->slice_rows(m, 1) : Tensor();
                                   options.key_starts = starts->defined() ? &row_start : nullptr;
                                   dev.backend().attention(q.slice_rows(m, 1), k, v, counts.slice_rows(m, 1), row_out,
                                                           options);
                                 }
                                 return Outputs{dev.read(out), dev.read(by_row)};
                               }};
          },
          [=] {
            const std::vector<float> out = reference::attention_with_options(
                d->q, d->k, d->v, a.counts, a.q_heads, a.kv_heads, a.head_dim, d->sinks, a.window, a.starts);
            return std::vector<Expected>{{"out", out, 1e-4}, {"out, row by row", out, 1e-4, -1, "out"}};
          }};
}

// ---- store_and_attend and store_kv: many sequences with ring caches ----

// 70 sequences of 1, 4, 0, 3 and 16 new rows (more than one GPU launch takes) at scattered
// positions. With a window, each cache is a ring of window + 16 rows (a block of 16 never
// overwrites a key it attends), stored at position % capacity, and counts go far past it;
// without, each cache holds every position. Causal counts, and some draft-like chunks whose rows
// see the whole block.
struct RingSequences {
  int64_t q_heads = 8, kv_heads = 2, head_dim = 64, rows = 0, window = 0;
  std::vector<int64_t> first_row, row_count, capacity;
  std::vector<std::vector<float>> keys, values;  // each cache's contents before
  std::vector<float> q, k, v, sinks;
  std::vector<int32_t> store_at, positions, key_counts;
  std::vector<int32_t> key_starts;  // per row: its position less 5 (a window of 6 behind), for the key-starts case
  int64_t row_size() const { return kv_heads * head_dim; }
};

RingSequences ring_sequences(int64_t window) {
  RingSequences s;
  s.window = window;
  std::mt19937 rng(static_cast<unsigned>(91 + window));
  const int64_t sizes[] = {1, 4, 0, 3, 16};
  for (int64_t c = 0; c < 70; ++c) {
    const int64_t n = sizes[c % 5];
    const int64_t start = window > 0 ? (c * 997) % 5000 : (c * 37) % 300;
    const int64_t capacity = window > 0 ? window + 16 : start + n + 3;
    s.first_row.push_back(s.rows);
    s.row_count.push_back(n);
    s.capacity.push_back(capacity);
    s.keys.push_back(random_floats(static_cast<size_t>(capacity * s.row_size()), rng, 2.0f));
    s.values.push_back(random_floats(static_cast<size_t>(capacity * s.row_size()), rng, 2.0f));
    for (int64_t i = 0; i < n; ++i) {
      s.store_at.push_back(static_cast<int32_t>((start + i) % capacity));
      s.positions.push_back(static_cast<int32_t>(start + i));
      s.key_counts.push_back(static_cast<int32_t>(c % 7 == 1 ? start + n : start + i + 1));
      s.key_starts.push_back(static_cast<int32_t>(std::max<int64_t>(0, start + i - 5)));
    }
    s.rows += n;
  }
  s.q = random_floats(static_cast<size_t>(s.rows * s.q_heads * s.head_dim), rng, 2.0f);
  s.k = random_floats(static_cast<size_t>(s.rows * s.row_size()), rng, 2.0f);
  s.v = random_floats(static_cast<size_t>(s.rows * s.row_size()), rng);
  s.sinks = random_floats(static_cast<size_t>(s.q_heads), rng, 3.0f);
  round_to(DType::kBF16, s.sinks);
  return s;
}

struct RingCaches {
  std::vector<Tensor> tensors;  // keys and values of each sequence, in turn
  std::vector<CacheChunk> chunks;
};

std::shared_ptr<RingCaches> upload_ring_caches(OpDevice& dev, const RingSequences& s) {
  auto caches = std::make_shared<RingCaches>();
  caches->tensors.reserve(2 * s.first_row.size());  // chunks point into it
  for (size_t c = 0; c < s.first_row.size(); ++c) {
    caches->tensors.push_back(dev.upload(s.keys[c], {s.capacity[c], s.kv_heads, s.head_dim}));
    caches->tensors.push_back(dev.upload(s.values[c], {s.capacity[c], s.kv_heads, s.head_dim}));
    caches->chunks.push_back({&caches->tensors[2 * c], &caches->tensors[2 * c + 1], s.first_row[c], s.row_count[c]});
  }
  return caches;
}

std::vector<std::vector<float>> reference_ring_caches(const RingSequences& s, const std::vector<float>& k) {
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

std::string ring_cache_name(size_t i) { return "cache " + std::to_string(i / 2) + (i % 2 ? " values" : " keys"); }

// What store_and_attend is given: sinks or not, a window or not, YaRN RoPE (gpt-oss: no q/k norm)
// or nothing applied.
struct StoreAttendCase {
  bool sinks;
  int64_t window;
  bool yarn;
  bool key_starts = false;  // AttentionOptions::key_starts over every row (sliced per chunk apart)
};

OpCase options_store_and_attend_case(StoreAttendCase sc) {
  const LazyInputs<RingSequences> s([sc] { return ring_sequences(sc.window); });
  const Yarn yarn = yarn_settings()[0];
  const std::string name = std::string("70 sequences") + (sc.sinks ? ", bf16 sinks" : "") +
                           (sc.window > 0 ? ", window " + std::to_string(sc.window) + " over rings" : "") +
                           (sc.yarn ? ", RoPE " + yarn.name : "") + (sc.key_starts ? ", key starts" : "");
  return {"store_and_attend", name,
          [=](OpDevice& dev) {
            const Shape q_shape = {s->rows, s->q_heads, s->head_dim}, kv_shape = {s->rows, s->kv_heads, s->head_dim};
            Tensor q = dev.upload(s->q, q_shape), k = dev.upload(s->k, kv_shape), v = dev.upload(s->v, kv_shape);
            Tensor q_apart = dev.upload(s->q, q_shape), k_apart = dev.upload(s->k, kv_shape);
            Tensor store_at = dev.ints(s->store_at), counts = dev.ints(s->key_counts);
            Tensor out = dev.poisoned(q_shape), out_apart = dev.poisoned(q_shape);
            auto held = std::make_shared<std::vector<Tensor>>(std::vector<Tensor>{
                dev.ints(s->positions), sc.sinks ? dev.weight(s->sinks, DType::kBF16, {s->q_heads}) : Tensor(),
                sc.key_starts ? dev.ints(s->key_starts) : Tensor()});
            auto fused = upload_ring_caches(dev, *s), apart = upload_ring_caches(dev, *s);
            const RopeOptions rope = yarn.rope;
            const int64_t window = sc.window;
            const bool with_rope = sc.yarn;
            const auto options_of = [held, window] {
              AttentionOptions options{(*held)[1].defined() ? &(*held)[1] : nullptr, window};
              options.key_starts = (*held)[2].defined() ? &(*held)[2] : nullptr;
              return options;
            };
            return PreparedRun{
                [&dev, q, k, v, fused, store_at, counts, out, held, rope, with_rope, options_of]() mutable {
                  const QkNormRope norm_rope{.positions = &(*held)[0], .rope = rope};
                  dev.backend().store_and_attend(q, k, v, fused->chunks, store_at, counts, out,
                                                 with_rope ? &norm_rope : nullptr, options_of());
                },
                // Unfused: rope, store_kv, then attention chunk by chunk, with the same options.
                [&dev, q, k, v, fused, apart, q_apart, k_apart, store_at, counts, out, out_apart, held, rope, with_rope,
                 options_of]() mutable {
                  if (with_rope) {
                    dev.backend().rope(q_apart, (*held)[0], rope);
                    dev.backend().rope(k_apart, (*held)[0], rope);
                  }
                  dev.backend().store_kv(k_apart, v, apart->chunks, store_at);
                  for (const CacheChunk& chunk : apart->chunks) {
                    Tensor chunk_out = out_apart.slice_rows(chunk.first_row, chunk.rows);
                    AttentionOptions options = options_of();
                    const Tensor chunk_starts = key_starts_of(options, chunk.first_row, chunk.rows);
                    options.key_starts = chunk_starts.defined() ? &chunk_starts : nullptr;
                    dev.backend().attention(q_apart.slice_rows(chunk.first_row, chunk.rows), *chunk.keys, *chunk.values,
                                            counts.slice_rows(chunk.first_row, chunk.rows), chunk_out, options);
                  }
                  Outputs got{dev.read(out), dev.read(out_apart)};
                  for (const Tensor& cache : fused->tensors) got.push_back(dev.read(cache));
                  return got;
                }};
          },
          [=] {
            const std::vector<float> q = sc.yarn ? yarn_rope(yarn, s->q, s->positions, s->q_heads, s->head_dim) : s->q;
            const std::vector<float> k = sc.yarn ? yarn_rope(yarn, s->k, s->positions, s->kv_heads, s->head_dim) : s->k;
            const std::vector<std::vector<float>> caches = reference_ring_caches(*s, k);
            const std::vector<float> no_sinks;
            std::vector<float> out(q.size());
            const int64_t q_row = s->q_heads * s->head_dim;
            for (size_t c = 0; c < s->first_row.size(); ++c) {
              const int64_t first = s->first_row[c], n = s->row_count[c];
              const std::vector<float> chunk_out = reference::attention_with_options(
                  std::vector<float>(q.begin() + first * q_row, q.begin() + (first + n) * q_row), caches[2 * c],
                  caches[2 * c + 1],
                  std::vector<int32_t>(s->key_counts.begin() + first, s->key_counts.begin() + first + n), s->q_heads,
                  s->kv_heads, s->head_dim, sc.sinks ? s->sinks : no_sinks, sc.window,
                  sc.key_starts ? std::vector<int32_t>(s->key_starts.begin() + first, s->key_starts.begin() + first + n)
                                : std::vector<int32_t>());
              std::copy(chunk_out.begin(), chunk_out.end(), out.begin() + first * q_row);
            }
            std::vector<Expected> expected = {{"out", out, 1e-4}, {"out, unfused", out, 1e-4, -1, "out"}};
            for (size_t i = 0; i < caches.size(); ++i) {
              expected.push_back({ring_cache_name(i), caches[i], sc.yarn && i % 2 == 0 ? 1e-4 : 0.0});
            }
            return expected;
          }};
}

// store_kv with YaRN RoPE alone into ring caches: the keys rotated, the values as they are.
OpCase yarn_store_kv_case() {
  const LazyInputs<RingSequences> s([] { return ring_sequences(128); });
  const Yarn yarn = yarn_settings()[0];
  return {"store_kv", "70 sequences into rings, RoPE " + yarn.name,
          [=, rope = yarn.rope](OpDevice& dev) {
            const Shape kv_shape = {s->rows, s->kv_heads, s->head_dim};
            Tensor k = dev.upload(s->k, kv_shape), v = dev.upload(s->v, kv_shape), store_at = dev.ints(s->store_at);
            auto positions = std::make_shared<Tensor>(dev.ints(s->positions));
            auto caches = upload_ring_caches(dev, *s);
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
            const std::vector<float> k = yarn_rope(yarn, s->k, s->positions, s->kv_heads, s->head_dim);
            std::vector<Expected> expected;
            const std::vector<std::vector<float>> caches = reference_ring_caches(*s, k);
            for (size_t i = 0; i < caches.size(); ++i) {
              expected.push_back({ring_cache_name(i), caches[i], i % 2 ? 0.0 : 1e-4});
            }
            return expected;
          }};
}

}  // namespace

std::vector<OpCase> gptoss_attention_op_cases() {
  std::vector<OpCase> cases;
  for (const Yarn& yarn : yarn_settings()) {
    cases.push_back(yarn_rope_case(yarn, 9, 8, 64));
    cases.push_back(yarn_rope_case(yarn, 17, 4, 128));
    cases.push_back(yarn_head_norm_rope_case(yarn, 9, 4, 64));
  }
  for (const OptionsCase& c : options_cases()) cases.push_back(attention_options_case(c));
  for (const StoreAttendCase sc :
       {StoreAttendCase{true, 128, true}, StoreAttendCase{false, 32, false}, StoreAttendCase{true, 0, false},
        StoreAttendCase{true, 32, true}, StoreAttendCase{false, 0, false, true}}) {
    cases.push_back(options_store_and_attend_case(sc));
  }
  cases.push_back(yarn_store_kv_case());
  return cases;
}

}  // namespace flashq
