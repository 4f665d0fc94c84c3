// What the CUDA backend must do beyond the op table (backend_ops_test runs every op's cases on
// the GPU against the reference and the CPU): a matmul row that does not depend on the rows
// beside it, a pass (and a paged decode step) captured as a CUDA graph and replayed with new
// inputs, errors that kernels find in device data and report at the next copy to the host,
// tensors from the host refused, and the attention kernel chosen by the environment.
//
// Without a CUDA device every test skips (GTEST_SKIP) saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "tests/kernels/cuda_parity_fixture.h"
#include "tests/kernels/op_cases.h"
#include "tests/kernels/op_harness.h"

namespace flashq {
namespace {

// ---- rows that do not depend on the other rows ----

// Decode (one row) and verification (blocks of up to 8 sequences, 128 rows) must give a row
// bit-identical logits, or greedy speculative decoding would not reproduce target-only decoding
// exactly.
TEST_F(CudaParity, MatmulRowDoesNotDependOnTheOtherRowsUpTo128Rows) {
  std::mt19937 rng(5);
  const int64_t m = 128, n = 200, k = 512;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<float> x = random_floats(static_cast<size_t>(m * k), rng);
    std::vector<float> w = random_floats(static_cast<size_t>(n * k), rng, 0.5f);
    Tensor x_gpu = to_gpu(host_tensor(x, DType::kF32, {m, k}));
    Tensor w_gpu = gpu_->upload_weight(host_tensor(w, dtype, {n, k}));
    Tensor block = poisoned({m, n});
    gpu_->matmul(x_gpu, w_gpu, block);
    const std::vector<float> block_values = download(block);
    for (int64_t row : {0, 5, 15, 64, 127}) {
      Tensor single = poisoned({1, n});
      gpu_->matmul(x_gpu.slice_rows(row, 1), w_gpu, single);
      const std::vector<float> single_values = download(single);
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(single_values[j], block_values[row * n + j]) << dtype_name(dtype) << " row " << row << " col " << j;
      }
    }
  }
}

// ---- CUDA graphs ----

// A pass captured as a CUDA graph and replayed with new ids, positions and key counts against
// the same pass run directly on the CPU: embedding, norm, the few-row matmul, store_and_attend
// into a cache, argmax. Then the refusals while capturing.
TEST_F(CudaParity, CapturedPassReplaysWithNewInputsAsTheCpuRunsThem) {
  std::mt19937 rng(31);
  const int64_t vocab = 300, hidden = 256, heads = 2, head_dim = 128, rows = 4;
  std::vector<float> table = random_floats(static_cast<size_t>(vocab * hidden), rng);
  std::vector<float> head = random_floats(static_cast<size_t>(vocab * hidden), rng, 0.5f);
  std::vector<float> norm = random_floats(static_cast<size_t>(hidden), rng);
  struct Run {
    Backend* backend;
    Tensor table, head, norm, ids, store_at, counts, h, q, cache, attended, logits, next;
  };
  auto make = [&](Backend& b) {
    auto on = [&](Tensor host) { return &b == gpu_.get() ? to_gpu(host) : host; };
    Run r{&b,
          on(host_tensor(table, DType::kBF16, {vocab, hidden})),
          on(host_tensor(head, DType::kBF16, {vocab, hidden})),
          on(host_tensor(norm, DType::kF32, {hidden})),
          b.allocate(DType::kI32, {rows}),
          b.allocate(DType::kI32, {rows}),
          b.allocate(DType::kI32, {rows}),
          b.allocate(DType::kF32, {rows, hidden}),
          b.allocate(DType::kF32, {rows, heads, head_dim}),
          b.allocate(DType::kF32, {rows, heads, head_dim}),
          b.allocate(DType::kF32, {rows, heads, head_dim}),
          b.allocate(DType::kF32, {rows, vocab}),
          b.allocate(DType::kI32, {rows})};
    return r;
  };
  auto pass = [](Run& r) {
    Backend& b = *r.backend;
    b.embedding(r.table, r.ids, r.h);
    b.rmsnorm(r.h, r.norm, 1e-6f, r.h);
    Tensor as_heads = r.h.reshape({rows, heads, head_dim});
    const CacheChunk chunk[] = {{&r.cache, &r.cache, 0, rows}};
    b.store_and_attend(as_heads, as_heads, as_heads, chunk, r.store_at, r.counts, r.attended);
    b.matmul(r.attended.reshape({rows, hidden}), r.head, r.logits);
    b.argmax(r.logits, r.next);
  };
  auto upload = [](Run& r, const std::vector<int32_t>& ids, const std::vector<int32_t>& counts) {
    const std::vector<int32_t> store_at = {0, 1, 2, 3};
    r.backend->copy_from_host(ids.data(), r.ids);
    r.backend->copy_from_host(store_at.data(), r.store_at);
    r.backend->copy_from_host(counts.data(), r.counts);
  };
  Run cpu = make(*cpu_), gpu = make(*gpu_);
  const std::vector<int32_t> ids_a = {5, 17, 299, 0}, ids_b = {42, 42, 7, 123};
  const std::vector<int32_t> causal = {1, 2, 3, 4}, all = {4, 4, 4, 4};
  upload(gpu, ids_a, causal);
  pass(gpu);  // once directly, so the scratch buffers have their size before capture
  std::unique_ptr<CapturedOps> graph = gpu_->capture([&] { pass(gpu); });
  for (const auto& [ids, counts] : {std::pair{ids_a, causal}, std::pair{ids_b, all}}) {
    upload(cpu, ids, counts);
    pass(cpu);
    upload(gpu, ids, counts);
    gpu_->replay(*graph);
    EXPECT_LT(normalized_error(download(gpu.logits), host_values(cpu.logits)), 1e-2);
    std::vector<int32_t> next(static_cast<size_t>(rows));
    gpu_->copy_to_host(gpu.next, next.data());
    std::vector<int32_t> want(cpu.next.data<int32_t>(), cpu.next.data<int32_t>() + rows);
    EXPECT_EQ(next, want);
  }

  std::vector<int32_t> host(static_cast<size_t>(rows));
  EXPECT_THROW(gpu_->capture([&] { gpu_->copy_from_host(host.data(), gpu.ids); }), Error);
  EXPECT_THROW(gpu_->capture([&] { gpu_->copy_to_host(gpu.ids, host.data()); }), Error);
  EXPECT_THROW(gpu_->capture([&] { gpu_->allocate(DType::kF32, {2}); }), Error);
  upload(gpu, ids_a, causal);  // the backend runs ops directly again
  pass(gpu);
  gpu_->copy_to_host(gpu.next, host.data());
}

// A paged decode step, store_and_attend of 3 sequences each through its block table over one
// shared store, captured as a CUDA graph and replayed after the tables, rows and counts change on
// the device, against the CPU running it directly: a table is read when the op runs, as the key
// counts are, so a captured step stays right as sequences take new blocks.
TEST_F(CudaParity, CapturedPagedStepReplaysWithNewBlockTables) {
  std::mt19937 rng(41);
  const int64_t sequences = 3, q_heads = 8, kv_heads = 2, head_dim = 64, block = 16, store_blocks = 24, entries = 6;
  const int64_t row_floats = kv_heads * head_dim;
  std::vector<float> q = random_floats(static_cast<size_t>(sequences * q_heads * head_dim), rng, 2.0f);
  std::vector<float> k = random_floats(static_cast<size_t>(sequences * row_floats), rng, 2.0f);
  std::vector<float> v = random_floats(static_cast<size_t>(sequences * row_floats), rng);
  std::vector<float> keys = random_floats(static_cast<size_t>(store_blocks * block * row_floats), rng, 2.0f);
  std::vector<float> values = random_floats(keys.size(), rng);
  struct Run {
    Backend* backend;
    Tensor q, k, v, keys, values, store_at, counts, out;
    std::vector<Tensor> tables;
  };
  auto make = [&](Backend& b) {
    auto on = [&](Tensor host) { return &b == gpu_.get() ? to_gpu(host) : host; };
    const Shape rows = {sequences, kv_heads, head_dim}, store = {store_blocks * block, kv_heads, head_dim};
    Run r{&b,
          on(host_tensor(q, DType::kF32, {sequences, q_heads, head_dim})),
          on(host_tensor(k, DType::kF32, rows)),
          on(host_tensor(v, DType::kF32, rows)),
          on(host_tensor(keys, DType::kF32, store)),
          on(host_tensor(values, DType::kF32, store)),
          b.allocate(DType::kI32, {sequences}),
          b.allocate(DType::kI32, {sequences}),
          b.allocate(DType::kF32, {sequences, q_heads, head_dim}),
          {}};
    for (int64_t s = 0; s < sequences; ++s) r.tables.push_back(b.allocate(DType::kI32, {entries}));
    return r;
  };
  auto pass = [](Run& r) {
    std::vector<CacheChunk> chunks;
    for (int64_t s = 0; s < sequences; ++s) {
      chunks.push_back({&r.keys, &r.values, s, 1, &r.tables[static_cast<size_t>(s)], block});
    }
    r.backend->store_and_attend(r.q, r.k, r.v, chunks, r.store_at, r.counts, r.out);
  };
  // Each sequence a slice of a shuffled order of the store's blocks; its new row at position
  // count - 1.
  auto upload = [&](Run& r, unsigned seed, const std::vector<int32_t>& counts) {
    std::vector<int32_t> order(static_cast<size_t>(store_blocks));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    std::vector<int32_t> store_at;
    for (int64_t s = 0; s < sequences; ++s) {
      const std::vector<int32_t> table(order.begin() + s * entries, order.begin() + (s + 1) * entries);
      r.backend->copy_from_host(table.data(), r.tables[static_cast<size_t>(s)]);
      const int32_t last = counts[static_cast<size_t>(s)] - 1;
      store_at.push_back(static_cast<int32_t>(table[static_cast<size_t>(last / block)] * block + last % block));
    }
    r.backend->copy_from_host(store_at.data(), r.store_at);
    r.backend->copy_from_host(counts.data(), r.counts);
  };
  Run cpu = make(*cpu_), gpu = make(*gpu_);
  upload(gpu, 1, {33, 96, 1});
  pass(gpu);  // once directly, as a step runs before it is captured
  std::unique_ptr<CapturedOps> graph = gpu_->capture([&] { pass(gpu); });
  for (const auto& [seed, counts] :
       {std::pair{1u, std::vector<int32_t>{33, 96, 1}}, std::pair{2u, std::vector<int32_t>{50, 7, 90}}}) {
    upload(cpu, seed, counts);
    pass(cpu);
    upload(gpu, seed, counts);
    gpu_->replay(*graph);
    EXPECT_LT(normalized_error(download(gpu.out), host_values(cpu.out)), 1e-4) << "tables of seed " << seed;
    EXPECT_EQ(download(gpu.keys), host_values(cpu.keys)) << "tables of seed " << seed;
  }
}

// ---- errors found on the device, inputs refused ----

TEST_F(CudaParity, EmbeddingIdOutsideTableFailsAtTheNextCopyToHost) {
  Tensor table = gpu_->allocate(DType::kBF16, {10, 8});
  Tensor out = gpu_->allocate(DType::kF32, {2, 8});
  gpu_->embedding(table, to_gpu(host_ints({3, 10})), out);
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  try {
    gpu_->copy_to_host(out, sink.data());
    FAIL() << "token id 10 of a 10-row table was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("token id 10"), std::string::npos) << e.what();
  }
  gpu_->embedding(table, to_gpu(host_ints({3, 9})), out);
  gpu_->copy_to_host(out, sink.data());  // the error was reported once; valid ids work again
}

// Chunks that do not cover q's rows are refused at the call; a row stored outside its cache is
// found on the device and fails the next copy to the host, after which the backend goes on.
TEST_F(CudaParity, StoreAndAttendRefusesChunksThatDoNotCoverTheRowsAndRowsOutsideTheCache) {
  Tensor q = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor kv = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor cache = gpu_->allocate(DType::kF32, {8, 2, 16});
  Tensor counts = to_gpu(host_ints({1, 2, 3, 4}));
  Tensor out = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor store_at = to_gpu(host_ints({5, 6, 7, 8}));
  const CacheChunk short_of_rows[] = {{&cache, &cache, 0, 3}};
  EXPECT_THROW(gpu_->store_and_attend(q, kv, kv, short_of_rows, store_at, counts, out), Error);
  const CacheChunk whole[] = {{&cache, &cache, 0, 4}};
  gpu_->store_and_attend(q, kv, kv, whole, store_at, counts, out);
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  EXPECT_THROW(gpu_->copy_to_host(out, sink.data()), Error);
  gpu_->copy_to_host(out, sink.data());
}

// A row outside the source fails the next copy to the host, after which the backend goes on.
TEST_F(CudaParity, GatherRowsRefusesRowsOutsideTheSourceAtTheNextCopyToHost) {
  Tensor src_gpu = gpu_->allocate(DType::kF32, {9, 3, 8}), dst_gpu = poisoned({5, 3, 8});
  gpu_->gather_rows(src_gpu, to_gpu(host_ints({1, 9, 0, 0, 0})), dst_gpu);
  std::vector<float> sink(static_cast<size_t>(dst_gpu.numel()));
  EXPECT_THROW(gpu_->copy_to_host(dst_gpu, sink.data()), Error);
  gpu_->copy_to_host(dst_gpu, sink.data());
}

TEST_F(CudaParity, AttentionKeyCountBeyondKeysFailsAtTheNextCopyToHost) {
  Tensor q = gpu_->allocate(DType::kF32, {1, 2, 16});
  Tensor kv = gpu_->allocate(DType::kF32, {4, 2, 16});
  Tensor counts = to_gpu(host_ints({5}));
  Tensor out = gpu_->allocate(DType::kF32, {1, 2, 16});
  gpu_->attention(q, kv, kv, counts, out);
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  try {
    gpu_->copy_to_host(out, sink.data());
    FAIL() << "a key count beyond the keys was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal) << e.what();
  }
  gpu_->copy_to_host(out, sink.data());  // reported once; the backend stays usable
}

// What the paged kernel finds in device data: a block id outside the store (too large, or
// negative) or a key count beyond the blocks its table lists. Each is reported once, at the next
// copy to the host, and the backend stays usable.
TEST_F(CudaParity, PagedAttentionBlockIdsOutsideTheStoreAndCountsBeyondTheTableFailAtTheNextCopyToHost) {
  Tensor q = gpu_->allocate(DType::kF32, {1, 2, 16});
  Tensor kv = gpu_->allocate(DType::kF32, {8, 2, 16});  // a store of 2 blocks of 4
  Tensor out = gpu_->allocate(DType::kF32, {1, 2, 16});
  std::vector<float> sink(static_cast<size_t>(out.numel()));
  struct Bad {
    std::vector<int32_t> table;
    int32_t count;
    std::string reported;
  };
  for (const Bad& bad :
       {Bad{{0, 2}, 8, "block id 2 outside the store of 2 blocks"}, Bad{{-1}, 3, "block id -1 outside the store"},
        Bad{{1}, 5, "key count 5 beyond the block table's 4 positions"}}) {
    Tensor table = to_gpu(host_ints(bad.table)), counts = to_gpu(host_ints({bad.count}));
    gpu_->attention(q, kv, kv, counts, out, {.block_table = &table, .block_size = 4});
    try {
      gpu_->copy_to_host(out, sink.data());
      ADD_FAILURE() << "not reported: " << bad.reported;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInternal) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad.reported), std::string::npos) << e.what();
    }
    gpu_->copy_to_host(out, sink.data());  // reported once; the backend stays usable
  }
}

TEST_F(CudaParity, TensorsFromTheHostAreRefusedByOps) {
  Tensor host = Tensor::zeros_cpu(DType::kF32, {2, 4});
  Tensor gpu = gpu_->allocate(DType::kF32, {2, 4});
  EXPECT_THROW(gpu_->add(gpu, host), Error);
  EXPECT_THROW(gpu_->copy_rows(host, gpu, 0), Error);
}

// ---- the attention kernels chosen by the environment ----

// FLASHQ_CUDA_ATTENTION=one-row sends every shape to the one-row kernel (the escape should a
// tile kernel misbehave on some device) with the results of the CPU and the reference still;
// a value other than tiles or one-row is refused when the backend is made.
TEST_F(CudaParity, OneRowAttentionKernelChosenByTheEnvironmentForEveryShape) {
  struct BackToTheDefault {
    ~BackToTheDefault() { unsetenv("FLASHQ_CUDA_ATTENTION"); }
  } restore;
  setenv("FLASHQ_CUDA_ATTENTION", "sideways", 1);
  try {
    make_backend("cuda");
    ADD_FAILURE() << "FLASHQ_CUDA_ATTENTION=sideways was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
  setenv("FLASHQ_CUDA_ATTENTION", "one-row", 1);
  gpu_ = make_backend("cuda");
  for (const AttentionCaseShape& shape :
       {AttentionCaseShape{"DecodeGqa4OneRowByChoice", 1, 32, 8, 128, 300, true},
        AttentionCaseShape{"VerifyBlockOneRowByChoice", 16, 32, 8, 128, 1000, false}}) {
    const OpCase c = attention_case(shape);
    const std::vector<Expected> expected = c.reference();
    OpDevice on_cpu(*cpu_), on_gpu(*gpu_);
    const Outputs want = run_case(c, on_cpu).outputs, got = run_case(c, on_gpu).outputs;
    check_outputs(c, "cuda", "cpu", expected, want, got);
    check_outputs(c, "cuda", "reference", expected, reference_values(expected), got);
  }
}

}  // namespace
}  // namespace flashq
