// flashq-worker renders chat jobs with the checkpoint's own chat template: messages, tools, the
// template options and add_generation_prompt reach it, and a checkpoint whose template the
// engine cannot render keeps the worker from starting, naming the construct.
#include <gtest/gtest.h>

#include "shared/json_file.h"
#include "tests/support/temp_dir.h"
#include "tests/worker_process/worker_harness.h"
#include "tools/flashq_model/make_tiny.h"
#include "worker/engine/engine.h"
#include "worker/model/model_registry.h"
#include "worker/text/tokenizer.h"

namespace flashq::testing {
namespace {

// A template that shows tools, tool calls (their arguments as a mapping), tool results and an
// option in the prompt, on one line so that no block whitespace rule is involved.
constexpr const char* kToolTemplate =
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools' }}{%- for tool in tools %}{{- '\\n' + tool.function.name + ': ' "
    "+ tool.function.description }}{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.tool_calls %}{%- for call in message.tool_calls %}{{- '<tool_call>' + call.function.name + "
    "'(' + call.function.arguments.city + ')</tool_call>' }}{%- endfor %}"
    "{%- else %}{{- message.content }}{%- endif %}{{- '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}";

class WorkerChatTemplateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    TinyModelSpec spec;
    spec.dtype = DType::kF32;
    spec.seed = 7;
    write_tiny_model(spec, root_->path());
    backend_ = make_cpu_backend().release();
    model_ = load_target_model(root_->path(), *backend_).release();
    tokenizer_ = load_tokenizer(root_->path()).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    delete backend_;
    delete root_;
  }
  void TearDown() override {
    if (HasFailure() && worker_)
      std::cerr << "---- flashq-worker log ----\n" << read_text_file(worker_->log_path()) << "----\n";
  }

  // The tiny model with `chat_template` in its tokenizer_config.json.
  std::filesystem::path model_with_template(const std::string& chat_template) {
    const std::filesystem::path dir = scratch_.path() / "model";
    std::filesystem::copy(root_->path(), dir, std::filesystem::copy_options::recursive);
    nlohmann::json config = read_json_file(dir / "tokenizer_config.json");
    config["chat_template"] = chat_template;
    write_text_file(dir / "tokenizer_config.json", config.dump(2));
    return dir;
  }

  void start_worker(const std::filesystem::path& model_dir) {
    worker_ = std::make_unique<WorkerProcess>(
        std::vector<std::string>{"--broker", broker_.endpoint(), "--model", model_dir.string(), "--id", "wct",
                                 "--device", "cpu", "--slots", "1"},
        scratch_.path() / "worker.log");
  }

  // Greedy, target only, in this process.
  static std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int64_t max_tokens) {
    Engine engine(*model_, nullptr, {.max_slots = 1});
    SequenceRequest request{.spec = SpecMode::kOff};
    request.generation.prompt_tokens = prompt;
    request.generation.max_tokens = max_tokens;
    engine.add(0, request);
    engine.run_until_idle();
    return engine.take_finished().at(0).tokens;
  }

  static TempDir* root_;
  static Backend* backend_;
  static TargetModel* model_;
  static Tokenizer* tokenizer_;
  TempDir scratch_;
  FakeBroker broker_;
  std::unique_ptr<WorkerProcess> worker_;
};

TempDir* WorkerChatTemplateTest::root_ = nullptr;
Backend* WorkerChatTemplateTest::backend_ = nullptr;
TargetModel* WorkerChatTemplateTest::model_ = nullptr;
Tokenizer* WorkerChatTemplateTest::tokenizer_ = nullptr;

TEST_F(WorkerChatTemplateTest, ChatJobWithToolsIsRenderedByTheCheckpointsTemplate) {
  start_worker(model_with_template(kToolTemplate));
  ASSERT_TRUE(broker_.expect_ready());

  protocol::Assign a;
  a.job.id = "tools";
  a.job.max_tokens = 6;
  protocol::ChatMessage call{.role = "assistant", .content = std::nullopt};
  call.tool_calls = {{"call_1", "get_weather", R"("{\"city\": \"Paris\"}")"}};
  protocol::ChatMessage result{.role = "tool", .content = "18 C"};
  result.tool_call_id = "call_1";
  a.job.prompt = std::vector<protocol::ChatMessage>{{"user", "Weather in Paris?"}, call, result};
  a.job.tools = R"([{"type":"function","function":{"name":"get_weather","description":"the weather of a city"}}])";
  a.job.chat_template_kwargs = R"({"enable_thinking":false})";
  broker_.send(a);
  const AttemptOutput got = collect_attempt(broker_, "tools");
  ASSERT_TRUE(got.final_message) << describe(got);
  ASSERT_FALSE(got.final_message->result.error) << *got.final_message->result.error;

  // What the template must make of the job, written out by hand.
  const std::string prompt =
      "<|im_start|>system\n# Tools\nget_weather: the weather of a city<|im_end|>\n"
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>get_weather(Paris)</tool_call><|im_end|>\n"
      "<|im_start|>tool\n18 C<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  const std::vector<int32_t> prompt_tokens = tokenizer_->encode(prompt);
  EXPECT_EQ(got.final_message->result.usage.prompt_tokens, static_cast<int64_t>(prompt_tokens.size()));
  EXPECT_EQ(got.ids(), reference(prompt_tokens, 6));
}

TEST_F(WorkerChatTemplateTest, TemplateRaiseRejectsTheJobAndTheWorkerKeepsServing) {
  start_worker(
      model_with_template("{%- if tools %}{{- raise_exception('this template takes no tools') }}{%- endif %}"
                          "{%- for message in messages %}{{- message.content }}{%- endfor %}"));
  ASSERT_TRUE(broker_.expect_ready());
  protocol::Assign bad;
  bad.job.id = "bad";
  bad.job.max_tokens = 2;
  bad.job.prompt = std::vector<protocol::ChatMessage>{{"user", "hi"}};
  bad.job.tools = R"([{"type":"function","function":{"name":"f"}}])";
  broker_.send(bad);
  const AttemptOutput refused = collect_attempt(broker_, "bad");
  ASSERT_TRUE(refused.final_message) << describe(refused);
  EXPECT_EQ(refused.final_message->result.finish_reason, protocol::FinishReason::kRejected);
  ASSERT_TRUE(refused.final_message->result.error);
  EXPECT_NE(refused.final_message->result.error->find("this template takes no tools"), std::string::npos)
      << *refused.final_message->result.error;

  protocol::Assign good = bad;
  good.job.id = "good";
  good.job.tools.reset();
  broker_.send(good);
  const AttemptOutput served = collect_attempt(broker_, "good");
  ASSERT_TRUE(served.final_message) << describe(served);
  EXPECT_EQ(served.ids(), reference(tokenizer_->encode("hi"), 2));
}

TEST_F(WorkerChatTemplateTest, UnsupportedTemplateKeepsTheWorkerFromStarting) {
  start_worker(model_with_template("{{ messages[0].content | wordwrap(20) }}"));
  ASSERT_TRUE(worker_->started());
  const std::optional<int> code = worker_->wait_exit(milliseconds(20000));
  ASSERT_TRUE(code.has_value()) << "the worker kept running";
  EXPECT_NE(*code, 0);
  const std::string log = read_text_file(worker_->log_path());
  EXPECT_NE(log.find("wordwrap"), std::string::npos) << log;
  EXPECT_NE(log.find("tokenizer_config.json"), std::string::npos) << log;
}

}  // namespace
}  // namespace flashq::testing
