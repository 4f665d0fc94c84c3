// Strict tools' grammars (tool_call_grammar.h) as the engine's constraint, end to end on a random
// tiny target that writes nothing sensible on its own: with a required choice every output is a
// Hermes call of one of the tools with arguments its schema accepts, ended by eos, with and
// without speculation; the lazy ("auto") grammar lets the model's own text through until it
// opens a call; greedy DFlash equals greedy target-only decoding token for token for both; and
// the constraint rolls back across the trigger exactly, as the engine does after a rejected draft.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/grammar/constrained_run.h"
#include "worker/grammar/grammar_compiler.h"
#include "worker/grammar/grammar_constraint.h"
#include "worker/grammar/tool_call_grammar.h"
#include "worker/text/text_stream.h"

namespace flashq::testing {
namespace {

constexpr const char* kCountSchema =
    R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"], "additionalProperties": false})";
constexpr const char* kPickSchema =
    R"({"type": "object", "properties": {"pick": {"type": "string", "enum": ["queue", "broker"]}}, "required": ["pick"], "additionalProperties": false})";

grammar::ToolCallRequest tool_calls(grammar::ToolCallChoice choice) {
  return {.syntax = grammar::ToolCallSyntax::kHermes,
          .choice = choice,
          .tools = {{.name = "count", .parameters_json = kCountSchema}, {.name = "pick", .parameters_json = kPickSchema}},
          .parallel = false};
}

class ToolCallDecodingTest : public ::testing::Test {
 protected:
  ToolCallDecodingTest() : pair_(f32_target(53), {.layers = 1, .block_size = 8, .seed = 53}) {
    const ModelConfig& config = pair_.target.model->config();
    table_ = std::make_shared<const grammar::TokenTable>(*pair_.tokenizer, config.eos_token_ids,
                                                         static_cast<int32_t>(config.vocab_size));
    required_ = compile(grammar::ToolCallChoice::kRequired);
    lazy_ = compile(grammar::ToolCallChoice::kAuto);
  }

  std::shared_ptr<const grammar::CompiledGrammar> compile(grammar::ToolCallChoice choice) const {
    return grammar::compile_grammar({.format = grammar::GrammarFormat::kGbnf, .text = tool_call_grammar(tool_calls(choice))},
                                    table_);
  }

  SequenceRequest request(uint32_t seed, SpecMode spec, const std::shared_ptr<const grammar::CompiledGrammar>& g) const {
    return constrained_request(seed, spec, g, 160);
  }
  FinishedSequence run(const SequenceRequest& r) { return run_alone(pair_, r); }
  std::string text_of(const std::vector<int32_t>& tokens) const { return testing::text_of(*pair_.tokenizer, tokens); }

  DFlashTestPair pair_;
  std::shared_ptr<const grammar::TokenTable> table_;
  std::shared_ptr<const grammar::CompiledGrammar> required_;
  std::shared_ptr<const grammar::CompiledGrammar> lazy_;
};

// The call's {"name", "arguments"} object between the tags, or null when the text is no call.
nlohmann::json hermes_call(const std::string& text) {
  const std::string open = "<tool_call>\n";
  const std::string close = "\n</tool_call>";
  if (text.rfind(open, 0) != 0 || text.size() < open.size() + close.size() ||
      text.compare(text.size() - close.size(), close.size(), close) != 0) {
    return nullptr;
  }
  const std::string body = text.substr(open.size(), text.size() - open.size() - close.size());
  const nlohmann::json call = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  return call.is_discarded() ? nlohmann::json() : call;
}

TEST_F(ToolCallDecodingTest, RequiredChoiceMakesEveryOutputACallTheSchemaAccepts) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (SpecMode spec : {SpecMode::kOff, SpecMode::kDflash}) {
      const FinishedSequence done = run(request(seed, spec, required_));
      ASSERT_EQ(done.finish_reason, FinishReason::kStop) << "seed " << seed << ": ended by eos";
      const std::string text = text_of(done.tokens);
      const nlohmann::json call = hermes_call(text);
      ASSERT_TRUE(call.is_object()) << "seed " << seed << ": not a Hermes call: " << text;
      const nlohmann::json& arguments = call["arguments"];
      if (call["name"] == "count") {
        ASSERT_TRUE(arguments["n"].is_number_integer()) << text;
        EXPECT_TRUE(arguments["n"] >= 0 && arguments["n"] <= 9) << text;
      } else {
        ASSERT_EQ(call["name"], "pick") << text;
        EXPECT_TRUE(arguments["pick"] == "queue" || arguments["pick"] == "broker") << text;
      }
      EXPECT_EQ(arguments.size(), 1u) << text;
    }
  }
}

TEST_F(ToolCallDecodingTest, GreedyDflashEqualsGreedyTargetOnlyRequiredAndLazy) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (const auto* g : {&required_, &lazy_}) {
      EXPECT_EQ(run(request(seed, SpecMode::kDflash, *g)).tokens, run(request(seed, SpecMode::kOff, *g)).tokens)
          << "seed " << seed << (g == &lazy_ ? ", lazy" : ", required");
    }
  }
}

TEST_F(ToolCallDecodingTest, LazyGrammarLetsTheModelsTextThroughUntilACallOpens) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const FinishedSequence done = run(request(seed, SpecMode::kDflash, lazy_));
    const std::string text = text_of(done.tokens);
    const size_t opened = text.find("<tool_call>");
    if (opened == std::string::npos) {
      EXPECT_FALSE(text.empty()) << "seed " << seed << ": the model's own text";
      continue;
    }
    if (done.finish_reason == FinishReason::kStop) {
      EXPECT_TRUE(hermes_call(text.substr(opened)).is_object()) << "seed " << seed << ": an opened call ends complete";
    }
  }
}

TEST_F(ToolCallDecodingTest, LazyConstraintRollsBackAcrossTheTrigger) {
  grammar::GrammarConstraint constraint(lazy_);
  const std::vector<int32_t> free_text = pair_.tokenizer->encode("Let me see. ");
  const std::vector<int32_t> opened = pair_.tokenizer->encode("<tool_call>\n{\"name\": \"pi");
  for (int32_t token : free_text) constraint.advance(token);
  EXPECT_TRUE(constraint.can_end()) << "free text may end";
  for (int32_t token : opened) constraint.advance(token);
  EXPECT_FALSE(constraint.can_end()) << "an opened call may end only complete";
  std::vector<uint32_t> mask(table_->mask_words());
  constraint.fill_allowed(mask);
  const std::vector<int32_t> other = pair_.tokenizer->encode("x");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_FALSE((mask[other[0] / 32] >> (other[0] % 32)) & 1) << "only the name 'pick' goes on from 'pi'";
  constraint.rollback(static_cast<int64_t>(opened.size()));
  EXPECT_TRUE(constraint.can_end());
  std::fill(mask.begin(), mask.end(), 0);
  constraint.fill_allowed(mask);
  EXPECT_TRUE((mask[other[0] / 32] >> (other[0] % 32)) & 1) << "free again before the trigger";
  for (int32_t token : opened) constraint.advance(token);
  EXPECT_FALSE(constraint.can_end()) << "the same call opens again after the rollback";
}

// Harmony's grammars spell special tokens: a table with kAsText gives them their text (so the
// grammar can choose them); the default table never allows them.
TEST_F(ToolCallDecodingTest, SpecialTokensAsTextCarryTheirText) {
  const std::optional<int32_t> im_start = pair_.tokenizer->token_to_id("<|im_start|>");
  ASSERT_TRUE(im_start && pair_.tokenizer->is_special(*im_start));
  EXPECT_EQ(table_->bytes(*im_start), "");
  const grammar::TokenTable as_text(*pair_.tokenizer, pair_.target.model->config().eos_token_ids,
                                    static_cast<int32_t>(pair_.target.model->config().vocab_size),
                                    grammar::SpecialTokens::kAsText);
  EXPECT_EQ(as_text.bytes(*im_start), "<|im_start|>");
  auto grammar = grammar::compile_grammar({.format = grammar::GrammarFormat::kGbnf, .text = "root ::= \"<|im_start|>\""},
                                          std::make_shared<const grammar::TokenTable>(as_text));
  grammar::GrammarConstraint constraint(grammar);
  std::vector<uint32_t> mask(as_text.mask_words());
  constraint.fill_allowed(mask);
  EXPECT_TRUE((mask[*im_start / 32] >> (*im_start % 32)) & 1) << "the special token spells the literal";
}

}  // namespace
}  // namespace flashq::testing
