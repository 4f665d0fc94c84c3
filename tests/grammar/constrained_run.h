// What the grammar's end-to-end tests share: a seeded greedy request under a compiled grammar,
// one run of it alone in an engine over a DFlash test pair, and the text of its tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/engine/dflash_test_pair.h"
#include "worker/grammar/grammar_constraint.h"
#include "worker/text/text_stream.h"

namespace flashq::testing {

// A prompt of 5..8 seeded tokens, `max_tokens`, speculation `spec` (blocks of 6 where it drafts),
// the output held to `grammar`.
inline SequenceRequest constrained_request(uint32_t seed, SpecMode spec,
                                           const std::shared_ptr<const grammar::CompiledGrammar>& grammar,
                                           int64_t max_tokens) {
  SequenceRequest r;
  r.generation.prompt_tokens = some_tokens(5 + seed % 4, 459, seed);
  r.generation.max_tokens = max_tokens;
  r.spec = spec;
  r.block_size = spec == SpecMode::kOff ? 0 : 6;
  r.constraint = std::make_shared<grammar::GrammarConstraint>(grammar);
  return r;
}

inline FinishedSequence run_alone(DFlashTestPair& pair, const SequenceRequest& r) {
  Engine engine(*pair.target.model, pair.proposer.get(), {.max_slots = 1});
  engine.add(0, r);
  engine.run_until_idle();
  return engine.take_finished().at(0);
}

inline std::string text_of(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens) {
  TextStream text(tokenizer, {});
  std::string out = text.push(tokens).text;
  out += text.finish().text;
  return out;
}

}  // namespace flashq::testing
