// The cache pool (--gpu-memory-fraction, --cpu-memory-fraction): first fit with merging, host
// memory committed only as it is written, sizing from the device's or the host's memory, and the
// engine on a pool: a sequence waits until its caches fit, one that no pool
// could hold is refused at once, and the output is the same as without a pool.
#include "worker/model/cache_pool.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "kernels/backend_factory.h"
#include "shared/error.h"
#include "tests/engine/dflash_test_pair.h"

namespace flashq::testing {
namespace {

constexpr int64_t kRun = CachePool::kAlignment;

Tensor floats(CachePool& pool, int64_t bytes) {
  std::optional<Tensor> t = pool.try_allocate(DType::kF32, {bytes / 4});
  if (!t) throw std::runtime_error("the pool had no run of " + std::to_string(bytes) + " bytes");
  return *t;
}

TEST(CachePool, HandsOutRunsUntilFullAndTakesThemBackMerged) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  CachePool pool(*backend, 4 * kRun);
  EXPECT_EQ(pool.capacity_bytes(), 4 * kRun);
  std::optional<Tensor> a = floats(pool, kRun), b = floats(pool, 2 * kRun), c = floats(pool, kRun);
  EXPECT_EQ(pool.free_bytes(), 0);
  EXPECT_FALSE(pool.try_allocate(DType::kF32, {1}).has_value()) << "a full pool refuses";
  EXPECT_EQ(static_cast<char*>(b->raw()) - static_cast<char*>(a->raw()), kRun) << "first fit, in address order";
  a.reset();
  c.reset();
  EXPECT_EQ(pool.free_bytes(), 2 * kRun);
  EXPECT_EQ(pool.largest_free_bytes(), kRun) << "two runs apart are not one";
  b.reset();
  EXPECT_EQ(pool.largest_free_bytes(), 4 * kRun) << "released runs merge with both neighbours";
  EXPECT_NO_THROW(floats(pool, 4 * kRun));
}

TEST(CachePool, RoundsEveryRunUpToTheAlignment) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  CachePool pool(*backend, 3 * kRun + 100);
  EXPECT_EQ(pool.capacity_bytes(), 3 * kRun);
  Tensor small = floats(pool, 4);
  EXPECT_EQ(pool.free_bytes(), 2 * kRun);
  EXPECT_EQ(CachePool::footprint(1), kRun);
  EXPECT_EQ(CachePool::footprint(kRun + 1), 2 * kRun);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(floats(pool, kRun).raw()) % 64, 0u);
}

TEST(CachePool, ARunOutlivesThePoolAndViewsKeepItTaken) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  Tensor kept;
  {
    CachePool pool(*backend, 2 * kRun);
    Tensor run = floats(pool, kRun);
    kept = run.slice_rows(0, 8);  // a view holds the run as the tensor did
    run = Tensor();
    EXPECT_EQ(pool.free_bytes(), kRun);
    std::fill_n(kept.data<float>(), 8, 1.5f);
  }
  EXPECT_EQ(kept.data<float>()[7], 1.5f);
}

TEST(CachePool, SizeMustBePositive) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  EXPECT_THROW(CachePool(*backend, 0), Error);
  EXPECT_THROW(CachePool(*backend, kRun - 1), Error);
}

// vLLM's rule: the fraction of the whole device, less what the weights and the rest already use.
TEST(CachePoolBytes, FractionOfTheDeviceLessWhatIsInUse) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  EXPECT_EQ(cache_pool_bytes(0.9, 80 * kGiB, 64 * kGiB), 72 * kGiB - 16 * kGiB);
  EXPECT_EQ(cache_pool_bytes(1.0, 80 * kGiB, 80 * kGiB), 80 * kGiB);
}

TEST(CachePoolBytes, AModelThatLeavesNoRoomIsAClearError) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  try {
    cache_pool_bytes(0.5, 80 * kGiB, 30 * kGiB);  // 50 GiB in use, 40 allowed
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("51200 MiB"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cache_pool_bytes(0.0, 80 * kGiB, 80 * kGiB), Error);
  EXPECT_THROW(cache_pool_bytes(1.5, 80 * kGiB, 80 * kGiB), Error);
}

// The process's resident memory (/proc/self/statm's second field, in pages).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A pool sized from the host's memory must not take it at start: many workers (and the test
// suite's) share one host, and a cache uses what it writes.
TEST(CachePool, InHostMemoryCommitsOnlyWhatItsRunsWrite) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  std::unique_ptr<Backend> backend = make_backend("cpu");
  const int64_t before = resident_bytes();
  CachePool pool(*backend, 2048 * kMiB);
  EXPECT_LT(resident_bytes() - before, 64 * kMiB) << "mapping 2 GiB committed it";
  Tensor run = floats(pool, 8 * kMiB);
  std::fill_n(run.data<float>(), run.numel(), 1.0f);
  const int64_t written = resident_bytes() - before;
  EXPECT_GE(written, 8 * kMiB);
  EXPECT_LT(written, 64 * kMiB) << "writing 8 MiB committed more than it";
  Tensor fresh = floats(pool, kMiB);
  EXPECT_EQ(*std::max_element(fresh.data<float>(), fresh.data<float>() + fresh.numel()), 0.0f)
      << "untouched pages read as zero";
}

// The CPU's default: a fraction of what the host has available, less the weights read in place,
// bounded by what the worker could fill and by 8 GiB.
TEST(HostCachePoolBytes, FractionOfAvailableMemoryLessTheWeights) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  constexpr int64_t kLots = 1000 * kGiB;  // what the worker could fill: no bound here
  EXPECT_EQ(host_cache_pool_bytes(0.5, 10 * kGiB, 2 * kGiB, kLots), 4 * kGiB);
  EXPECT_EQ(host_cache_pool_bytes(0.25, 12 * kGiB, 0, kLots), 3 * kGiB);
  EXPECT_EQ(host_cache_pool_bytes(1.0, 6 * kGiB, kGiB, kLots), 5 * kGiB);
}

TEST(HostCachePoolBytes, AtMostEightGiBAndWhatTheWorkerCouldFill) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  EXPECT_EQ(kHostCachePoolMaxBytes, 8 * kGiB);
  EXPECT_EQ(host_cache_pool_bytes(0.5, 256 * kGiB, 16 * kGiB, 1000 * kGiB), 8 * kGiB);
  // A tiny model: 8 slots x 512 positions x 1 KiB, twice, is all it could use.
  const int64_t useful = 2 * 8 * 512 * 1024;
  EXPECT_EQ(host_cache_pool_bytes(0.5, 20 * kGiB, 0, useful), useful);
}

TEST(HostCachePoolBytes, NoPoolWhenTooLittleIsLeft) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  constexpr int64_t kLots = int64_t{1} << 40;
  EXPECT_EQ(host_cache_pool_bytes(0.5, 100 * kMiB, 0, kLots), 0) << "50 MiB is under the 64 MiB floor";
  EXPECT_EQ(host_cache_pool_bytes(0.5, 1024 * kMiB, 2048 * kMiB, kLots), 0) << "weights above what is available";
  EXPECT_EQ(host_cache_pool_bytes(0.5, 128 * kMiB, 0, kLots), 64 * kMiB) << "the floor itself is a pool";
  EXPECT_EQ(host_cache_pool_bytes(0.5, 100 * kMiB, 0, 16 * kMiB), 16 * kMiB)
      << "a model that needs less than the floor gets what it needs";
}

TEST(HostCachePoolBytes, FractionMustBeInZeroToOne) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  EXPECT_THROW(host_cache_pool_bytes(0.0, 8 * kGiB, 0, kGiB), Error);
  EXPECT_THROW(host_cache_pool_bytes(1.5, 8 * kGiB, 0, kGiB), Error);
}

SequenceRequest request_for(uint32_t seed, SpecMode spec, int64_t max_tokens) {
  SequenceRequest r;
  r.generation.prompt_tokens = some_tokens(9, 459, seed);
  r.generation.max_tokens = max_tokens;
  r.generation.ignore_eos = true;
  r.spec = spec;
  return r;
}

class EngineOnACachePool : public ::testing::Test {
 protected:
  EngineOnACachePool() : pair(f32_target(41), TinyDrafterSpec{.layers = 1, .block_size = 8, .seed = 42}) {}

  // Bytes of one sequence's caches: target, and the draft context when it speculates.
  int64_t sequence_bytes(const SequenceRequest& r) {
    const int64_t positions = static_cast<int64_t>(r.generation.prompt_tokens.size()) + r.generation.max_tokens;
    int64_t bytes = CachePool::footprint(pair.target.model->make_cache(positions).whole_bytes());
    if (r.spec != SpecMode::kOff) {
      bytes += CachePool::footprint(pair.drafter->make_context_cache(positions).whole_bytes());
    }
    return bytes;
  }

  DFlashTestPair pair;
};

// Room for two sequences' caches and four slots: never more than two run at once, each waits
// its turn, and every output is the one without a pool.
TEST_F(EngineOnACachePool, SequencesWaitForMemoryAndKeepTheirOutput) {
  std::vector<SequenceRequest> requests;
  for (uint32_t i = 0; i < 5; ++i)
    requests.push_back(request_for(10 + i, i % 2 ? SpecMode::kDflash : SpecMode::kAuto, 20));
  const int64_t per_sequence = sequence_bytes(requests[0]);
  CachePool pool(*pair.target.backend, 2 * per_sequence + kRun);
  pair.proposer->use_cache_pool(&pool);
  Engine engine(*pair.target.model, pair.proposer.get(), {.max_slots = 4, .cache_pool = &pool});
  for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
  size_t most_running = 0;
  while (!engine.idle()) {
    engine.step();
    most_running = std::max(most_running, engine.running());
  }
  EXPECT_EQ(most_running, 2u) << "admitted beyond the pool";
  std::vector<FinishedSequence> done = engine.take_finished();
  ASSERT_EQ(done.size(), requests.size());
  pair.proposer->use_cache_pool(nullptr);
  for (const FinishedSequence& d : done) {
    const auto plain = run_engine(*pair.target.model, nullptr,
                                  {request_for(static_cast<uint32_t>(10 + d.id), SpecMode::kOff, 20)}, 1);
    EXPECT_EQ(d.tokens, plain[0]) << "sequence " << d.id;
  }
  EXPECT_EQ(pool.free_bytes(), pool.capacity_bytes()) << "finished sequences gave their caches back";
}

TEST_F(EngineOnACachePool, ASequenceNoPoolCouldHoldIsRefusedAtOnce) {
  const SequenceRequest big = request_for(3, SpecMode::kDflash, 200);
  CachePool pool(*pair.target.backend, sequence_bytes(big) - kRun);
  pair.proposer->use_cache_pool(&pool);
  Engine engine(*pair.target.model, pair.proposer.get(), {.max_slots = 2, .cache_pool = &pool});
  try {
    engine.add(1, big);
    ADD_FAILURE() << "accepted a sequence larger than the pool";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cache pool holds"), std::string::npos) << e.what();
  }
  // Without the drafter's context (spec off) the same request fits.
  SequenceRequest plain = big;
  plain.spec = SpecMode::kOff;
  EXPECT_NO_THROW(engine.add(2, plain));
  engine.run_until_idle();
  EXPECT_EQ(engine.take_finished().at(0).tokens.size(), 200u);
  pair.proposer->use_cache_pool(nullptr);
}

}  // namespace
}  // namespace flashq::testing
