// KV-cache invariants of the Qwen3 runtime: however the tokens are split into passes (one full
// forward, token by token, verification blocks after truncation, batched with other sequences)
// the logits are the same.
#include <gtest/gtest.h>

#include "tests/model/tiny_model.h"

namespace flashq::testing {
namespace {

TinyModelSpec float32_spec() {
  TinyModelSpec spec;
  spec.layers = 3, spec.hidden = 48, spec.heads = 4, spec.kv_heads = 2, spec.head_dim = 16, spec.inter = 96;
  spec.vocab = 400, spec.dtype = DType::kF32, spec.seed = 11;
  return spec;
}

std::vector<float> forward_all(TargetModel& model, std::span<const int32_t> tokens, KvCache& cache) {
  SequenceChunk chunk{tokens, &cache};
  ForwardOutput out = model.forward({&chunk, 1}, {.logits = LogitRows::kAll});
  return to_host(model.backend(), out.logits);
}

std::vector<float> rows(const std::vector<float>& logits, int64_t vocab, int64_t first, int64_t count) {
  return {logits.begin() + first * vocab, logits.begin() + (first + count) * vocab};
}

TEST(Qwen3Model, DecodeStepByStepEqualsOneFullForward) {
  LoadedTinyModel tiny(float32_spec());
  TargetModel& model = *tiny.model;
  const int64_t vocab = model.config().vocab_size;
  std::vector<int32_t> tokens = some_tokens(12, 400, 1);
  KvCache full_cache = model.make_cache(64);
  std::vector<float> full = forward_all(model, tokens, full_cache);

  KvCache step_cache = model.make_cache(64);
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<float> step = forward_all(model, std::span(tokens).subspan(i, 1), step_cache);
    EXPECT_LT(max_normalized_error(step, rows(full, vocab, static_cast<int64_t>(i), 1)), 1e-5) << "position " << i;
  }
  EXPECT_EQ(step_cache.length(), 12);
}

TEST(Qwen3Model, BlockForwardAfterTruncationEqualsTokensDecodedOneByOne) {
  LoadedTinyModel tiny(float32_spec());
  TargetModel& model = *tiny.model;
  const int64_t vocab = model.config().vocab_size;
  std::vector<int32_t> prompt = some_tokens(9, 400, 2);
  std::vector<int32_t> rejected = some_tokens(5, 400, 3);
  std::vector<int32_t> block = some_tokens(5, 400, 4);

  KvCache cache = model.make_cache(64);
  forward_all(model, prompt, cache);
  forward_all(model, rejected, cache);  // a verification pass whose tokens were all rejected
  cache.truncate(9);
  std::vector<float> verified = forward_all(model, block, cache);

  KvCache reference = model.make_cache(64);
  forward_all(model, prompt, reference);
  for (int64_t i = 0; i < 5; ++i) {
    std::vector<float> one = forward_all(model, std::span(block).subspan(i, 1), reference);
    EXPECT_LT(max_normalized_error(rows(verified, vocab, i, 1), one), 1e-5) << "block row " << i;
  }
}

TEST(Qwen3Model, BatchedSequencesSeeOnlyTheirOwnCache) {
  LoadedTinyModel tiny(float32_spec());
  TargetModel& model = *tiny.model;
  const int64_t vocab = model.config().vocab_size;
  std::vector<int32_t> a = some_tokens(7, 400, 5), b = some_tokens(3, 400, 6), c = some_tokens(10, 400, 7);

  std::vector<std::vector<float>> alone;
  for (auto* tokens : {&a, &b, &c}) {
    KvCache cache = model.make_cache(64);
    alone.push_back(forward_all(model, *tokens, cache));
  }
  KvCache ca = model.make_cache(64), cb = model.make_cache(64), cc = model.make_cache(64);
  std::vector<SequenceChunk> chunks = {{a, &ca}, {b, &cb}, {c, &cc}};
  ForwardOutput out = model.forward(chunks, {.logits = LogitRows::kAll});
  std::vector<float> batched = to_host(model.backend(), out.logits);
  EXPECT_LT(max_normalized_error(rows(batched, vocab, 0, 7), alone[0]), 1e-5);
  EXPECT_LT(max_normalized_error(rows(batched, vocab, 7, 3), alone[1]), 1e-5);
  EXPECT_LT(max_normalized_error(rows(batched, vocab, 10, 10), alone[2]), 1e-5);
}

TEST(Qwen3Model, LastRowLogitsEqualTheLastRowOfAllLogits) {
  LoadedTinyModel tiny(float32_spec());
  TargetModel& model = *tiny.model;
  const int64_t vocab = model.config().vocab_size;
  std::vector<int32_t> tokens = some_tokens(6, 400, 8);
  KvCache c1 = model.make_cache(64), c2 = model.make_cache(64);
  std::vector<float> all = forward_all(model, tokens, c1);
  SequenceChunk chunk{tokens, &c2};
  std::vector<float> last = to_host(model.backend(), model.forward({&chunk, 1}, {}).logits);
  EXPECT_LT(max_normalized_error(last, rows(all, vocab, 5, 1)), 1e-6);
}

TEST(Qwen3Model, RefusesSequencesBeyondTheContext) {
  TinyModelSpec spec = float32_spec();
  spec.max_position = 16;
  LoadedTinyModel tiny(spec);
  KvCache cache = tiny.model->make_cache(1000);
  std::vector<int32_t> tokens = some_tokens(17, 400, 9);
  SequenceChunk chunk{tokens, &cache};
  try {
    tiny.model->forward({&chunk, 1}, {});
    FAIL() << "a 17-token pass fit a 16-token context";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(), 0);
}

TEST(Qwen3Model, RejectsTokenIdsOutsideTheVocabulary) {
  LoadedTinyModel tiny(float32_spec());
  KvCache cache = tiny.model->make_cache(64);
  std::vector<int32_t> tokens = {1, 400};
  SequenceChunk chunk{tokens, &cache};
  EXPECT_THROW(tiny.model->forward({&chunk, 1}, {}), Error);
  EXPECT_EQ(cache.length(), 0);
}

// Passes recorded and replayed (Backend::capture, the CPU twin of CUDA graphs) give the logits
// and taps of passes run directly, step after step: while the batch stays; when a sequence is
// replaced by another of the same batch size (a new cache, nothing else changed); when the
// batch shrinks; and after a larger pass moved the workspace's buffers.
TEST(Qwen3Model, RecordedPassesGiveWhatDirectPassesGive) {
  LoadedTinyModel direct_tiny(float32_spec()), recorded_tiny(float32_spec());
  TargetModel& direct = *direct_tiny.model;
  TargetModel& recorded = *recorded_tiny.model;
  recorded.set_capture_passes(true);
  const ForwardOptions options{.logits = LogitRows::kLastOfEachChunk, .tap_layers = {0, 2}};

  struct Sequence {
    std::vector<int32_t> tokens;
    KvCache direct_cache, recorded_cache;
  };
  std::vector<std::unique_ptr<Sequence>> live;
  auto admit = [&](uint64_t seed, int64_t prompt) {
    auto s = std::make_unique<Sequence>(Sequence{some_tokens(static_cast<size_t>(prompt), 400, static_cast<uint32_t>(seed)), direct.make_cache(64),
                                                 recorded.make_cache(64)});
    SequenceChunk d{s->tokens, &s->direct_cache}, r{s->tokens, &s->recorded_cache};
    direct.forward({&d, 1}, options);
    recorded.forward({&r, 1}, options);
    live.push_back(std::move(s));
  };
  auto step = [&](int step_index) {
    std::vector<int32_t> next;
    for (size_t i = 0; i < live.size(); ++i) next.push_back(static_cast<int32_t>((step_index * 31 + i * 7) % 400));
    std::vector<SequenceChunk> d, r;
    for (size_t i = 0; i < live.size(); ++i) {
      d.push_back({std::span(next).subspan(i, 1), &live[i]->direct_cache});
      r.push_back({std::span(next).subspan(i, 1), &live[i]->recorded_cache});
    }
    const ForwardOutput want = direct.forward(d, options);
    const ForwardOutput got = recorded.forward(r, options);
    EXPECT_EQ(to_host(recorded.backend(), got.logits), to_host(direct.backend(), want.logits)) << "step " << step_index;
    EXPECT_EQ(to_host(recorded.backend(), got.taps), to_host(direct.backend(), want.taps)) << "step " << step_index;
  };

  for (uint64_t seed : {1, 2, 3}) admit(seed, 4 + static_cast<int64_t>(seed));
  int index = 0;
  for (; index < 8; ++index) step(index);
  const int64_t replayed_with_three = recorded.replayed_passes();
  EXPECT_GE(replayed_with_three, 5) << "a batch that stayed the same was not replayed";

  live.erase(live.begin() + 1);  // one finishes and another takes its place
  admit(4, 3);
  for (; index < 12; ++index) step(index);
  live.erase(live.begin());  // the batch shrinks
  for (; index < 16; ++index) step(index);
  {  // a longer pass than any before, of a sequence outside the batch: the buffers move
    KvCache direct_side = direct.make_cache(64), recorded_side = recorded.make_cache(64);
    const std::vector<int32_t> prompt = some_tokens(30, 400, 9);
    SequenceChunk d{prompt, &direct_side}, r{prompt, &recorded_side};
    direct.forward({&d, 1}, options);
    recorded.forward({&r, 1}, options);
  }
  for (; index < 22; ++index) step(index);
  EXPECT_GE(recorded.replayed_passes(), replayed_with_three + 8);
}

}  // namespace
}  // namespace flashq::testing
