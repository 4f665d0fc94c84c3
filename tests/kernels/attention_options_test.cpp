// Attention's options (AttentionOptions, kernels/backend.h) beyond the op table's numbers: what
// every backend refuses (sinks of the wrong size or dtype, a negative window, a cache smaller
// than the window; a block table that is not an int32 vector, a block size that does not divide
// the store, and, found when the op runs, a block id outside the store or a key count beyond the
// table), that a window still reports a key count beyond the keys only when there is none, that
// a window over a table reads only the entries it reaches, and on the CPU that the options cost the default path nothing: a sink of
// -infinity and a window covering every key give the bits of plain attention, and keys paged in
// blocks of a multiple of 8 the bits of the same keys held in one run, in attention and in a
// store_and_attend step over one paged store (what identical greedy output with a paged cache
// rests on). The CUDA runs skip where no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "tests/kernels/op_harness.h"

namespace flashq {
namespace {

enum class Which { kCpu, kCuda };

class AttentionOptionsTest : public ::testing::TestWithParam<Which> {
 protected:
  void SetUp() override {
    if (GetParam() == Which::kCuda) {
      if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
      backend_ = make_backend("cuda");
    } else {
      backend_ = make_cpu_backend();
    }
    device_ = std::make_unique<OpDevice>(*backend_);
    std::mt19937 rng(7);
    q_ = device_->upload(random_floats(4 * 8 * 16, rng), {4, 8, 16});
    k_ = device_->upload(random_floats(10 * 2 * 16, rng), {10, 2, 16});
    v_ = device_->upload(random_floats(10 * 2 * 16, rng), {10, 2, 16});
    counts_ = device_->ints({10, 3, 0, 7});
    out_ = device_->poisoned({4, 8, 16});
  }

  // The message of the Error that attention with `options` throws, or "" when it throws none.
  std::string refusal(const AttentionOptions& options) {
    try {
      backend_->attention(q_, k_, v_, counts_, out_, options);
      device_->synchronize();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<OpDevice> device_;
  Tensor q_, k_, v_, counts_, out_;
};

TEST_P(AttentionOptionsTest, RefusesSinksOfTheWrongSizeOrDtype) {
  Tensor seven = device_->weight(std::vector<float>(7, 0.5f), DType::kF32, {7});
  EXPECT_NE(refusal({.sinks = &seven}).find("one logit per query head (8)"), std::string::npos);
  Tensor two_d = device_->weight(std::vector<float>(8, 0.5f), DType::kF32, {2, 4});
  EXPECT_NE(refusal({.sinks = &two_d}).find("one logit per query head"), std::string::npos);
  Tensor half = device_->weight(std::vector<float>(8, 0.5f), DType::kF16, {8});
  EXPECT_NE(refusal({.sinks = &half}).find("f32 or bf16"), std::string::npos);
  Tensor ints = device_->ints(std::vector<int32_t>(8, 1));
  EXPECT_NE(refusal({.sinks = &ints}).find("f32 or bf16"), std::string::npos);
  Tensor right = device_->weight(std::vector<float>(8, 0.5f), DType::kBF16, {8});
  EXPECT_EQ(refusal({.sinks = &right}), "");
}

TEST_P(AttentionOptionsTest, RefusesANegativeWindowAndACacheSmallerThanTheWindow) {
  EXPECT_NE(refusal({.sliding_window = -1}).find("sliding window of -1"), std::string::npos);
  EXPECT_NE(refusal({.sliding_window = 11}).find("a cache of 10 rows cannot hold a sliding window of 11"),
            std::string::npos);
  EXPECT_EQ(refusal({.sliding_window = 10}), "");
}

TEST_P(AttentionOptionsTest, StoreAndAttendRefusesARingSmallerThanTheWindow) {
  Tensor k = device_->upload(std::vector<float>(4 * 2 * 16, 0.1f), {4, 2, 16});
  Tensor v = device_->upload(std::vector<float>(4 * 2 * 16, 0.2f), {4, 2, 16});
  Tensor keys = backend_->allocate(DType::kF32, {5, 2, 16}), values = backend_->allocate(DType::kF32, {5, 2, 16});
  const CacheChunk chunk{&keys, &values, 0, 4};
  Tensor store_at = device_->ints({0, 1, 2, 3});
  try {
    backend_->store_and_attend(q_, k, v, {&chunk, 1}, store_at, counts_, out_, nullptr, {.sliding_window = 6});
    ADD_FAILURE() << "a ring of 5 rows was taken for a window of 6";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold a sliding window of 6"), std::string::npos) << e.what();
  }
}

TEST_P(AttentionOptionsTest, KeyCountsBeyondTheKeysAreAnErrorOnlyWithoutAWindow) {
  counts_ = device_->ints({10, 11, 0, 7});
  EXPECT_NE(refusal({}).find("key count"), std::string::npos);
  EXPECT_EQ(refusal({.sliding_window = 4}), "");  // a ring: position 10 is row 0
  const std::vector<float> out = device_->read(out_);
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
}

// The fixture's keys as a paged store of 10 rows in blocks of 5: the table {1, 0} holds
// positions [0, 10), which the counts {10, 3, 0, 7} reach.
TEST_P(AttentionOptionsTest, RefusesABlockTableThatIsNotAnInt32VectorOrABlockSizeThatDoesNotDivide) {
  Tensor table = device_->ints({1, 0});
  EXPECT_EQ(refusal({.block_table = &table, .block_size = 5}), "");
  Tensor floats = device_->upload(std::vector<float>{1.0f, 0.0f}, {2});
  EXPECT_NE(refusal({.block_table = &floats, .block_size = 5}).find("int32 vector"), std::string::npos);
  Tensor matrix = backend_->allocate(DType::kI32, {1, 2});
  EXPECT_NE(refusal({.block_table = &matrix, .block_size = 5}).find("int32 vector"), std::string::npos);
  EXPECT_NE(
      refusal({.block_table = &table, .block_size = 3}).find("block size of 3 does not divide a paged store of 10"),
      std::string::npos);
  EXPECT_NE(refusal({.block_table = &table, .block_size = 0}).find("block size of 0"), std::string::npos);
}

// A windowed layer's table lists the blocks a sequence still holds, -1 for those it gave back:
// with counts that reach positions [5, 10) only through a window of 4 or 5, the first entry is
// never read; a window of 6 reaches position 4, in the block given back.
TEST_P(AttentionOptionsTest, AWindowOverABlockTableReadsOnlyTheEntriesItReaches) {
  counts_ = device_->ints({10, 10, 10, 10});
  Tensor table = device_->ints({-1, 0});
  EXPECT_NE(refusal({.block_table = &table, .block_size = 5}).find("outside the store"), std::string::npos);
  for (int64_t window : {4, 5}) {
    EXPECT_EQ(refusal({.sliding_window = window, .block_table = &table, .block_size = 5}), "") << window;
  }
  const std::vector<float> out = device_->read(out_);
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
  const std::string message = refusal({.sliding_window = 6, .block_table = &table, .block_size = 5});
  EXPECT_NE(message.find("outside the store"), std::string::npos) << message;
}

TEST_P(AttentionOptionsTest, ABlockIdOutsideTheStoreOrACountBeyondTheTableIsAnErrorWhenTheOpRuns) {
  for (const std::vector<int32_t>& ids : {std::vector<int32_t>{1, 2}, std::vector<int32_t>{-1, 0}}) {
    Tensor table = device_->ints(ids);
    const std::string message = refusal({.block_table = &table, .block_size = 5});
    EXPECT_NE(message.find("block id"), std::string::npos) << message;
    EXPECT_NE(message.find("outside the store"), std::string::npos) << message;
  }
  Tensor short_table = device_->ints({1});  // 5 positions; a count of 10 needs two blocks
  const std::string message = refusal({.block_table = &short_table, .block_size = 5});
  EXPECT_NE(message.find("beyond the block table"), std::string::npos) << message;
  // An entry no count reaches is never read.
  Tensor longer = device_->ints({1, 0, 7});
  EXPECT_EQ(refusal({.block_table = &longer, .block_size = 5}), "");
  const std::vector<float> out = device_->read(out_);
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
}

TEST_P(AttentionOptionsTest, StoreAndAttendRefusesAChunkWhoseBlockSizeDoesNotDivideItsStore) {
  Tensor k = device_->upload(std::vector<float>(4 * 2 * 16, 0.1f), {4, 2, 16});
  Tensor v = device_->upload(std::vector<float>(4 * 2 * 16, 0.2f), {4, 2, 16});
  Tensor keys = backend_->allocate(DType::kF32, {12, 2, 16}), values = backend_->allocate(DType::kF32, {12, 2, 16});
  Tensor table = device_->ints({2, 0});
  const CacheChunk chunk{&keys, &values, 0, 4, &table, 5};
  Tensor store_at = device_->ints({10, 11, 0, 1});
  try {
    backend_->store_and_attend(q_, k, v, {&chunk, 1}, store_at, counts_, out_);
    ADD_FAILURE() << "blocks of 5 were taken in a store of 12 rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide a paged store of 12"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AttentionOptionsTest, ::testing::Values(Which::kCpu, Which::kCuda),
                         [](const ::testing::TestParamInfo<Which>& p) {
                           return std::string(p.param == Which::kCpu ? "Cpu" : "Cuda");
                         });

// The CPU's options path is its default path with a different start: a sink of -infinity adds
// exp(-inf) = 0 to every total, and a window covering every key reads the keys from 0, unwrapped.
TEST(CpuAttentionOptions, InertOptionsGiveTheBitsOfPlainAttention) {
  auto backend = make_cpu_backend();
  OpDevice device(*backend);
  std::mt19937 rng(3);
  const int64_t rows = 9, q_heads = 8, kv_heads = 2, head_dim = 64, keys = 200;
  Tensor q = device.upload(random_floats(rows * q_heads * head_dim, rng), {rows, q_heads, head_dim});
  Tensor k = device.upload(random_floats(keys * kv_heads * head_dim, rng), {keys, kv_heads, head_dim});
  Tensor v = device.upload(random_floats(keys * kv_heads * head_dim, rng), {keys, kv_heads, head_dim});
  Tensor counts = device.ints({200, 0, 1, 63, 64, 65, 129, 7, 150});
  Tensor plain = device.poisoned({rows, q_heads, head_dim}), with_options = device.poisoned({rows, q_heads, head_dim});
  backend->attention(q, k, v, counts, plain);
  Tensor no_sink =
      device.weight(std::vector<float>(q_heads, -std::numeric_limits<float>::infinity()), DType::kF32, {q_heads});
  backend->attention(q, k, v, counts, with_options, {.sinks = &no_sink, .sliding_window = keys});
  const std::vector<float> a = device.read(plain), b = device.read(with_options);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "element " << i;
}

// Keys paged in blocks of 8, 16 or 32 rows, in a shuffled table over a store with blocks no
// table names, give each row the bits of the same keys held in one run: counts that end mid-block,
// on a block's end, and at 0; GQA groups of 1, 2 and 4.
TEST(CpuPagedAttention, BlocksOfAMultipleOfEightGiveTheBitsOfTheKeysInOneRun) {
  auto backend = make_cpu_backend();
  OpDevice device(*backend);
  std::mt19937 rng(11);
  struct Heads {
    int64_t q_heads, kv_heads, head_dim;
  };
  for (const Heads h : {Heads{16, 8, 128}, Heads{8, 2, 64}, Heads{4, 4, 64}}) {
    for (const int64_t block_size : {int64_t{8}, int64_t{16}, int64_t{32}}) {
      const int64_t blocks = 17, keys = blocks * block_size, row_size = h.kv_heads * h.head_dim, store_blocks = 23;
      const std::vector<int32_t> counts = {static_cast<int32_t>(keys),
                                           0,
                                           1,
                                           static_cast<int32_t>(block_size - 1),
                                           static_cast<int32_t>(block_size),
                                           static_cast<int32_t>(block_size + 1),
                                           static_cast<int32_t>(keys - 3),
                                           static_cast<int32_t>(5 * block_size + 3),
                                           130};
      const int64_t rows = static_cast<int64_t>(counts.size());
      const std::vector<float> q = random_floats(static_cast<size_t>(rows * h.q_heads * h.head_dim), rng, 2.0f);
      const std::vector<float> k = random_floats(static_cast<size_t>(keys * row_size), rng, 2.0f);
      const std::vector<float> v = random_floats(static_cast<size_t>(keys * row_size), rng);
      std::vector<int32_t> table(static_cast<size_t>(store_blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng);
      table.resize(static_cast<size_t>(blocks));
      // The store: random rows, with position p of k and v at row table[p / B] * B + p % B.
      std::vector<float> store_k = random_floats(static_cast<size_t>(store_blocks * block_size * row_size), rng);
      std::vector<float> store_v = random_floats(store_k.size(), rng);
      for (int64_t p = 0; p < keys; ++p) {
        const int64_t row = table[static_cast<size_t>(p / block_size)] * block_size + p % block_size;
        std::copy_n(k.begin() + p * row_size, row_size, store_k.begin() + row * row_size);
        std::copy_n(v.begin() + p * row_size, row_size, store_v.begin() + row * row_size);
      }
      const Shape q_shape = {rows, h.q_heads, h.head_dim};
      Tensor q_t = device.upload(q, q_shape), counts_t = device.ints(counts), table_t = device.ints(table);
      Tensor k_t = device.upload(k, {keys, h.kv_heads, h.head_dim}),
             v_t = device.upload(v, {keys, h.kv_heads, h.head_dim});
      const Shape store_shape = {store_blocks * block_size, h.kv_heads, h.head_dim};
      Tensor store_k_t = device.upload(store_k, store_shape), store_v_t = device.upload(store_v, store_shape);
      Tensor one_run = device.poisoned(q_shape), paged = device.poisoned(q_shape);
      backend->attention(q_t, k_t, v_t, counts_t, one_run);
      backend->attention(q_t, store_k_t, store_v_t, counts_t, paged,
                         {.block_table = &table_t, .block_size = block_size});
      const std::vector<float> a = device.read(one_run), b = device.read(paged);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i], b[i]) << "block " << block_size << ", heads " << h.q_heads << "/" << h.kv_heads << " of "
                              << h.head_dim << ", element " << i;
      }
    }
  }
}

// A decode and verification step as the engine runs it on a paged cache: store_and_attend with
// the q/k norm and RoPE, sequences of 1, 4, 0, 3 and 16 new rows each through its table of blocks
// of 16 over one store, against the same sequences each with a cache of its own: the same bits
// out, and the same keys and values at each sequence's positions.
TEST(CpuPagedAttention, StoreAndAttendOverAPagedStoreGivesTheBitsOfCachesOfTheirOwn) {
  auto backend = make_cpu_backend();
  OpDevice device(*backend);
  std::mt19937 rng(23);
  const int64_t q_heads = 16, kv_heads = 8, head_dim = 128, block = 16, row_size = kv_heads * head_dim;
  const std::vector<int64_t> new_rows = {1, 4, 0, 3, 16}, starts = {40, 0, 17, 100, 63};
  const int64_t sequences = static_cast<int64_t>(new_rows.size()), blocks = 12, store_blocks = sequences * blocks + 3;
  int64_t rows = 0;
  std::vector<int32_t> positions, counts, own_at, paged_at;
  std::vector<int32_t> order(static_cast<size_t>(store_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  for (int64_t s = 0; s < sequences; ++s) {
    tables.emplace_back(order.begin() + s * blocks, order.begin() + (s + 1) * blocks);
    const int64_t n = new_rows[static_cast<size_t>(s)], start = starts[static_cast<size_t>(s)];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = start + i;
      positions.push_back(static_cast<int32_t>(p));
      counts.push_back(static_cast<int32_t>(s == 1 ? start + n : p + 1));  // all of a draft block, or causal
      own_at.push_back(static_cast<int32_t>(p));
      paged_at.push_back(tables.back()[static_cast<size_t>(p / block)] * static_cast<int32_t>(block) +
                         static_cast<int32_t>(p % block));
    }
    rows += n;
  }
  const std::vector<float> q = random_floats(static_cast<size_t>(rows * q_heads * head_dim), rng, 2.0f);
  const std::vector<float> k = random_floats(static_cast<size_t>(rows * row_size), rng, 2.0f);
  const std::vector<float> v = random_floats(static_cast<size_t>(rows * row_size), rng);
  // What each sequence held before: its positions [0, start) in its cache and in its blocks.
  std::vector<float> store_k = random_floats(static_cast<size_t>(store_blocks * block * row_size), rng);
  std::vector<float> store_v = random_floats(store_k.size(), rng);
  std::vector<std::vector<float>> own_k, own_v;
  for (int64_t s = 0; s < sequences; ++s) {
    own_k.push_back(random_floats(static_cast<size_t>(blocks * block * row_size), rng));
    own_v.push_back(random_floats(own_k.back().size(), rng));
    for (int64_t p = 0; p < blocks * block; ++p) {
      const int64_t row = tables[static_cast<size_t>(s)][static_cast<size_t>(p / block)] * block + p % block;
      std::copy_n(own_k.back().begin() + p * row_size, row_size, store_k.begin() + row * row_size);
      std::copy_n(own_v.back().begin() + p * row_size, row_size, store_v.begin() + row * row_size);
    }
  }
  const Shape q_shape = {rows, q_heads, head_dim}, kv_shape = {rows, kv_heads, head_dim};
  const Shape cache_shape = {blocks * block, kv_heads, head_dim},
              store_shape = {store_blocks * block, kv_heads, head_dim};
  Tensor q_norm = device.weight(random_floats(head_dim, rng), DType::kBF16, {head_dim});
  Tensor k_norm = device.weight(random_floats(head_dim, rng), DType::kF32, {head_dim});
  Tensor positions_t = device.ints(positions), counts_t = device.ints(counts);
  const QkNormRope norm_rope{&q_norm, &k_norm, &positions_t, 1e-6f, {1e6f}};
  // Each way gets its own q and k: store_and_attend norms and rotates them in place.
  Tensor q_own = device.upload(q, q_shape), k_own = device.upload(k, kv_shape), v_t = device.upload(v, kv_shape);
  Tensor q_paged = device.upload(q, q_shape), k_paged = device.upload(k, kv_shape);
  std::vector<Tensor> caches, table_tensors;
  caches.reserve(static_cast<size_t>(2 * sequences));
  table_tensors.reserve(static_cast<size_t>(sequences));
  Tensor keys = device.upload(store_k, store_shape), values = device.upload(store_v, store_shape);
  std::vector<CacheChunk> own, paged;
  for (int64_t s = 0, first = 0; s < sequences; first += new_rows[static_cast<size_t>(s)], ++s) {
    caches.push_back(device.upload(own_k[static_cast<size_t>(s)], cache_shape));
    caches.push_back(device.upload(own_v[static_cast<size_t>(s)], cache_shape));
    table_tensors.push_back(device.ints(tables[static_cast<size_t>(s)]));
    const int64_t n = new_rows[static_cast<size_t>(s)];
    own.push_back({&caches[static_cast<size_t>(2 * s)], &caches[static_cast<size_t>(2 * s + 1)], first, n});
    paged.push_back({&keys, &values, first, n, &table_tensors.back(), block});
  }
  Tensor own_at_t = device.ints(own_at), paged_at_t = device.ints(paged_at);
  Tensor out_own = device.poisoned(q_shape), out_paged = device.poisoned(q_shape);
  backend->store_and_attend(q_own, k_own, v_t, own, own_at_t, counts_t, out_own, &norm_rope);
  backend->store_and_attend(q_paged, k_paged, v_t, paged, paged_at_t, counts_t, out_paged, &norm_rope);
  const std::vector<float> a = device.read(out_own), b = device.read(out_paged);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "out, element " << i;
  const std::vector<float> store_keys = device.read(keys), store_values = device.read(values);
  for (int64_t s = 0; s < sequences; ++s) {
    const std::vector<float> cache_k = device.read(caches[static_cast<size_t>(2 * s)]);
    const std::vector<float> cache_v = device.read(caches[static_cast<size_t>(2 * s + 1)]);
    for (int64_t p = 0; p < blocks * block; ++p) {
      const int64_t row = tables[static_cast<size_t>(s)][static_cast<size_t>(p / block)] * block + p % block;
      for (int64_t e = 0; e < row_size; ++e) {
        ASSERT_EQ(cache_k[static_cast<size_t>(p * row_size + e)], store_keys[static_cast<size_t>(row * row_size + e)])
            << "sequence " << s << ", key at position " << p;
        ASSERT_EQ(cache_v[static_cast<size_t>(p * row_size + e)], store_values[static_cast<size_t>(row * row_size + e)])
            << "sequence " << s << ", value at position " << p;
      }
    }
  }
}

}  // namespace
}  // namespace flashq
