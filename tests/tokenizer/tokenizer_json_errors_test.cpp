// A broken or unsupported tokenizer.json gives a flashq::Error that names the file and the problem
// (kBadTokenizer) or the key we do not implement (kUnsupported); never a crash.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "tests/tokenizer/scratch_dir.h"
#include "tools/flashq_model/tiny_tokenizer.h"
#include "worker/text/tokenizer.h"

namespace flashq {
namespace {

using nlohmann::ordered_json;

class BrokenTokenizerJson : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_tokenizer(dir_.path(), 320);
    valid_text_ = read_text_file(file());
    valid_ = ordered_json::parse(valid_text_);
  }
  std::filesystem::path file() const { return dir_.path() / "tokenizer.json"; }

  // Writes the valid file changed by `edit`, loads it and checks the error.
  void expect_load_error(const std::function<void(ordered_json&)>& edit, ErrorCode code,
                         const std::string& mentioned) {
    ordered_json changed = valid_;
    edit(changed);
    write_text_file(file(), changed.dump());
    expect_error_from_file(code, mentioned);
  }
  void expect_error_from_file(ErrorCode code, const std::string& mentioned) {
    try {
      load_tokenizer(dir_.path());
      ADD_FAILURE() << "loaded; expected " << error_code_name(code) << " mentioning " << mentioned;
    } catch (const Error& e) {
      EXPECT_EQ(error_code_name(e.code()), error_code_name(code)) << e.what();
      std::string message = e.what();
      EXPECT_NE(message.find(file().string()), std::string::npos) << "no file name: " << message;
      EXPECT_NE(message.find(mentioned), std::string::npos) << "no " << mentioned << ": " << message;
    }
  }

  test::ScratchDir dir_;
  std::string valid_text_;
  ordered_json valid_;
};

TEST(LoadTokenizer, ReportsADirectoryWithoutTokenizerFilesAsNotFound) {
  test::ScratchDir dir;
  try {
    load_tokenizer(dir.path());
    ADD_FAILURE() << "loaded from an empty directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos) << e.what();
  }
}

TEST_F(BrokenTokenizerJson, ReportsTextThatIsNotJson) {
  write_text_file(file(), "{ \"model\": ");
  expect_error_from_file(ErrorCode::kBadTokenizer, "invalid JSON");
  write_text_file(file(), valid_text_.substr(0, valid_text_.size() / 2));
  expect_error_from_file(ErrorCode::kBadTokenizer, "invalid JSON");
}

TEST_F(BrokenTokenizerJson, ReportsJsonOfTheWrongShape) {
  write_text_file(file(), "[1, 2, 3]");
  expect_error_from_file(ErrorCode::kBadTokenizer, "not a JSON object");
  expect_load_error([](ordered_json& j) { j.erase("model"); }, ErrorCode::kBadTokenizer, "model");
  expect_load_error([](ordered_json& j) { j["model"]["vocab"] = ordered_json::array(); },
                    ErrorCode::kBadTokenizer, "model.vocab is not an object");
  expect_load_error([](ordered_json& j) { j["model"].erase("merges"); }, ErrorCode::kBadTokenizer,
                    "model.merges is missing");
  expect_load_error([](ordered_json& j) { j["added_tokens"][0].erase("content"); },
                    ErrorCode::kBadTokenizer, "added_tokens[0].content");
  expect_load_error([](ordered_json& j) { j["normalizer"] = 5; }, ErrorCode::kBadTokenizer,
                    "normalizer is not an object");
}

TEST_F(BrokenTokenizerJson, ReportsBadIds) {
  expect_load_error([](ordered_json& j) { j["model"]["vocab"]["a"] = "ninety-seven"; },
                    ErrorCode::kBadTokenizer, "model.vocab[\"a\"]");
  expect_load_error([](ordered_json& j) { j["model"]["vocab"]["a"] = -3; },
                    ErrorCode::kBadTokenizer, "model.vocab[\"a\"]");
  expect_load_error([](ordered_json& j) { j["model"]["vocab"]["a"] = 98; },  // the id of "b"
                    ErrorCode::kBadTokenizer, "id 98");
  expect_load_error([](ordered_json& j) { j["added_tokens"][0]["id"] = 97; },
                    ErrorCode::kBadTokenizer, "<|endoftext|>");
  expect_load_error([](ordered_json& j) { j["added_tokens"][1]["id"] = 1u << 30; },
                    ErrorCode::kBadTokenizer, "added_tokens[1].id");
}

TEST_F(BrokenTokenizerJson, ReportsMergesThatDoNotFitTheVocabulary) {
  expect_load_error([](ordered_json& j) { j["model"]["merges"][0] = {"a", "no-such-token"}; },
                    ErrorCode::kBadTokenizer, "model.merges[0]");
  expect_load_error([](ordered_json& j) { j["model"]["merges"][1] = "nospace"; },
                    ErrorCode::kBadTokenizer, "model.merges[1]");
  expect_load_error([](ordered_json& j) { j["model"]["merges"][2] = {1, 2}; },
                    ErrorCode::kBadTokenizer, "model.merges[2]");
}

TEST_F(BrokenTokenizerJson, AcceptsMergesWrittenAsStrings) {
  ordered_json changed = valid_;
  for (auto& merge : changed["model"]["merges"]) {
    merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  }
  write_text_file(file(), changed.dump());
  auto tokenizer = load_tokenizer(dir_.path());
  write_text_file(file(), valid_text_);
  auto reference = load_tokenizer(dir_.path());
  std::string text = "The queue hands jobs to workers; it's fast.";
  EXPECT_EQ(tokenizer->encode(text), reference->encode(text));
}

TEST_F(BrokenTokenizerJson, NamesTheKeyOfAnUnsupportedFeature) {
  expect_load_error([](ordered_json& j) { j["normalizer"] = {{"type", "Lowercase"}}; },
                    ErrorCode::kUnsupported, "normalizer.type = \"Lowercase\"");
  expect_load_error(
      [](ordered_json& j) { j["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Metaspace"}}; },
      ErrorCode::kUnsupported, "pre_tokenizer.pretokenizers[1].type = \"Metaspace\"");
  expect_load_error(
      [](ordered_json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
      ErrorCode::kUnsupported, "pre_tokenizer.pretokenizers[0].behavior");
  expect_load_error([](ordered_json& j) { j["model"]["type"] = "WordPiece"; },
                    ErrorCode::kUnsupported, "model.type = \"WordPiece\"");
  expect_load_error([](ordered_json& j) { j["model"]["dropout"] = 0.1; },
                    ErrorCode::kUnsupported, "model.dropout");
  expect_load_error([](ordered_json& j) { j["model"]["byte_fallback"] = true; },
                    ErrorCode::kUnsupported, "model.byte_fallback");
  expect_load_error([](ordered_json& j) { j["decoder"] = {{"type", "Metaspace"}}; },
                    ErrorCode::kUnsupported, "decoder.type = \"Metaspace\"");
  expect_load_error([](ordered_json& j) { j["pre_tokenizer"] = nullptr; },
                    ErrorCode::kUnsupported, "ByteLevel");
}

TEST_F(BrokenTokenizerJson, NamesTheKeyOfAnUnsupportedPostProcessor) {
  expect_load_error([](ordered_json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
                    ErrorCode::kUnsupported, "post_processor.type = \"RobertaProcessing\"");
  expect_load_error(
      [](ordered_json& j) {
        j["post_processor"] = {{"type", "Sequence"},
                               {"processors", {{{"type", "ByteLevel"}}, {{"type", "BertProcessing"}}}}};
      },
      ErrorCode::kUnsupported, "post_processor.processors[1].type = \"BertProcessing\"");
  expect_load_error(
      [](ordered_json& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"},
                               {"single", {{{"Sequence", {{"id", "B"}, {"type_id", 0}}}}}}};
      },
      ErrorCode::kUnsupported, "post_processor.single[0].Sequence.id = \"B\"");
}

TEST_F(BrokenTokenizerJson, ReportsATemplateNamingAnUnknownSpecialToken) {
  expect_load_error(
      [](ordered_json& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"},
                               {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                               {"special_tokens", ordered_json::object()}};
      },
      ErrorCode::kBadTokenizer, "post_processor.single[0].SpecialToken.id = \"<s>\"");
  expect_load_error(
      [](ordered_json& j) {
        j["post_processor"] = {
            {"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {100000}}, {"tokens", {"<s>"}}}}}}};
      },
      ErrorCode::kBadTokenizer, "post_processor adds id 100000");
}

TEST_F(BrokenTokenizerJson, ReportsARegexThatDoesNotCompile) {
  expect_load_error(
      [](ordered_json& j) {
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?i:'s|[unclosed";
      },
      ErrorCode::kBadTokenizer, "[unclosed");
}

// Random damage to a valid file: whatever comes out is a clean load or a flashq::Error.
TEST_F(BrokenTokenizerJson, NeverCrashesOnDamagedFiles) {
  std::mt19937 random(7);
  const std::string junk = "{}[]\",:0-9.e\\u nulltrue ";
  for (int round = 0; round < 300; ++round) {
    std::string text = valid_text_;
    std::uniform_int_distribution<size_t> position(0, text.size() - 1);
    if (round % 3 == 0) text.resize(position(random));
    for (int i = 0; i < 1 + round % 5; ++i) {
      if (text.empty()) break;
      text[position(random) % text.size()] = junk[random() % junk.size()];
    }
    write_text_file(file(), text);
    try {
      auto tokenizer = load_tokenizer(dir_.path());
      tokenizer->decode(tokenizer->encode("hello <|im_end|> world"));
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kBadTokenizer || e.code() == ErrorCode::kUnsupported)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace flashq
