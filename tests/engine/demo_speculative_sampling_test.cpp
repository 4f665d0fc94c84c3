// Speculative sampling with the real DFlash drafter keeps the target's distribution, end to end:
// on the demo pair (whose drafts the target often accepts, so both branches of the acceptance
// rule run), with temperature, top-k and top-p together, the engine's sampled output with
// speculation is compared with plain sampling by chi-square tests of homogeneity, per position
// and jointly over the first positions of the block (a rule that kept each position's marginal
// but not their dependence would pass the first and fail the second).
#include <gtest/gtest.h>
#include <omp.h>

#include <iostream>
#include <string>
#include <vector>

#include "tests/engine/chi_square.h"
#include "tests/engine/demo_pair.h"
#include "worker/engine/engine.h"

namespace flashq::testing {
namespace {

class DemoSpeculativeSampling : public ::testing::Test {
 protected:
  // One OpenMP thread: at these sizes a second thread gains little, and on a loaded two-core
  // machine one that is not scheduled holds every barrier (the test took 38 s instead of 3).
  static void SetUpTestSuite() { omp_set_num_threads(1); }

  static constexpr int64_t kBlock = 4;
  static constexpr int64_t kTokens = 1 + kBlock;  // the prefill's token, then one full block
  // About 3 s in a Release build on one core: the test exists for rules that move the output
  // far from the target's (one accepting every draft token gives chi-square 400-1000 against
  // critical values of 30-44 here), not for effects of a few percent.
  static constexpr int64_t kSequences = 500;
  static constexpr SamplingParams kSampling = {.temperature = 0.8f, .top_k = 20, .top_p = 0.9f};

  // outputs[i] = the tokens of the sequence with seed first_seed + i.
  std::vector<std::vector<int32_t>> run_many(bool speculate, uint64_t first_seed,
                                             std::vector<TraceRecord>* trace = nullptr) {
    EngineOptions options{.max_slots = 64};
    if (trace) options.on_trace = [trace](const TraceRecord& r) { trace->push_back(r); };
    Engine engine(*pair_.target, pair_.proposer.get(), options);
    const std::vector<int32_t> prompt = pair_.tokenizer->encode(kPrompt);
    for (int64_t i = 0; i < kSequences; ++i) {
      SamplingParams sampling = kSampling;
      sampling.seed = first_seed + static_cast<uint64_t>(i);
      SequenceRequest request{.spec = speculate ? SpecMode::kDflash : SpecMode::kOff,
                              .block_size = speculate ? kBlock : 0};
      request.generation = {.prompt_tokens = prompt, .max_tokens = kTokens, .sampling = sampling, .ignore_eos = true};
      engine.add(static_cast<uint64_t>(i), request);
    }
    engine.run_until_idle();
    std::vector<std::vector<int32_t>> outputs(static_cast<size_t>(kSequences));
    for (FinishedSequence& done : engine.take_finished()) outputs.at(done.id) = std::move(done.tokens);
    return outputs;
  }

  // The code of the tokens at `positions` of each output, one category per combination.
  std::vector<int64_t> joint(const std::vector<std::vector<int32_t>>& outputs, std::vector<size_t> positions) const {
    const int64_t vocab = pair_.target->config().vocab_size;
    std::vector<int64_t> codes;
    for (const auto& out : outputs) {
      int64_t code = 0;
      for (size_t p : positions) code = code * vocab + out.at(p);
      codes.push_back(code);
    }
    return codes;
  }

  // A prompt after which the drafter's greedy draft is often, not always, among the target's
  // likely tokens, with a spread of continuations (4 to 12 categories per statistic).
  static constexpr const char* kPrompt = "    def __init__(self";
  DemoPair pair_;
};

TEST_F(DemoSpeculativeSampling, SampledTokensHaveThePlainDistributionJointlyUnderTopKAndTopP) {
  // Disjoint seeds: the two samples are independent, so only their distributions can agree.
  const std::vector<std::vector<int32_t>> plain = run_many(false, 1);
  std::vector<TraceRecord> trace;
  const std::vector<std::vector<int32_t>> speculative = run_many(true, 1'000'001, &trace);

  int64_t blocks = 0, first_accepted = 0, two_accepted = 0;
  for (const TraceRecord& r : trace) {
    ++blocks;
    first_accepted += r.accepted >= 1;
    two_accepted += r.accepted >= 2;
  }
  const double acceptance = static_cast<double>(first_accepted) / static_cast<double>(blocks);
  std::cout << "acceptance " << acceptance << " (" << first_accepted << " of " << blocks << " blocks), "
            << two_accepted << " blocks with two or more\n";
  // Measured: the first draft token is accepted in 39% of blocks, two or more in 230 of them.
  EXPECT_TRUE(acceptance > 0.2 && acceptance < 0.8)
      << "acceptance " << acceptance << ": both accepting and rejecting must be exercised";
  EXPECT_GE(two_accepted, 50) << "too few blocks accept two draft tokens for the joint statistics to see them";

  // Six statistics, each failing a correct sampler with probability below 0.00001: the suite
  // fails by chance with probability below 0.00006 (the seeds are fixed, so a build draws the
  // same numbers every run).
  struct Statistic {
    std::string name;
    std::vector<size_t> positions;
  };
  const std::vector<Statistic> statistics = {
      {"position 1", {1}},           {"position 2", {2}},           {"position 3", {3}},
      {"position 4", {4}},           {"positions 1-2", {1, 2}},     {"positions 1-3", {1, 2, 3}},
  };
  for (const Statistic& s : statistics) {
    const Homogeneity h =
        chi_square_homogeneity(joint(plain, s.positions), joint(speculative, s.positions), /*min_count=*/20,
                               /*max_categories=*/30);
    std::cout << s.name << ": chi-square " << h.chi_square << ", " << h.degrees_of_freedom << " degrees of freedom\n";
    ASSERT_GE(h.degrees_of_freedom, 3) << s.name << ": too few categories for a test";
    EXPECT_LT(h.chi_square, chi_square_critical_0_00001(h.degrees_of_freedom))
        << s.name << ": speculative and plain sampling differ (chi-square " << h.chi_square << ", "
        << h.degrees_of_freedom << " degrees of freedom)";
  }
}

}  // namespace
}  // namespace flashq::testing
