// The rendered streams read by OpenAI's own Node SDK (tests/gateway/responses_sdk_read.js): the
// SDK accepts every stream, yields every event, and accumulates the same output, status and
// output_text as the response object a poll returns. Needs node and the npm package `openai`
// (scripts/setup); without them the test is reported skipped.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/gateway/responses_test_support.h"

namespace flashq::gateway {
namespace {

using namespace flashq::gateway::testing;
using protocol::FinishReason;

std::string sse_text(const std::vector<StreamedEvent>& events) {
  std::string text;
  for (const StreamedEvent& e : events) text += "event: " + e.type + "\ndata: " + e.json_text + "\n\n";
  return text;
}

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// The SDK adds `parsed` to each output_text part and `parsed_arguments` to each function call
// (its structured-output helpers); the rest of the output is the server's.
ResponsesJson without_parsed(ResponsesJson output) {
  for (ResponsesJson& item : output) {
    item.erase("parsed_arguments");
    if (!item.contains("content")) continue;
    for (ResponsesJson& part : item["content"]) part.erase("parsed");
  }
  return output;
}

TEST(ResponsesSdk, OpenAIsNodeClientReadsEveryStreamAsThePollsObject) {
  if (std::system("node --version > /dev/null 2>&1") != 0 ||
      !std::filesystem::exists("third_party/npm/node_modules/openai/package.json")) {
    GTEST_SKIP() << "node or the npm package openai is not installed (scripts/setup)";
  }
  const std::string tool = R"("tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}])";
  const struct {
    std::string body;
    std::vector<std::string> pieces;
    FinishReason end;
  } cases[] = {
      {R"({"model": "qwen3", "input": "Hi"})", {"Hel", "lo ", "wörld"}, FinishReason::kStop},
      {R"({"model": "qwen3", "input": "Hi", "background": true})", {"<think>\nHm", ".\n</think>\n\n", "Answer."}, FinishReason::kStop},
      {R"({"model": "qwen3", "input": "Hi", )" + tool + "}",
       {"Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"argu", "ments\": {\"city\": \"Paris\"}}\n</tool_call>"},
       FinishReason::kStop},
      {R"({"model": "llama3", "input": "Hi", )" + tool + "}",
       {"{\"name\": \"get_weather\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {\"d\": 1}}"},
       FinishReason::kStop},
      {R"({"model": "qwen3", "input": "Hi"})", {"Once upon"}, FinishReason::kLength},
      {R"({"model": "qwen3", "input": "Hi", "background": true})", {"Half"}, FinishReason::kCancelled},
      {R"({"model": "qwen3", "input": "Hi"})", {"Part"}, FinishReason::kError},
  };
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("flashq_responses_sdk_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                     "_" + std::to_string(reinterpret_cast<std::uintptr_t>(&cases)));
  std::filesystem::create_directories(dir);
  std::vector<Rendered> rendered;
  std::string command = "node tests/gateway/responses_sdk_read.js";
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const ResponsesRequest request = read(cases[i].body);
    rendered.push_back(render(request.settings, "resp_sdk" + std::to_string(i), 1767225600,
                              job_events("resp_sdk" + std::to_string(i), cases[i].pieces, final_of(cases[i].end))));
    const std::filesystem::path file = dir / (std::to_string(i) + ".sse");
    std::ofstream(file) << sse_text(rendered.back().events);
    command += " " + file.string();
  }
  const std::string out = run_command(command);
  std::filesystem::remove_all(dir);
  std::istringstream lines(out);
  std::string line;
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(cases[i].body + " / " + cases[i].pieces.front());
    ASSERT_TRUE(std::getline(lines, line)) << "the SDK printed " << i << " lines: " << out;
    const ResponsesJson read_back = ResponsesJson::parse(line);
    ASSERT_FALSE(read_back.contains("error")) << read_back.dump();
    EXPECT_EQ(read_back.at("types").get<std::vector<std::string>>(), event_types(rendered[i].events));
    const ResponsesJson& final_response = read_back.at("final");
    EXPECT_EQ(final_response.at("status"), rendered[i].object.at("status"));
    EXPECT_EQ(without_parsed(final_response.at("output")), rendered[i].object.at("output"));
    std::string text;
    for (const ResponsesJson& item : rendered[i].object.at("output")) {
      if (item.at("type") == "message") text += item.at("content")[0].at("text").get<std::string>();
    }
    EXPECT_EQ(read_back.at("output_text"), text);
  }
}

}  // namespace
}  // namespace flashq::gateway
