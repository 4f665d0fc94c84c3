// The DFlash drafter gets tokens accepted: on the demo pair, greedy generation on fixed code
// prompts must commit well over one token per target pass. The lossless tests stay green with a
// drafter that drafts garbage (every block is then rejected and the output is still the
// target's); this is the test that fails then.
#include <gtest/gtest.h>
#include <omp.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/engine/demo_pair.h"
#include "worker/engine/engine.h"

namespace flashq::testing {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Python of the kind the pair was trained on, none of it from the training files: the prompt
// `make run` submits (held out), and three written for this test.
std::vector<std::string> code_prompts() {
  return {
      read_file("models/demo/demo_prompt.txt"),
      "def count_words(lines):\n    counts = {}\n    for line in lines:\n        for word in line.split():\n"
      "            counts[word] = counts.get(word, 0) + 1\n    return counts\n\n\ndef ",
      "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, item):\n"
      "        self._items.append(item)\n\n    def pop(self):\n        ",
      "import os\nimport sys\n\n\ndef main():\n    for name in sorted(os.listdir(sys.argv[1])):\n        path = ",
  };
}

TEST(DemoDrafterAcceptance, GreedyBlockOfFourCommitsWellOverOneTokenPerPass) {
  // Measured on this pair: tau 1.76 to 2.71 per prompt, 2.24 over the four (docs/perf.md: 2.78 at
  // block 4 on held-out code). Greedy decoding makes the run deterministic; the floor of 1.5
  // leaves room for another compiler's rounding to flip near-ties, yet a drafter whose drafts the
  // target never takes scores exactly 1.0.
  constexpr double kTauFloor = 1.5;
  constexpr int64_t kBlock = 4;
  constexpr int64_t kTokens = 96;
  omp_set_num_threads(1);  // a second thread only waits at barriers on a loaded two-core machine
  DemoPair pair;
  Engine engine(*pair.target, pair.proposer.get(), {.max_slots = 4});
  const std::vector<std::string> prompts = code_prompts();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_FALSE(prompts[i].empty()) << "prompt " << i;
    SequenceRequest request{.spec = SpecMode::kDflash, .block_size = kBlock};
    request.generation = {.prompt_tokens = pair.tokenizer->encode(prompts[i]), .max_tokens = kTokens, .ignore_eos = true};
    engine.add(i, request);
  }
  engine.run_until_idle();
  std::vector<FinishedSequence> finished = engine.take_finished();
  ASSERT_EQ(finished.size(), prompts.size());
  int64_t passes = 0, committed = 0;
  for (const FinishedSequence& done : finished) {
    const SpecStats& stats = done.spec_stats;
    EXPECT_EQ(done.tokens.size(), static_cast<size_t>(kTokens)) << "prompt " << done.id;
    EXPECT_GT(stats.accepted_tokens, 0) << "prompt " << done.id << ": no draft token was ever accepted";
    std::cout << "prompt " << done.id << ": tau " << stats.tau() << " (" << stats.accepted_tokens << " of "
              << stats.drafted_tokens << " draft tokens accepted)\n";
    passes += stats.target_passes;
    committed += stats.committed_tokens;
  }
  const double tau = static_cast<double>(committed) / static_cast<double>(passes);
  std::cout << "all prompts: tau " << tau << "\n";
  EXPECT_GE(tau, kTauFloor) << "the drafter's tokens are hardly ever accepted: " << committed << " tokens in "
                            << passes << " target passes";
}

}  // namespace
}  // namespace flashq::testing
