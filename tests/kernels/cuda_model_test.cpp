// Whole-model runs on the CUDA backend against the CPU backend, on random tiny checkpoints
// (flashq-model make-tiny): the same logits within tolerance, the same greedy tokens in f32, and
// speculative decoding on the GPU reproducing target-only decoding on the CPU token for token;
// for Qwen3 targets and for Llama targets (biases, llama3 RoPE scaling) with their drafters.
// Without a CUDA device every test skips (GTEST_SKIP) saying so.
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend_factory.h"
#include "tests/engine/dflash_test_pair.h"
#include "worker/serving/generate.h"

namespace flashq::testing {
namespace {

TinyModelSpec tiny_spec(DType dtype, uint64_t seed) {
  TinyModelSpec spec;
  spec.layers = 3, spec.hidden = 64, spec.heads = 4, spec.kv_heads = 2, spec.head_dim = 16, spec.inter = 128;
  spec.vocab = 512, spec.dtype = dtype, spec.seed = seed;
  return spec;
}

// One checkpoint directory loaded twice: on the CPU and on the GPU.
struct TwoBackends {
  TempDir dir;
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<Backend> gpu = make_backend("cuda");
  std::unique_ptr<TargetModel> cpu_model, gpu_model;
  std::unique_ptr<Tokenizer> tokenizer;

  explicit TwoBackends(const TinyModelSpec& spec) {
    write_tiny_model(spec, dir.path());
    cpu_model = load_target_model(dir.path(), *cpu);
    gpu_model = load_target_model(dir.path(), *gpu);
    tokenizer = load_tokenizer(dir.path());
  }

  // A random one-layer DFlash drafter for this target, written to drafter_dir and loaded on the GPU.
  std::unique_ptr<DFlashDrafter> gpu_drafter(int64_t block_size, uint64_t seed) {
    write_tiny_drafter({.layers = 1, .block_size = block_size, .seed = seed}, dir.path(), drafter_dir.path());
    return DFlashDrafter::load(drafter_dir.path(), *gpu_model, *gpu);
  }

  // The target's own tokens for `request` on the CPU, without speculation.
  std::vector<int32_t> plain_on_cpu(SequenceRequest request) {
    request.spec = SpecMode::kOff;
    request.block_size = 0;
    return run_engine(*cpu_model, nullptr, {request}, 1)[0];
  }

  TempDir drafter_dir;
};

class CudaModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device visible: whole-model CUDA-vs-CPU runs only on a GPU machine";
    }
  }
};

std::vector<float> all_logits(TargetModel& model, std::span<const int32_t> tokens, KvCache& cache) {
  SequenceChunk chunk{tokens, &cache};
  ForwardOutput out = model.forward({&chunk, 1}, {.logits = LogitRows::kAll});
  return to_host(model.backend(), out.logits);
}

TEST_F(CudaModel, PrefillAndDecodeLogitsMatchCpu) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    TwoBackends b(tiny_spec(dtype, 3));
    const double tolerance = dtype == DType::kF32 ? 1e-4 : 1e-2;
    // 150 prompt tokens: more rows than the streaming matmul takes, so prefill goes to cuBLAS.
    std::vector<int32_t> prompt = some_tokens(150, 500, 1);
    KvCache cpu_cache = b.cpu_model->make_cache(256), gpu_cache = b.gpu_model->make_cache(256);
    EXPECT_LT(max_normalized_error(all_logits(*b.gpu_model, prompt, gpu_cache),
                                   all_logits(*b.cpu_model, prompt, cpu_cache)),
              tolerance)
        << dtype_name(dtype) << " prefill";
    for (int32_t token : some_tokens(6, 500, 2)) {
      std::vector<int32_t> step = {token};
      EXPECT_LT(max_normalized_error(all_logits(*b.gpu_model, step, gpu_cache),
                                     all_logits(*b.cpu_model, step, cpu_cache)),
                tolerance)
          << dtype_name(dtype) << " decode at " << cpu_cache.length();
    }
  }
}

// A Llama target with attention and MLP biases and llama3 RoPE scaling whose low frequencies turn
// within these positions.
TinyModelSpec llama_spec(DType dtype, uint64_t seed) {
  TinyModelSpec spec = tiny_spec(dtype, seed);
  spec.family = "llama";
  spec.rope_theta = 500000.0;
  spec.attention_bias = true, spec.mlp_bias = true;
  spec.rope_scaling_factor = 8.0, spec.original_max_position = 64;
  return spec;
}

TEST_F(CudaModel, LlamaPrefillAndDecodeLogitsMatchCpu) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    TwoBackends b(llama_spec(dtype, 13));
    const double tolerance = dtype == DType::kF32 ? 1e-4 : 1e-2;
    std::vector<int32_t> prompt = some_tokens(150, 450, 1);
    KvCache cpu_cache = b.cpu_model->make_cache(256), gpu_cache = b.gpu_model->make_cache(256);
    EXPECT_LT(max_normalized_error(all_logits(*b.gpu_model, prompt, gpu_cache),
                                   all_logits(*b.cpu_model, prompt, cpu_cache)),
              tolerance)
        << dtype_name(dtype) << " prefill";
    for (int32_t token : some_tokens(6, 450, 2)) {
      std::vector<int32_t> step = {token};
      EXPECT_LT(max_normalized_error(all_logits(*b.gpu_model, step, gpu_cache),
                                     all_logits(*b.cpu_model, step, cpu_cache)),
                tolerance)
          << dtype_name(dtype) << " decode at " << cpu_cache.length();
    }
  }
}

TEST_F(CudaModel, GreedyTokensEqualCpuInFloat32) {
  TwoBackends b(tiny_spec(DType::kF32, 5));
  for (uint32_t seed : {1u, 2u, 3u}) {
    GenerationRequest request{.prompt_tokens = some_tokens(5 + seed * 7, 500, seed), .max_tokens = 32,
                              .ignore_eos = true};
    GenerationResult on_cpu = generate(*b.cpu_model, *b.tokenizer, request);
    GenerationResult on_gpu = generate(*b.gpu_model, *b.tokenizer, request);
    EXPECT_EQ(on_gpu.tokens, on_cpu.tokens) << "prompt seed " << seed;
  }
}

// `count` speculative requests of 24 tokens, with prompts of 4, 9, 14, ... tokens and blocks of
// 4, 8, 12, ... (a drafter of block 16 takes four).
std::vector<SequenceRequest> dflash_requests(int count, uint32_t seed) {
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < count; ++i) {
    SequenceRequest r;
    r.generation.prompt_tokens = some_tokens(4 + static_cast<size_t>(i) * 5, 459, seed + static_cast<uint32_t>(i));
    r.generation.max_tokens = 24;
    r.generation.ignore_eos = true;
    r.spec = SpecMode::kDflash;
    r.block_size = 4 + 4 * i;
    requests.push_back(r);
  }
  return requests;
}

TEST_F(CudaModel, SpeculativeDecodingOnGpuReproducesTargetOnlyDecodingOnCpu) {
  const TinyModelSpec spec = f32_target(41);
  TwoBackends b(spec);
  std::unique_ptr<DFlashDrafter> drafter = b.gpu_drafter(16, spec.seed);
  DFlashProposer proposer(*drafter);
  const std::vector<SequenceRequest> requests = dflash_requests(4, 70);
  auto speculative = run_engine(*b.gpu_model, &proposer, requests, 4);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(speculative[i], b.plain_on_cpu(requests[i])) << "sequence " << i;
  }
}

TEST_F(CudaModel, LlamaSpeculativeDecodingOnGpuReproducesTargetOnlyDecodingOnCpu) {
  TinyModelSpec spec = llama_spec(DType::kF32, 17);
  TwoBackends b(spec);
  std::unique_ptr<DFlashDrafter> drafter = b.gpu_drafter(16, spec.seed);
  DFlashProposer proposer(*drafter);
  const std::vector<SequenceRequest> requests = dflash_requests(3, 130);
  auto speculative = run_engine(*b.gpu_model, &proposer, requests, 3);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(speculative[i], b.plain_on_cpu(requests[i])) << "sequence " << i;
  }
}

// Overlapped launches (programmatic dependent launch) change when kernels start, never what
// they compute: with them on, and the passes recorded as CUDA graphs, speculative decoding on
// the GPU still gives the CPU's target-only tokens, and a bf16 model's logits keep their bits.
TEST_F(CudaModel, ProgrammaticLaunchesChangeNoToken) {
  struct LaunchesBackToOrdinary {
    ~LaunchesBackToOrdinary() { set_programmatic_launches(false); }
  } restore;
  const TinyModelSpec spec = f32_target(47);
  TwoBackends b(spec);
  std::unique_ptr<DFlashDrafter> drafter = b.gpu_drafter(16, spec.seed);
  b.gpu_model->set_capture_passes(true);
  drafter->set_capture_passes(true);
  DFlashProposer proposer(*drafter);
  const std::vector<SequenceRequest> requests = dflash_requests(3, 110);
  set_programmatic_launches(true);
  auto speculative = run_engine(*b.gpu_model, &proposer, requests, 3);
  EXPECT_GT(b.gpu_model->replayed_passes(), 0) << "no pass was replayed from a graph";
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(speculative[i], b.plain_on_cpu(requests[i])) << "sequence " << i;
  }

  TwoBackends bf16(tiny_spec(DType::kBF16, 9));
  auto logits_with = [&](bool overlapped) {
    set_programmatic_launches(overlapped);
    KvCache cache = bf16.gpu_model->make_cache(64);
    std::vector<float> logits = all_logits(*bf16.gpu_model, some_tokens(20, 500, 5), cache);
    for (int32_t token : some_tokens(4, 500, 6)) {
      const std::vector<int32_t> step = {token};
      const std::vector<float> next = all_logits(*bf16.gpu_model, step, cache);
      logits.insert(logits.end(), next.begin(), next.end());
    }
    return logits;
  };
  const std::vector<float> ordinary = logits_with(false);
  EXPECT_EQ(logits_with(true), ordinary);
}

// The worker's GPU path: caches from a pool sized by the memory fraction (what the loaded model
// leaves of 50% of the card), speculative decoding on it equal to target-only decoding on the CPU.
TEST_F(CudaModel, SpeculativeDecodingFromACachePoolSizedByTheMemoryFraction) {
  const TinyModelSpec spec = f32_target(43);
  TwoBackends b(spec);
  std::unique_ptr<DFlashDrafter> drafter = b.gpu_drafter(8, spec.seed);
  DFlashProposer proposer(*drafter);
  const std::optional<DeviceMemory> memory = b.gpu->memory();
  ASSERT_TRUE(memory.has_value()) << "the CUDA backend reports its memory";
  ASSERT_GT(memory->total_bytes, memory->free_bytes);
  CachePool pool(*b.gpu, std::min<int64_t>(cache_pool_bytes(0.5, memory->total_bytes, memory->free_bytes), 64 << 20));
  proposer.use_cache_pool(&pool);
  Engine engine(*b.gpu_model, &proposer, {.max_slots = 3, .cache_pool = &pool});
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < 3; ++i) {
    SequenceRequest r;
    r.generation.prompt_tokens = some_tokens(6 + static_cast<size_t>(i) * 4, 459, static_cast<uint32_t>(90 + i));
    r.generation.max_tokens = 20;
    r.generation.ignore_eos = true;
    r.spec = i == 1 ? SpecMode::kAuto : SpecMode::kDflash;
    engine.add(static_cast<uint64_t>(i), r);
    requests.push_back(r);
  }
  engine.run_until_idle();
  for (const FinishedSequence& done : engine.take_finished()) {
    EXPECT_EQ(done.tokens, b.plain_on_cpu(requests[done.id])) << "sequence " << done.id;
  }
  EXPECT_EQ(pool.free_bytes(), pool.capacity_bytes());
}

}  // namespace
}  // namespace flashq::testing
