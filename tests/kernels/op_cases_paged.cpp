// The table's cases for paged attention (AttentionOptions::block_table and CacheChunk's block
// table, kernels/backend.h): keys and values held in a store of blocks, position p of a sequence
// at row table[p / B] * B + p % B. Each case is held to the plain reference's attention over the
// same keys gathered contiguously (op_reference.h), so the store's other rows, random, must never
// be read. Block sizes 1, 8, 12 (not a multiple of 8), 16 and 32; tables in shuffled order; rows
// whose counts end mid-block, on a block's end, or at 0; GQA groups of 1, 2 and 4; head dims 64
// and 128; sinks; a sliding window over a table whose blocks before the window are given back
// (-1, never read: worker/model/window_table.h). store_and_attend runs 67 sequences (more than one GPU launch takes), each with
// its own table over ONE shared store, its new rows stored at absolute rows of that store, with
// nothing applied to q and k, or the q/k norm and RoPE. Tolerances as the other attention cases':
// attention 1e-4, the q/k norm and RoPE 1e-5, values stored exact.
#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_reference.h"

namespace flashq {
namespace {

constexpr float kEps = 1e-6f, kTheta = 1e6f;

// Every block of a store of `blocks`, in a shuffled order: tables take slices of it, so no two
// sequences share a block and none lists its blocks in store order.
std::vector<int32_t> shuffled_blocks(int64_t blocks, std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

// The store rows holding positions [0, positions) of a sequence with `table` (row 0 for a block
// given back: a window never reads it).
std::vector<int32_t> rows_of_positions(const std::vector<int32_t>& table, int64_t block_size, int64_t positions) {
  std::vector<int32_t> rows;
  for (int64_t p = 0; p < positions; ++p) {
    const int32_t block = table[static_cast<size_t>(p / block_size)];
    rows.push_back(block < 0 ? 0 : static_cast<int32_t>(block * block_size + p % block_size));
  }
  return rows;
}

// ---- attention with one block table ----

struct PagedShape {
  std::string name;
  int64_t q_heads, kv_heads, head_dim, block_size;
  std::vector<int32_t> counts;  // per row; every block they reach is in the table
  int64_t table_blocks;         // entries of the table
  int64_t spare_blocks;         // blocks of the store the table does not list
  bool sinks = false;
  int64_t window = 0;  // > 0: the blocks wholly before every row's window are given back (-1)
};

const std::vector<PagedShape>& paged_shapes() {
  static const std::vector<PagedShape> shapes = {
      {"PagedBlock1Gqa2HeadDim64", 4, 2, 64, 1, {37, 0, 1, 20, 36}, 37, 11},
      {"PagedBlock8DecodeGqa4HeadDim128", 16, 4, 128, 8, {203}, 26, 6},
      {"PagedBlock16Qwen3ShapeRows", 16, 8, 128, 16, {300, 0, 161, 16, 17, 299, 1}, 19, 13},
      {"PagedBlock32MhaHeadDim64", 4, 4, 64, 32, {100, 64, 0, 33, 1, 95}, 4, 3},
      {"PagedBlock12Gqa4HeadDim128", 8, 2, 128, 12, {150, 0, 12, 13, 149, 1, 144}, 13, 5},
      {"PagedBlock12DecodeMhaHeadDim128", 4, 4, 128, 12, {1000}, 84, 4},
      {"PagedBlock16VerifyBlockGqa2", 8, 4, 64, 16, causal_counts(16, 230), 16, 4},
      {"PagedBlock16TableBeyondTheCountsSinks", 8, 2, 64, 16, {50, 7, 0, 64}, 10, 2, true},
      // gpt-oss's sliding layers: 64 query heads over 8 KV heads of 64, a window of 128.
      {"PagedBlock16Window128GivenBackSinks", 64, 8, 64, 16, {400, 399, 300, 287}, 25, 3, true, 128},
      {"PagedBlock8Window12GivenBackVerifyBlock", 8, 2, 64, 8, causal_counts(8, 100), 14, 2, false, 12},
  };
  return shapes;
}

OpCase paged_attention_case(const PagedShape& a) {
  struct Data {
    std::vector<float> q, k, v, sinks;  // k and v: the whole store
    std::vector<int32_t> table;
  };
  const int64_t rows = static_cast<int64_t>(a.counts.size()),
                store_rows = (a.table_blocks + a.spare_blocks) * a.block_size;
  const LazyInputs<Data> d([a, rows, store_rows] {
    Data made;
    std::mt19937 rng(static_cast<unsigned>(a.block_size * 101 + a.table_blocks * 7 + a.head_dim + rows));
    made.q = random_floats(static_cast<size_t>(rows * a.q_heads * a.head_dim), rng, 2.0f);
    made.k = random_floats(static_cast<size_t>(store_rows * a.kv_heads * a.head_dim), rng, 2.0f);
    made.v = random_floats(static_cast<size_t>(store_rows * a.kv_heads * a.head_dim), rng);
    made.table = shuffled_blocks(a.table_blocks + a.spare_blocks, rng);
    made.table.resize(static_cast<size_t>(a.table_blocks));
    if (a.window > 0) {
      const int32_t fewest = *std::min_element(a.counts.begin(), a.counts.end());
      const auto given_back = static_cast<size_t>(std::max<int64_t>(0, fewest - a.window) / a.block_size);
      std::fill(made.table.begin(), made.table.begin() + static_cast<std::ptrdiff_t>(given_back), -1);
    }
    if (a.sinks) {
      made.sinks = random_floats(static_cast<size_t>(a.q_heads), rng, 3.0f);
      round_to(DType::kBF16, made.sinks);
    }
    return made;
  });
  const Shape q_shape = {rows, a.q_heads, a.head_dim}, kv_shape = {store_rows, a.kv_heads, a.head_dim};
  const std::string name = a.name + " (block " + std::to_string(a.block_size) + ")";
  return {"attention", name,
          [=](OpDevice& dev) {
            Tensor q = dev.upload(d->q, q_shape), k = dev.upload(d->k, kv_shape), v = dev.upload(d->v, kv_shape);
            Tensor counts = dev.ints(a.counts), out = dev.poisoned(q_shape), by_row = dev.poisoned(q_shape);
            // The options point at these: held as long as the run.
            auto held = std::make_shared<std::vector<Tensor>>(std::vector<Tensor>{
                dev.ints(d->table), a.sinks ? dev.weight(d->sinks, DType::kBF16, {a.q_heads}) : Tensor()});
            const int64_t block_size = a.block_size;
            const int64_t window = a.window;
            const auto options_of = [held, block_size, window] {
              return AttentionOptions{.sinks = (*held)[1].defined() ? &(*held)[1] : nullptr,
                                      .sliding_window = window,
                                      .block_table = &(*held)[0],
                                      .block_size = block_size};
            };
            return PreparedRun{[&dev, q, k, v, counts, out, options_of]() mutable {
                                 dev.backend().attention(q, k, v, counts, out, options_of());
                               },
                               // Row by row: a row's bits do not depend on the rows beside it.
                               [&dev, q, k, v, counts, out, by_row, options_of]() mutable {
                                 for (int64_t m = 0; m < q.dim(0); ++m) {
                                   Tensor row_out = by_row.slice_rows(m, 1);
                                   dev.backend().attention(q.slice_rows(m, 1), k, v, counts.slice_rows(m, 1), row_out,
                                                           options_of());
                                 }
                                 return Outputs{dev.read(out), dev.read(by_row)};
                               }};
          },
          [=] {
            const int64_t row_size = a.kv_heads * a.head_dim, positions = a.table_blocks * a.block_size;
            const std::vector<int32_t> at = rows_of_positions(d->table, a.block_size, positions);
            const std::vector<float> keys = reference::gather_rows(d->k, at, row_size);
            const std::vector<float> values = reference::gather_rows(d->v, at, row_size);
            const std::vector<float> out = reference::attention_with_options(d->q, keys, values, a.counts, a.q_heads,
                                                                             a.kv_heads, a.head_dim, d->sinks, a.window);
            return std::vector<Expected>{{"out", out, 1e-4}, {"out, row by row", out, 1e-4, -1, "out"}};
          }};
}

// ---- store_and_attend: many sequences, one store ----

enum class Prep { kNone, kNormRope };

// 67 sequences of 1, 4, 0, 3 and 16 new rows after 0 to 199 positions, each with a table of
// the blocks its positions reach (some with one entry more), all slices of one shuffled store.
struct PagedSequences {
  int64_t q_heads = 8, kv_heads = 2, head_dim = 64, block_size = 0, rows = 0, store_blocks = 0;
  std::vector<int64_t> first_row, row_count, positions_after;  // positions_after: start + new rows
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> keys, values;  // the store before
  std::vector<float> q, k, v, q_norm, k_norm;
  std::vector<int32_t> store_at, positions, key_counts;
  int64_t row_size() const { return kv_heads * head_dim; }
};

PagedSequences paged_sequences(int64_t block_size, bool rotated) {
  PagedSequences s;
  s.block_size = block_size;
  std::mt19937 rng(static_cast<unsigned>(57 + block_size + (rotated ? 1 : 0)));
  const int64_t sizes[] = {1, 4, 0, 3, 16};
  std::vector<int64_t> table_lengths;
  for (int64_t c = 0; c < 67; ++c) {
    const int64_t n = sizes[c % 5], start = (c * 37) % 200, end = start + n;
    s.first_row.push_back(s.rows);
    s.row_count.push_back(n);
    s.positions_after.push_back(end);
    table_lengths.push_back((end + block_size - 1) / block_size + (c % 3 == 0 ? 1 : 0));
    s.store_blocks += table_lengths.back();
    s.rows += n;
  }
  s.store_blocks += 7;  // blocks no sequence holds
  const std::vector<int32_t> order = shuffled_blocks(s.store_blocks, rng);
  size_t taken = 0;
  for (int64_t c = 0; c < 67; ++c) {
    const auto length = static_cast<size_t>(table_lengths[static_cast<size_t>(c)]);
    s.tables.emplace_back(order.begin() + static_cast<int64_t>(taken),
                          order.begin() + static_cast<int64_t>(taken + length));
    taken += length;
    const int64_t n = s.row_count[static_cast<size_t>(c)], start = s.positions_after[static_cast<size_t>(c)] - n;
    const std::vector<int32_t> rows = rows_of_positions(s.tables.back(), block_size, start + n);
    for (int64_t i = 0; i < n; ++i) {
      s.store_at.push_back(rows[static_cast<size_t>(start + i)]);
      s.positions.push_back(static_cast<int32_t>(start + i));
      s.key_counts.push_back(static_cast<int32_t>(c % 5 == 1 ? start + n : start + i + 1));  // all, or causal
    }
  }
  const int64_t store_rows = s.store_blocks * block_size;
  s.keys = random_floats(static_cast<size_t>(store_rows * s.row_size()), rng, 2.0f);
  s.values = random_floats(static_cast<size_t>(store_rows * s.row_size()), rng, 2.0f);
  const float scale = rotated ? 3.0f : 2.0f;
  s.q = random_floats(static_cast<size_t>(s.rows * s.q_heads * s.head_dim), rng, scale);
  s.k = random_floats(static_cast<size_t>(s.rows * s.row_size()), rng, scale);
  s.v = random_floats(static_cast<size_t>(s.rows * s.row_size()), rng);
  s.q_norm = random_floats(static_cast<size_t>(s.head_dim), rng);
  s.k_norm = random_floats(static_cast<size_t>(s.head_dim), rng);
  round_to(DType::kBF16, s.q_norm);
  return s;
}

// One store on a device and the chunks, each with its table, that share it.
struct PagedStore {
  Tensor keys, values;
  std::vector<Tensor> tables;
  std::vector<CacheChunk> chunks;
};

std::shared_ptr<PagedStore> upload_paged_store(OpDevice& dev, const PagedSequences& s) {
  auto store = std::make_shared<PagedStore>();
  const Shape shape = {s.store_blocks * s.block_size, s.kv_heads, s.head_dim};
  store->keys = dev.upload(s.keys, shape);
  store->values = dev.upload(s.values, shape);
  store->tables.reserve(s.tables.size());  // chunks point into it
  for (size_t c = 0; c < s.tables.size(); ++c) {
    store->tables.push_back(dev.ints(s.tables[c]));
    store->chunks.push_back(
        {&store->keys, &store->values, s.first_row[c], s.row_count[c], &store->tables.back(), s.block_size});
  }
  return store;
}

OpCase paged_store_and_attend_case(int64_t block_size, Prep prep) {
  const bool with_norm = prep == Prep::kNormRope;
  const LazyInputs<PagedSequences> s([block_size, with_norm] { return paged_sequences(block_size, with_norm); });
  const std::string name = "67 sequences over one paged store (block " + std::to_string(block_size) + ")" +
                           (with_norm ? ", q/k norm and RoPE" : "");
  return {"store_and_attend", name,
          [=](OpDevice& dev) {
            const Shape q_shape = {s->rows, s->q_heads, s->head_dim}, kv_shape = {s->rows, s->kv_heads, s->head_dim};
            Tensor q = dev.upload(s->q, q_shape), k = dev.upload(s->k, kv_shape), v = dev.upload(s->v, kv_shape);
            Tensor q_apart = dev.upload(s->q, q_shape), k_apart = dev.upload(s->k, kv_shape);
            Tensor store_at = dev.ints(s->store_at), counts = dev.ints(s->key_counts);
            Tensor out = dev.poisoned(q_shape), out_apart = dev.poisoned(q_shape);
            auto norms = std::make_shared<std::vector<Tensor>>(
                std::vector<Tensor>{dev.weight(s->q_norm, DType::kBF16, {s->head_dim}),
                                    dev.weight(s->k_norm, DType::kF32, {s->head_dim}), dev.ints(s->positions)});
            auto fused = upload_paged_store(dev, *s), apart = upload_paged_store(dev, *s);
            const auto norm_rope_of = [norms] {
              return QkNormRope{&(*norms)[0], &(*norms)[1], &(*norms)[2], kEps, {kTheta}};
            };
            return PreparedRun{
                [&dev, q, k, v, fused, store_at, counts, out, norm_rope_of, with_norm]() mutable {
                  const QkNormRope norm_rope = norm_rope_of();
                  dev.backend().store_and_attend(q, k, v, fused->chunks, store_at, counts, out,
                                                 with_norm ? &norm_rope : nullptr);
                },
                // Unfused: the norms, store_kv, then attention sequence by sequence through its table.
                [&dev, v, fused, apart, q_apart, k_apart, store_at, counts, out, out_apart, norms, with_norm,
                 block_size]() mutable {
                  if (with_norm) {
                    dev.backend().head_norm_rope(q_apart, (*norms)[0], kEps, (*norms)[2], kTheta);
                    dev.backend().head_norm_rope(k_apart, (*norms)[1], kEps, (*norms)[2], kTheta);
                  }
                  dev.backend().store_kv(k_apart, v, apart->chunks, store_at);
                  for (const CacheChunk& chunk : apart->chunks) {
                    Tensor chunk_out = out_apart.slice_rows(chunk.first_row, chunk.rows);
                    dev.backend().attention(q_apart.slice_rows(chunk.first_row, chunk.rows), apart->keys, apart->values,
                                            counts.slice_rows(chunk.first_row, chunk.rows), chunk_out,
                                            {.block_table = chunk.block_table, .block_size = block_size});
                  }
                  return Outputs{dev.read(out),         dev.read(out_apart),     dev.read(fused->keys),
                                 dev.read(apart->keys), dev.read(fused->values), dev.read(apart->values)};
                }};
          },
          [=] {
            const int64_t q_row = s->q_heads * s->head_dim;
            const std::vector<float> q = with_norm ? reference::head_norm_rope(s->q, s->q_norm, s->positions,
                                                                               s->q_heads, s->head_dim, kEps, kTheta)
                                                   : s->q;
            const std::vector<float> k = with_norm ? reference::head_norm_rope(s->k, s->k_norm, s->positions,
                                                                               s->kv_heads, s->head_dim, kEps, kTheta)
                                                   : s->k;
            // store_at rows are rows of the store: the new rows land there, whatever sequence they are of.
            const std::vector<float> keys = reference::store_rows(k, s->keys, s->store_at, s->row_size());
            const std::vector<float> values = reference::store_rows(s->v, s->values, s->store_at, s->row_size());
            std::vector<float> out(q.size());
            for (size_t c = 0; c < s->tables.size(); ++c) {
              const int64_t first = s->first_row[c], n = s->row_count[c];
              const std::vector<int32_t> at = rows_of_positions(s->tables[c], s->block_size, s->positions_after[c]);
              const std::vector<float> chunk_out = reference::attention(
                  std::vector<float>(q.begin() + first * q_row, q.begin() + (first + n) * q_row),
                  reference::gather_rows(keys, at, s->row_size()), reference::gather_rows(values, at, s->row_size()),
                  std::vector<int32_t>(s->key_counts.begin() + first, s->key_counts.begin() + first + n), s->q_heads,
                  s->kv_heads, s->head_dim);
              std::copy(chunk_out.begin(), chunk_out.end(), out.begin() + first * q_row);
            }
            const double key_tolerance = with_norm ? 1e-5 : 0.0;
            return std::vector<Expected>{{"out", out, 1e-4},
                                         {"out, unfused", out, 1e-4, -1, "out"},
                                         {"store keys", keys, key_tolerance},
                                         {"store keys, unfused", keys, key_tolerance, -1, "store keys"},
                                         {"store values", values},
                                         {"store values, unfused", values, 0.0, -1, "store values"}};
          }};
}

}  // namespace

std::vector<OpCase> paged_attention_op_cases() {
  std::vector<OpCase> cases;
  for (const PagedShape& shape : paged_shapes()) cases.push_back(paged_attention_case(shape));
  cases.push_back(paged_store_and_attend_case(16, Prep::kNone));
  cases.push_back(paged_store_and_attend_case(16, Prep::kNormRope));
  cases.push_back(paged_store_and_attend_case(12, Prep::kNormRope));
  return cases;
}

}  // namespace flashq
