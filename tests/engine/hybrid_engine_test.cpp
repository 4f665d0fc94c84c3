// The engine on hybrid targets (Qwen3.5, Qwen3.5-MoE, Qwen3-Next): a verification block's rows
// all pass through the Gated DeltaNet layers' recurrent state, and the rows of a rejected draft
// must leave no trace in it (RecurrentState: the state before the block restored and the kept
// rows' recurrence re-run). Every acceptance length 0..7 of a block of 8 reproduces plain
// decoding; on a paged cache, sequences preempted and recomputed keep their output in every mode;
// with prefix caching, a later turn starts from the recurrent state kept at the end of the turn
// before, or at a block boundary of its prompt (state_snapshots.h), and decodes as without it.
#include <gtest/gtest.h>

#include <set>

#include "tests/engine/hybrid_targets.h"
#include "tests/engine/replay_proposer.h"

namespace flashq::testing {
namespace {

constexpr int64_t kBlock = 8;
constexpr int32_t kVocab = 459;

class HybridEngine : public ::testing::TestWithParam<std::string> {
 protected:
  HybridEngine()
      : pair(hybrid_f32_target(GetParam(), 61), TinyDrafterSpec{.layers = 1, .block_size = kBlock, .seed = 62}) {}

  std::vector<int32_t> plain(const SequenceRequest& request) {
    SequenceRequest r = request;
    r.spec = SpecMode::kOff;
    return run_engine(*pair.target.model, nullptr, {r}, 1).at(0);
  }

  DFlashTestPair pair;
};

// Drafts that are right up to a chosen position (a replay of the target's own continuation with
// a wrong token after it), so the blocks accept 0, 1, ..., 7 tokens in turn.
TEST_P(HybridEngine, EveryAcceptanceLengthReproducesPlainDecoding) {
  const std::vector<int64_t> lengths = {0, 1, 2, 3, 4, 5, 6, 7, 3, 0, 7};
  int64_t tokens = 1;
  for (int64_t accepted : lengths) tokens += accepted + 1;
  const SequenceRequest request = greedy_request(some_tokens(9, kVocab, 4), SpecMode::kDflash, tokens);
  ReplayScript script{request.generation.prompt_tokens, {}};
  const std::vector<int32_t> continuation = plain(request);
  script.tokens.insert(script.tokens.end(), continuation.begin(), continuation.end());
  int64_t start = static_cast<int64_t>(request.generation.prompt_tokens.size());
  for (int64_t accepted : lengths) {
    if (accepted < kBlock - 1) script.wrong_positions.insert(start + accepted + 1);
    start += accepted + 1;
  }
  ReplayProposer proposer({script}, {.block_size = kBlock, .vocab = pair.target.model->config().vocab_size});
  SequenceRequest speculative = request;
  speculative.block_size = kBlock;
  std::vector<TraceRecord> trace;
  const std::vector<int32_t> out = run_engine(*pair.target.model, &proposer, {speculative}, 1, &trace).at(0);
  EXPECT_EQ(out, continuation);
  std::vector<int64_t> accepted;
  for (const TraceRecord& r : trace) accepted.push_back(r.accepted);
  EXPECT_EQ(accepted, lengths);
}

// 12 blocks of 8 positions for four sequences that grow to 6 blocks each: the newest is
// preempted (its recurrent state cleared with its blocks) and recomputed; every output is the
// one alone.
TEST_P(HybridEngine, SequencesPreemptedFromAPagedCacheKeepTheirOutput) {
  for (SpecMode spec : {SpecMode::kOff, SpecMode::kDflash, SpecMode::kAuto}) {
    std::vector<SequenceRequest> requests;
    for (uint32_t i = 0; i < 4; ++i) requests.push_back(greedy_request(some_tokens(9, kVocab, 20 + i), spec, 38));
    std::unique_ptr<PagedKvStore> paged = pair.target.model->make_paged_store(12, 8);
    Engine engine(*pair.target.model, pair.proposer.get(), {.max_slots = 4, .paged_cache = paged.get()});
    for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
    engine.run_until_idle();
    EXPECT_GT(engine.cache_stats()->preemptions, 0) << spec_mode_name(spec);
    std::vector<std::vector<int32_t>> outputs(requests.size());
    for (FinishedSequence& done : engine.take_finished()) outputs[done.id] = done.tokens;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(outputs[i], plain(requests[i])) << spec_mode_name(spec) << " sequence " << i;
    }
  }
}

// A conversation's second turn continues the first's tokens: it starts from the end of the first
// turn (every position the first ran, its last block a tail), where the first kept the recurrent
// state as it ended. A second turn that re-renders the first's output differently starts from the
// first prompt's last block boundary (16 of its 20 positions), where its prefill kept the state.
// Either way its output is the one without prefix caching.
TEST_P(HybridEngine, ALaterTurnStartsFromTheStateKeptAtTheEndOfTheTurnBefore) {
  const std::vector<int32_t> first_prompt = some_tokens(20, kVocab, 30);
  const std::vector<int32_t> more = some_tokens(7, kVocab, 31);
  for (const bool rerendered : {false, true}) {
    std::unique_ptr<PagedKvStore> paged = pair.target.model->make_paged_store(64, 8);
    Engine engine(*pair.target.model, pair.proposer.get(),
                  {.max_slots = 2, .paged_cache = paged.get(), .prefix_caching = true});
    engine.add(0, greedy_request(first_prompt, SpecMode::kDflash, 12));
    engine.run_until_idle();
    const std::vector<FinishedSequence> first = engine.take_finished();
    ASSERT_EQ(first.size(), 1u);
    std::vector<int32_t> second_prompt = first_prompt;
    second_prompt.insert(second_prompt.end(), first[0].tokens.begin(), first[0].tokens.end());
    if (rerendered) second_prompt[first_prompt.size()] = (second_prompt[first_prompt.size()] + 1) % kVocab;
    second_prompt.insert(second_prompt.end(), more.begin(), more.end());
    const SequenceRequest second = greedy_request(second_prompt, SpecMode::kDflash, 12);
    const int64_t hits_before = paged->blocks().stats().hit_tokens;
    engine.add(1, second);
    engine.run_until_idle();
    const std::vector<FinishedSequence> later = engine.take_finished();
    ASSERT_EQ(later.size(), 1u);
    // The first turn ran its prompt and every output token but the last.
    const auto first_positions = static_cast<int64_t>(first_prompt.size() + first[0].tokens.size()) - 1;
    EXPECT_EQ(paged->blocks().stats().hit_tokens - hits_before, rerendered ? 16 : first_positions);
    EXPECT_EQ(later[0].tokens, plain(second)) << (rerendered ? "re-rendered" : "continued");
  }
}

// Prefixes shared by many sequences at once (the same system prompt, then their own text), run
// together with prefix caching, preemption from a tight pool and speculation: every output is
// the one alone.
TEST_P(HybridEngine, SharedPrefixesUnderPreemptionDecodeAsAlone) {
  std::vector<SequenceRequest> requests;
  const std::vector<int32_t> system = some_tokens(18, kVocab, 40);
  for (uint32_t i = 0; i < 5; ++i) {
    std::vector<int32_t> prompt = system;
    const std::vector<int32_t> own = some_tokens(3 + i, kVocab, 41 + i);
    prompt.insert(prompt.end(), own.begin(), own.end());
    requests.push_back(greedy_request(prompt, i % 2 == 0 ? SpecMode::kDflash : SpecMode::kAuto, 30));
  }
  std::unique_ptr<PagedKvStore> paged = pair.target.model->make_paged_store(20, 8);
  Engine engine(*pair.target.model, pair.proposer.get(),
                {.max_slots = 4, .paged_cache = paged.get(), .prefix_caching = true});
  for (size_t i = 0; i < requests.size(); ++i) engine.add(i, requests[i]);
  engine.run_until_idle();
  EXPECT_GT(paged->blocks().stats().hit_tokens, 0);
  std::vector<std::vector<int32_t>> outputs(requests.size());
  for (FinishedSequence& done : engine.take_finished()) outputs[done.id] = done.tokens;
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(outputs[i], plain(requests[i])) << "sequence " << i;
}

INSTANTIATE_TEST_SUITE_P(Families, HybridEngine, ::testing::Values("qwen3_5", "qwen3_5_moe", "qwen3_next"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
}  // namespace flashq::testing
