// Greedy verification in the engine (docs/dflash.md §2.4): with a proposer that replays the target's
// own continuation and is wrong exactly where a test says, the engine must keep the longest correct
// prefix, continue with the target's own token, honour every stop inside an accepted run, clamp
// the last block to max_tokens and to the context, and produce exactly the plain output. A float32
// model keeps verify and decode passes from rounding an argmax differently (docs/dflash.md §4.10).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tests/engine/replay_proposer.h"
#include "tests/model/tiny_model.h"
#include "worker/engine/engine.h"
#include "worker/serving/generate.h"

namespace flashq::testing {
namespace {

constexpr int64_t kBlock = 8;
constexpr int64_t kPromptLength = 9;

TinyModelSpec float32_spec(int64_t max_position) {
  TinyModelSpec spec;
  spec.dtype = DType::kF32;
  spec.max_position = max_position;
  spec.seed = 17;
  return spec;
}

// Wrong draft positions that make the target accept exactly lengths[k] draft tokens at step k,
// when every step drafts a full block of kBlock tokens.
std::set<int64_t> wrong_positions_for(const std::vector<int64_t>& lengths, int64_t prompt_length) {
  std::set<int64_t> wrong;
  int64_t start = prompt_length;  // the first output token sits here, chosen by the prefill
  for (int64_t accepted : lengths) {
    if (accepted < kBlock - 1) wrong.insert(start + accepted + 1);
    start += accepted + 1;
  }
  return wrong;
}

struct SpeculativeRun {
  SequenceOutput done;
  std::vector<TraceRecord> trace;
};

class Verification : public ::testing::Test {
 protected:
  explicit Verification(int64_t max_position = 4096)
      : tiny_(float32_spec(max_position)), tokenizer_(load_tokenizer(tiny_.dir.path())) {}

  std::vector<int32_t> prompt(uint32_t seed = 3) const { return some_tokens(kPromptLength, 500, seed); }

  GenerationRequest greedy(int64_t max_tokens, uint32_t prompt_seed = 3) const {
    return {.prompt_tokens = prompt(prompt_seed), .max_tokens = max_tokens, .ignore_eos = true};
  }

  GenerationResult plain(const GenerationRequest& request) { return generate(*tiny_.model, *tokenizer_, request); }

  // The prompt followed by the target's plain greedy continuation, with no stop but max_tokens.
  ReplayScript continuation_of(const GenerationRequest& request, std::set<int64_t> wrong = {}) {
    GenerationRequest free_run = request;
    free_run.stop.clear();
    free_run.stop_token_ids.clear();
    ReplayScript script{request.prompt_tokens, std::move(wrong)};
    const GenerationResult result = plain(free_run);
    script.tokens.insert(script.tokens.end(), result.tokens.begin(), result.tokens.end());
    return script;
  }

  ReplayOptions replay_options() const {
    return {.block_size = kBlock,
            .vocab = tiny_.model->config().vocab_size,
            .tap_layers = {0, 1},
            .target_hidden = tiny_.model->config().hidden_size};
  }

  SpeculativeRun speculate(const GenerationRequest& request, const ReplayScript& script,
                           ReplayOptions options) {
    ReplayProposer proposer({script}, std::move(options));
    SpeculativeRun run;
    run.done = generate_sequence(*tiny_.model, &proposer, *tokenizer_, {.generation = request, .spec = SpecMode::kDflash},
                                 {.max_slots = 1, .on_trace = [&](const TraceRecord& r) { run.trace.push_back(r); }});
    return run;
  }
  SpeculativeRun speculate(const GenerationRequest& request, const ReplayScript& script) {
    return speculate(request, script, replay_options());
  }

  LoadedTinyModel tiny_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

// Draft tokens equal to the target's continuation, counted from the start of the draft.
int64_t leading_correct(const TraceRecord& r, const ReplayScript& script) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(r.draft.size()) &&
         r.draft[static_cast<size_t>(n)] == script.tokens[static_cast<size_t>(r.start + 1 + n)]) {
    ++n;
  }
  return n;
}

std::vector<int64_t> accepted_lengths(const std::vector<TraceRecord>& trace) {
  std::vector<int64_t> lengths;
  for (const TraceRecord& r : trace) lengths.push_back(r.accepted);
  return lengths;
}

std::vector<size_t> draft_sizes(const std::vector<TraceRecord>& trace) {
  std::vector<size_t> sizes;
  for (const TraceRecord& r : trace) sizes.push_back(r.draft.size());
  return sizes;
}

// Every acceptance length 0..B-1 once, then nothing more to generate.
const std::vector<int64_t> kEveryAcceptanceLength = {0, 1, 2, 3, 4, 5, 6, 7};
constexpr int64_t kTokensForEveryLength = 1 + (0 + 1) + (1 + 1) + (2 + 1) + (3 + 1) + (4 + 1) + (5 + 1) + (6 + 1) + (7 + 1);

TEST_F(Verification, AcceptsExactlyTheLeadingCorrectDraftTokens) {
  const GenerationRequest request = greedy(kTokensForEveryLength);
  const ReplayScript script = continuation_of(request, wrong_positions_for(kEveryAcceptanceLength, kPromptLength));
  const SpeculativeRun run = speculate(request, script);

  EXPECT_EQ(accepted_lengths(run.trace), kEveryAcceptanceLength);
  for (const TraceRecord& r : run.trace) {
    EXPECT_EQ(r.accepted, leading_correct(r, script)) << "step at position " << r.start;
  }
}

TEST_F(Verification, BonusIsTheTargetsOwnNextToken) {
  const GenerationRequest request = greedy(kTokensForEveryLength);
  const ReplayScript script = continuation_of(request, wrong_positions_for(kEveryAcceptanceLength, kPromptLength));
  const SpeculativeRun run = speculate(request, script);

  ASSERT_EQ(run.trace.size(), kEveryAcceptanceLength.size());
  for (const TraceRecord& r : run.trace) {
    EXPECT_EQ(r.bonus, script.tokens[static_cast<size_t>(r.start + r.accepted + 1)])
        << "step at position " << r.start << " after " << r.accepted << " accepted";
  }
}

TEST_F(Verification, OutputEqualsThePlainContinuationWhateverTheDraftErrors) {
  const GenerationRequest request = greedy(kTokensForEveryLength);
  const GenerationResult expected = plain(request);
  const SpeculativeRun run = speculate(request, continuation_of(request, wrong_positions_for(kEveryAcceptanceLength, kPromptLength)));

  EXPECT_EQ(run.done.tokens, expected.tokens);
  EXPECT_EQ(run.done.text, expected.text);
  EXPECT_EQ(run.done.finish_reason, FinishReason::kLength);
}

TEST_F(Verification, CorrectDraftsAreAcceptedAsWholeBlocks) {
  const GenerationRequest request = greedy(1 + 3 * kBlock + 3);  // three full blocks, then 3 tokens
  const ReplayScript script = continuation_of(request);
  const SpeculativeRun run = speculate(request, script);

  EXPECT_EQ(draft_sizes(run.trace), (std::vector<size_t>{7, 7, 7, 2}));
  EXPECT_EQ(accepted_lengths(run.trace), (std::vector<int64_t>{7, 7, 7, 2}));
  for (const TraceRecord& r : run.trace) {
    EXPECT_EQ(r.bonus, script.tokens[static_cast<size_t>(r.start + static_cast<int64_t>(r.draft.size()) + 1)])
        << "the bonus of the step at position " << r.start << " is the token after the whole block";
  }
  EXPECT_EQ(run.done.tokens, plain(request).tokens);
}

TEST_F(Verification, AStopTokenInsideAnAcceptedRunEndsTheOutputBeforeIt) {
  const GenerationRequest free_run = greedy(1 + 2 * kBlock);
  const ReplayScript script = continuation_of(free_run);
  const std::vector<int32_t> output(script.tokens.begin() + kPromptLength, script.tokens.end());
  // A token first produced in the middle of the first block (output 1..7 is its accepted run).
  int64_t stop_at = 3;
  while (stop_at < 7 && std::find(output.begin(), output.begin() + stop_at, output[stop_at]) != output.begin() + stop_at) {
    ++stop_at;
  }
  ASSERT_LT(stop_at, 7) << "no fresh token in the middle of the first block";

  GenerationRequest request = free_run;
  request.stop_token_ids = {output[static_cast<size_t>(stop_at)]};
  const SpeculativeRun run = speculate(request, script);

  EXPECT_EQ(run.done.tokens, std::vector<int32_t>(output.begin(), output.begin() + stop_at));
  EXPECT_EQ(run.done.finish_reason, FinishReason::kStop);
  ASSERT_EQ(run.trace.size(), 1u) << "the sequence ends with the block that held the stop token";
  EXPECT_EQ(run.trace[0].accepted, kBlock - 1) << "tokens after the stop token were accepted, then dropped";
}

TEST_F(Verification, AStopStringInsideAnAcceptedRunEndsTheTextBeforeIt) {
  const GenerationRequest free_run = greedy(1 + 4 * kBlock);
  const ReplayScript script = continuation_of(free_run);
  // Three bytes of the text that follows output token 1 + kBlock + 3, in the middle of the second
  // block (ids past the tokenizer have no text, so the text is measured as the engine streams it).
  std::vector<size_t> text_length_after;
  std::string streamed;
  const GenerationResult expected_free =
      generate(*tiny_.model, *tokenizer_, free_run, [&](std::span<const int32_t> ids, std::string_view text) {
        streamed += text;
        text_length_after.insert(text_length_after.end(), ids.size(), streamed.size());
      });
  const size_t offset = text_length_after.at(1 + kBlock + 3);
  ASSERT_GT(expected_free.text.size(), offset + 3);
  const std::string stop = expected_free.text.substr(offset, 3);

  GenerationRequest request = free_run;
  request.stop = {stop};
  const SpeculativeRun run = speculate(request, script);

  EXPECT_EQ(run.done.text, expected_free.text.substr(0, expected_free.text.find(stop))) << "stop string '" << stop << "'";
  EXPECT_EQ(run.done.finish_reason, FinishReason::kStop);
  EXPECT_EQ(run.done.tokens, plain(request).tokens) << "the output ids end with the token that completed the stop";
  ASSERT_FALSE(run.trace.empty());
  EXPECT_EQ(run.trace.back().accepted, kBlock - 1) << "the stop string sat inside an accepted run";
  EXPECT_LT(run.done.tokens.size(), 1 + kBlock * run.trace.size()) << "tokens after the stop string were dropped";
}

TEST_F(Verification, MaxTokensInsideABlockClampsTheLastBlock) {
  const GenerationRequest request = greedy(1 + kBlock + 3);
  const SpeculativeRun run = speculate(request, continuation_of(request));

  EXPECT_EQ(run.done.tokens.size(), 12u);
  EXPECT_EQ(run.done.tokens, plain(request).tokens);
  EXPECT_EQ(run.done.finish_reason, FinishReason::kLength);
  EXPECT_EQ(draft_sizes(run.trace), (std::vector<size_t>{7, 2})) << "the last block holds exactly the tokens still allowed";
}

class VerificationAtTheContextEnd : public Verification {
 protected:
  static constexpr int64_t kContext = 40;
  VerificationAtTheContextEnd() : Verification(kContext) {}
};

TEST_F(VerificationAtTheContextEnd, ClampsTheLastBlockAndEndsWithLength) {
  const GenerationRequest request = greedy(200);  // more than the context holds
  const GenerationResult expected = plain(request);
  const ReplayScript script = continuation_of(request);
  ReplayProposer proposer({script}, replay_options());
  std::vector<TraceRecord> trace;
  Engine engine(*tiny_.model, &proposer,
                {.max_slots = 1, .on_trace = [&](const TraceRecord& r) { trace.push_back(r); }});
  engine.add(1, {.generation = request, .spec = SpecMode::kDflash});
  ASSERT_NO_THROW(engine.run_until_idle());
  const FinishedSequence done = engine.take_finished().at(0);

  EXPECT_EQ(done.finish_reason, FinishReason::kLength);
  EXPECT_EQ(done.tokens, expected.tokens);
  EXPECT_LE(proposer.log(0).committed.size(), static_cast<size_t>(kContext)) << "committed positions past the context";
  for (const TraceRecord& r : trace) {
    EXPECT_LE(r.start + static_cast<int64_t>(r.draft.size()) + 1, kContext)
        << "the block verified at position " << r.start << " runs past the context";
  }
  ASSERT_FALSE(trace.empty());
  // 9 prompt positions, then blocks of 8 at positions 9, 17 and 25; at 33 only 7 are left.
  EXPECT_EQ(trace.back().draft.size(), 6u) << "the last block is clamped to the room left in the context";
}

// What the text side does when it finds a stop string (Engine::stop): the sequence ends with
// `stop` at the start of the next step, with nothing more computed or emitted for it.
TEST_F(Verification, StoppingASequenceEndsItAtTheNextStepWithoutAnotherPass) {
  const GenerationRequest request = greedy(40);
  ReplayProposer proposer({continuation_of(request)}, replay_options());
  std::vector<TraceRecord> trace;
  std::vector<StepEvent> events;
  Engine engine(*tiny_.model, &proposer,
                {.max_slots = 1,
                 .on_event = [&](const StepEvent& e) { events.push_back(e); },
                 .on_trace = [&](const TraceRecord& r) { trace.push_back(r); }});
  engine.add(1, {.generation = request, .spec = SpecMode::kDflash});
  engine.step();
  engine.step();
  const size_t passes = trace.size();
  const size_t emitted = events.size();
  ASSERT_GT(passes, 0u);
  engine.stop(1);
  engine.stop(99);  // unknown: ignored
  engine.step();
  EXPECT_TRUE(engine.idle());
  EXPECT_EQ(trace.size(), passes) << "no pass after the stop";
  ASSERT_EQ(events.size(), emitted + 1);
  EXPECT_TRUE(events.back().finished);
  EXPECT_TRUE(events.back().token_ids.empty());
  EXPECT_EQ(events.back().finish_reason, FinishReason::kStop);
  EXPECT_EQ(engine.take_finished().at(0).finish_reason, FinishReason::kStop);
}

TEST_F(Verification, CancellingASequenceEndsItWithCancelled) {
  const GenerationRequest request = greedy(40);
  ReplayProposer proposer({continuation_of(request)}, replay_options());
  Engine engine(*tiny_.model, &proposer, {.max_slots = 1});
  engine.add(1, {.generation = request, .spec = SpecMode::kDflash});
  engine.step();
  engine.step();
  engine.cancel(1);
  engine.run_until_idle();
  const FinishedSequence done = engine.take_finished().at(0);

  EXPECT_EQ(done.finish_reason, FinishReason::kCancelled);
  const std::vector<int32_t> expected = plain(request).tokens;
  ASSERT_LT(done.tokens.size(), expected.size());
  EXPECT_EQ(done.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + static_cast<ptrdiff_t>(done.tokens.size())))
      << "what was emitted before the cancellation is the plain continuation";
}

TEST_F(Verification, CancellingOneSequenceLeavesTheOthersUnaffected) {
  const GenerationRequest first = greedy(40, 3);
  const GenerationRequest second = greedy(40, 4);
  ReplayProposer proposer({continuation_of(first, {12, 20, 21}), continuation_of(second, {11, 15, 30})},
                          replay_options());
  std::vector<TraceRecord> trace;
  Engine engine(*tiny_.model, &proposer,
                {.max_slots = 2, .on_trace = [&](const TraceRecord& r) { trace.push_back(r); }});
  engine.add(1, {.generation = first, .spec = SpecMode::kDflash});
  engine.add(2, {.generation = second, .spec = SpecMode::kDflash});
  engine.step();
  engine.step();
  engine.cancel(1);
  const size_t proposals_before_cancel = proposer.log(0).proposals.size();
  engine.run_until_idle();

  std::vector<FinishedSequence> finished = engine.take_finished();
  ASSERT_EQ(finished.size(), 2u);
  std::sort(finished.begin(), finished.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  EXPECT_EQ(finished[0].finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(proposer.log(0).proposals.size(), proposals_before_cancel) << "a cancelled sequence is no longer drafted";
  EXPECT_EQ(finished[1].finish_reason, FinishReason::kLength);
  EXPECT_EQ(finished[1].tokens, plain(second).tokens);
  EXPECT_GT(std::count_if(trace.begin(), trace.end(), [](const TraceRecord& r) { return r.id == 2; }), 2)
      << "the other sequence kept speculating after the cancellation";
}

TEST_F(Verification, SpecStatsAgreeWithTheTrace) {
  const std::vector<int64_t> lengths = {3, 0, 7, 5, 2, 7, 1};
  const int64_t produced = std::accumulate(lengths.begin(), lengths.end(), int64_t{0}) + static_cast<int64_t>(lengths.size());
  const GenerationRequest request = greedy(1 + produced);
  const SpeculativeRun run = speculate(request, continuation_of(request, wrong_positions_for(lengths, kPromptLength)));
  ASSERT_EQ(accepted_lengths(run.trace), lengths);

  const SpecStats& stats = run.done.engine_record.spec_stats;
  int64_t drafted = 0, accepted = 0;
  for (const TraceRecord& r : run.trace) {
    drafted += static_cast<int64_t>(r.draft.size());
    accepted += r.accepted;
  }
  EXPECT_EQ(stats.draft_steps, static_cast<int64_t>(run.trace.size()));
  EXPECT_EQ(stats.drafted_tokens, drafted);
  EXPECT_EQ(stats.accepted_tokens, accepted);
  EXPECT_EQ(stats.target_passes, static_cast<int64_t>(run.trace.size()));
  EXPECT_EQ(stats.committed_tokens, produced);
  EXPECT_DOUBLE_EQ(stats.tau(), static_cast<double>(produced) / static_cast<double>(lengths.size()));
}

TEST_F(Verification, ServesAProposerThatNeedsNoHiddenStates) {
  const GenerationRequest request = greedy(1 + 2 * kBlock);
  ReplayOptions options = replay_options();
  options.tap_layers = {};
  SpeculativeRun run;
  ASSERT_NO_THROW(run = speculate(request, continuation_of(request, {12}), options));
  EXPECT_EQ(run.done.tokens, plain(request).tokens);
  EXPECT_EQ(accepted_lengths(run.trace).front(), 2);
}

// `spec: auto` where each pass costs in proportion to its rows (a compute-bound machine): a
// batch's extra rows never pay, so once the engine has measured its passes it keeps no hidden
// states for the sequences (observe_without_taps), not even of a later sequence's prompt. Where
// a pass costs the same whatever its rows, every committed token reaches the proposer with its
// taps. The output is the plain one in both.
TEST_F(Verification, AutoKeepsNoHiddenStatesWhereNoDraftingCouldPay) {
  constexpr int64_t kSequences = 4;
  constexpr int64_t kTokens = 40;
  std::vector<GenerationRequest> requests;
  std::vector<ReplayScript> scripts;
  for (int64_t k = 0; k < kSequences; ++k) {
    requests.push_back(greedy(kTokens, static_cast<uint32_t>(3 + k)));
    scripts.push_back(continuation_of(requests.back()));
  }
  std::vector<ReplayScript> two_waves = scripts;
  two_waves.insert(two_waves.end(), scripts.begin(), scripts.end());
  struct Observed {
    int64_t first_wave_without_taps = 0;
    bool second_wave_all_without_taps = true;  // prompts included
    int64_t second_wave_without_taps = 0;
  };
  // Two waves of the same sequences through one engine.
  auto run_auto = [&](PassTimer target, PassTimer draft) {
    ReplayProposer proposer(two_waves, replay_options());
    Engine engine(*tiny_.model, &proposer,
                  {.max_slots = kSequences, .target_pass_timer = std::move(target), .draft_pass_timer = std::move(draft)});
    Observed observed;
    for (int64_t wave = 0; wave < 2; ++wave) {
      for (int64_t k = 0; k < kSequences; ++k) {
        engine.add(static_cast<uint64_t>(wave * kSequences + k),
                   {.generation = requests[static_cast<size_t>(k)], .spec = SpecMode::kAuto});
      }
      engine.run_until_idle();
      for (const FinishedSequence& done : engine.take_finished()) {
        EXPECT_EQ(done.tokens, plain(requests[done.id % kSequences]).tokens) << "sequence " << done.id;
      }
      for (int64_t k = 0; k < kSequences; ++k) {
        const ReplayLog& log = proposer.log(static_cast<size_t>(wave * kSequences + k));
        if (wave == 0) {
          observed.first_wave_without_taps += log.observed_without_taps;
        } else {
          observed.second_wave_without_taps += log.observed_without_taps;
          observed.second_wave_all_without_taps &= log.observed_without_taps == static_cast<int64_t>(log.committed.size());
        }
      }
    }
    return observed;
  };
  const Observed compute_bound = run_auto([](int64_t rows, double) { return 1e-3 * static_cast<double>(rows); },
                                          [](int64_t rows, double) { return 0.5e-3 * static_cast<double>(rows); });
  EXPECT_GE(compute_bound.first_wave_without_taps, kSequences * kTokens / 2) << "taps kept where no block could pay";
  EXPECT_TRUE(compute_bound.second_wave_all_without_taps) << "a measured engine kept taps it could not use";
  const Observed flat = run_auto([](int64_t, double) { return 1e-3; }, [](int64_t, double) { return 1e-4; });
  EXPECT_EQ(flat.first_wave_without_taps + flat.second_wave_without_taps, 0) << "taps dropped where drafting pays";
}

}  // namespace
}  // namespace flashq::testing
