// A compiled grammar as the engine's constraint (grammar_constraint.h), end to end on a random
// tiny target that writes nothing sensible on its own: every output is a JSON document its schema
// accepts (the grammar carries it), ended by the model's eos where the grammar may end, with and
// without speculation; greedy DFlash equals greedy target-only decoding token for token.
#include "worker/grammar/grammar_constraint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/grammar/constrained_run.h"
#include "worker/grammar/grammar_compiler.h"

namespace flashq::testing {
namespace {

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "enum": ["queue", "broker", "worker"]},
    "count": {"type": "integer", "minimum": 0, "maximum": 99},
    "ok": {"type": "boolean"}
  },
  "required": ["name", "count", "ok"],
  "additionalProperties": false
})";

class GrammarConstraintTest : public ::testing::Test {
 protected:
  GrammarConstraintTest() : pair_(f32_target(47), {.layers = 1, .block_size = 8, .seed = 47}) {
    const ModelConfig& config = pair_.target.model->config();
    auto table = std::make_shared<const grammar::TokenTable>(*pair_.tokenizer, config.eos_token_ids,
                                                             static_cast<int32_t>(config.vocab_size));
    grammar_ = grammar::compile_grammar({.format = grammar::GrammarFormat::kJsonSchema, .text = kSchema}, table);
  }

  SequenceRequest request(uint32_t seed, SpecMode spec) const { return constrained_request(seed, spec, grammar_, 200); }
  FinishedSequence run(const SequenceRequest& r) { return run_alone(pair_, r); }
  std::string text_of(const std::vector<int32_t>& tokens) const { return testing::text_of(*pair_.tokenizer, tokens); }

  DFlashTestPair pair_;
  std::shared_ptr<const grammar::CompiledGrammar> grammar_;
};

TEST_F(GrammarConstraintTest, EveryOutputIsADocumentTheSchemaAccepts) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (SpecMode spec : {SpecMode::kOff, SpecMode::kDflash}) {
      const FinishedSequence done = run(request(seed, spec));
      ASSERT_EQ(done.finish_reason, FinishReason::kStop) << "seed " << seed << ": ended by eos";
      const std::string text = text_of(done.tokens);
      const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(doc.is_discarded()) << "seed " << seed << ": not JSON: " << text;
      ASSERT_TRUE(doc.is_object()) << text;
      EXPECT_EQ(doc.size(), 3u) << text;
      EXPECT_TRUE(doc["name"] == "queue" || doc["name"] == "broker" || doc["name"] == "worker") << text;
      ASSERT_TRUE(doc["count"].is_number_integer()) << text;
      EXPECT_TRUE(doc["count"].get<int64_t>() >= 0 && doc["count"].get<int64_t>() <= 99) << text;
      EXPECT_TRUE(doc["ok"].is_boolean()) << text;
    }
  }
}

TEST_F(GrammarConstraintTest, GreedyDflashEqualsGreedyTargetOnly) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    EXPECT_EQ(run(request(seed, SpecMode::kDflash)).tokens, run(request(seed, SpecMode::kOff)).tokens)
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace flashq::testing
