// The executables end to end: flashq-model make-tiny / inspect / tokenize and flashq generate,
// including the exit code 2 and a message naming the file for every kind of bad input.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/json_file.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {
namespace {

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new TempDir();
    CommandResult made = run_command(bin_path("flashq-model") + " make-tiny --seed 3 --out " + model_->path().string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  static void TearDownTestSuite() { delete model_; }

  // A copy of the tiny model in a fresh dir, for breaking one file.
  std::filesystem::path copy_model() {
    std::filesystem::copy(model_->path(), scratch_.path() / "model");
    return scratch_.path() / "model";
  }

  CommandResult generate(const std::filesystem::path& dir, const std::string& extra = "") {
    return run_command(bin_path("flashq") + " generate --model " + dir.string() + " --prompt 'hello queue' " + extra);
  }

  static TempDir* model_;
  TempDir scratch_;
};
TempDir* Cli::model_ = nullptr;

TEST_F(Cli, GenerateJsonReportsTextTokensAndStats) {
  CommandResult r = generate(model_->path(), "--max-tokens 9 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json out = nlohmann::json::parse(r.output);
  EXPECT_EQ(out.at("tokens").size(), 9u);
  EXPECT_EQ(out.at("finish_reason"), "length");
  EXPECT_TRUE(out.at("text").is_string());
  for (const char* key : {"prompt_tokens", "completion_tokens", "prefill_tokens_per_s", "decode_tokens_per_s"}) {
    EXPECT_TRUE(out.at("stats").contains(key)) << key;
  }
  EXPECT_EQ(out["stats"]["completion_tokens"], 9);
}

TEST_F(Cli, GenerateJsonReportsLogprobsWhenAsked) {
  CommandResult r = generate(model_->path(), "--max-tokens 6 --ignore-eos --json --logprobs 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output);
  const nlohmann::json& tokens = out.at("tokens");
  const nlohmann::json& logprobs = out.at("logprobs");
  ASSERT_EQ(logprobs.size(), tokens.size());
  for (size_t k = 0; k < tokens.size(); ++k) {
    ASSERT_EQ(logprobs[k].at("top").size(), 3u);
    EXPECT_EQ(logprobs[k]["top"][0][0], tokens[k]) << "greedy: the row's most likely token, at " << k;
    EXPECT_EQ(logprobs[k]["top"][0][1], logprobs[k]["logprob"]);
    EXPECT_LE(logprobs[k]["logprob"].get<double>(), 0.0);
  }
  EXPECT_FALSE(nlohmann::json::parse(generate(model_->path(), "--max-tokens 2 --json").output).contains("logprobs"));
  const CommandResult bad = generate(model_->path(), "--json --logprobs 21");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("logprobs"), std::string::npos) << bad.output;
}

TEST_F(Cli, GenerateStreamsTheSameTextItReportsInJson) {
  CommandResult json = generate(model_->path(), "--max-tokens 12 --ignore-eos --json");
  CommandResult plain = generate(model_->path(), "--max-tokens 12 --ignore-eos");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output, nlohmann::json::parse(json.output).at("text").get<std::string>() + "\n");
}

TEST_F(Cli, TruncatedSafetensorsExitsTwoNamingTheFile) {
  std::filesystem::path dir = copy_model();
  std::filesystem::resize_file(dir / "model.safetensors", std::filesystem::file_size(dir / "model.safetensors") / 2);
  CommandResult r = generate(dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
}

TEST_F(Cli, BrokenConfigExitsTwoNamingTheFile) {
  std::filesystem::path dir = copy_model();
  write_text_file(dir / "config.json", "{\"hidden_size\": ");
  CommandResult r = generate(dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
}

TEST_F(Cli, MissingTensorExitsTwoNamingTheTensor) {
  std::filesystem::path dir = copy_model();
  nlohmann::json config = read_json_file(dir / "config.json");
  config["num_hidden_layers"] = 3;  // the file holds two layers
  write_text_file(dir / "config.json", config.dump());
  CommandResult r = generate(dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("model.layers.2."), std::string::npos) << r.output;
}

TEST_F(Cli, WrongShapeExitsTwoNamingTheTensor) {
  std::filesystem::path dir = copy_model();
  nlohmann::json config = read_json_file(dir / "config.json");
  config["intermediate_size"] = 100;
  write_text_file(dir / "config.json", config.dump());
  CommandResult r = generate(dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("mlp."), std::string::npos) << r.output;
}

// A copy of the tiny model whose tokenizer_config.json holds `chat_template`.
std::filesystem::path with_chat_template(const std::filesystem::path& dir, const std::string& chat_template) {
  nlohmann::json config = read_json_file(dir / "tokenizer_config.json");
  config["chat_template"] = chat_template;
  write_text_file(dir / "tokenizer_config.json", config.dump());
  return dir;
}

// --chat renders with the checkpoint's template: the run equals a plain run of the text the
// template must make (written out here), token for token.
TEST_F(Cli, GenerateChatRendersTheCheckpointsTemplateWithSystemToolsAndOptions) {
  const std::filesystem::path dir = with_chat_template(
      copy_model(),
      "{%- for m in messages %}<|im_start|>{{ m.role }}:{{ m.content }}<|im_end|>{% endfor %}"
      "{%- for t in tools %}[{{ t.function.name }}]{% endfor %}"
      "{%- if add_generation_prompt %}<|im_start|>assistant{% endif %} thinking={{ enable_thinking }} {{ style }}");
  write_text_file(
      scratch_.path() / "tools.json",
      R"([{"type": "function", "function": {"name": "get_weather"}}, {"type": "function", "function": {"name": "add"}}])");
  const std::string args = "--max-tokens 6 --ignore-eos --json";
  CommandResult chat =
      generate(dir, "--chat --system 'Be brief.' --tools " + (scratch_.path() / "tools.json").string() +
                        " --template-option enable_thinking=false --template-option style=terse " + args);
  ASSERT_EQ(chat.exit_code, 0) << chat.output;
  const std::string rendered =
      "<|im_start|>system:Be brief.<|im_end|><|im_start|>user:hello queue<|im_end|>[get_weather][add]"
      "<|im_start|>assistant thinking=false terse";
  CommandResult plain =
      run_command(bin_path("flashq") + " generate --model " + dir.string() + " --prompt '" + rendered + "' " + args);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const nlohmann::json chat_out = nlohmann::json::parse(chat.output);
  const nlohmann::json plain_out = nlohmann::json::parse(plain.output);
  EXPECT_EQ(chat_out["stats"]["prompt_tokens"], plain_out["stats"]["prompt_tokens"]);
  EXPECT_EQ(chat_out["tokens"], plain_out["tokens"]);
}

TEST_F(Cli, GenerateChatBadInputExitsTwoNamingIt) {
  const std::filesystem::path dir = copy_model();
  write_text_file(scratch_.path() / "tools.json", R"({"type": "function"})");
  CommandResult not_array = generate(dir, "--chat --tools " + (scratch_.path() / "tools.json").string());
  EXPECT_EQ(not_array.exit_code, 2) << not_array.output;
  EXPECT_NE(not_array.output.find("--tools"), std::string::npos) << not_array.output;
  CommandResult no_value = generate(dir, "--chat --template-option enable_thinking");
  EXPECT_EQ(no_value.exit_code, 2) << no_value.output;
  EXPECT_NE(no_value.output.find("key=value"), std::string::npos) << no_value.output;
  CommandResult no_chat = generate(dir, "--system 'Be brief.'");
  EXPECT_EQ(no_chat.exit_code, 2) << no_chat.output;
  EXPECT_NE(no_chat.output.find("--chat"), std::string::npos) << no_chat.output;

  with_chat_template(dir, "{{ messages[0].content | wordwrap(10) }}");
  CommandResult unsupported = generate(dir, "--chat");
  EXPECT_EQ(unsupported.exit_code, 2) << unsupported.output;
  EXPECT_NE(unsupported.output.find("wordwrap"), std::string::npos) << unsupported.output;
}

TEST_F(Cli, MissingModelDirAndBadFlagsExitTwo) {
  EXPECT_EQ(generate(scratch_.path() / "nothing").exit_code, 2);
  EXPECT_EQ(generate(model_->path(), "--temperature -1").exit_code, 2);
  EXPECT_EQ(generate(model_->path(), "--no-such-flag").exit_code, 2);
  EXPECT_EQ(generate(model_->path(), "--device tpu").exit_code, 2);
}

// The worker's memory flags are checked before anything loads: exit 2 naming the flag.
TEST_F(Cli, WorkerMemoryFlagsOutOfRangeExitTwo) {
  for (const std::string flags : {"--gpu-memory-fraction 0", "--gpu-memory-fraction 1.5", "--cache-memory-mb -1"}) {
    CommandResult r = run_command(bin_path("flashq-worker") + " --model " + model_->path().string() + " " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.output;
    EXPECT_NE(r.output.find(flags.substr(0, flags.find(' '))), std::string::npos) << r.output;
  }
}

// flashq-bench engine --prompts: a file it cannot use is exit 2 with a message naming it, not a
// crash or a benchmark of nothing.
TEST_F(Cli, BenchPromptsFileThatIsMissingMalformedOrEmptyExitsTwo) {
  const std::filesystem::path malformed = scratch_.path() / "malformed.jsonl";
  std::ofstream(malformed) << "\"a good prompt\"\n{\"prompt\": 42}\n";
  const std::filesystem::path not_json = scratch_.path() / "not_json.jsonl";
  std::ofstream(not_json) << "def f(:\n";
  const std::filesystem::path empty = scratch_.path() / "empty.jsonl";
  std::ofstream(empty) << "\n";
  for (const std::filesystem::path& file : {scratch_.path() / "absent.jsonl", malformed, not_json, empty}) {
    CommandResult r = run_command(bin_path("flashq-bench") + " engine --model " + model_->path().string() +
                                  " --decode-tokens 2 --repeats 1 --prompts " + file.string());
    EXPECT_EQ(r.exit_code, 2) << file << ": " << r.output;
    EXPECT_NE(r.output.find(file.filename().string()), std::string::npos) << r.output;
  }
}

TEST_F(Cli, BenchPromptsFileRuns) {
  const std::filesystem::path prompts = scratch_.path() / "prompts.jsonl";
  std::ofstream(prompts) << "\"hello queue\"\n{\"prompt\": \"another one\"}\n";
  CommandResult r = run_command(bin_path("flashq-bench") + " engine --model " + model_->path().string() +
                                " --decode-tokens 3 --repeats 1 --json --prompts " + prompts.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output.substr(r.output.rfind("\n{") + 1));
  EXPECT_EQ(out.at("runs").at(0).at("mode"), "ar");
  // Three tokens: two decode steps after the prefill's token, each timed.
  const nlohmann::json& step = out.at("runs").at(0).at("step_ms");
  EXPECT_GT(step.at("median").get<double>(), 0.0);
  EXPECT_GE(step.at("p90").get<double>(), step.at("median").get<double>());
}

// flashq-bench tokenizer: the ids of the file it encoded (as `flashq-model tokenize` counts them)
// and a throughput; a file it cannot read is exit 2 naming it.
TEST_F(Cli, BenchTokenizerEncodesTheFile) {
  const std::string code = "def queue(jobs):\n    return [job for job in jobs if job.ready]\n";
  const std::filesystem::path text = scratch_.path() / "code.py";
  std::ofstream(text) << code;
  const std::filesystem::path line = scratch_.path() / "code.jsonl";
  std::ofstream(line) << nlohmann::json(code).dump() << "\n";
  CommandResult tokenize = run_command(bin_path("flashq-model") + " tokenize --jsonl --model " +
                                       model_->path().string() + " < " + line.string());
  ASSERT_EQ(tokenize.exit_code, 0) << tokenize.output;
  CommandResult r = run_command(bin_path("flashq-bench") + " tokenizer --no-hf --min-seconds 0.01 --tokenizer " +
                                model_->path().string() + " --file " + text.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json out = nlohmann::json::parse(r.output.substr(r.output.rfind('{')));
  EXPECT_GT(out.at("flashq_ids_per_s").get<double>(), 0.0);
  EXPECT_FALSE(out.contains("hf_ids_per_s"));
  EXPECT_EQ(out.at("ids").get<size_t>(), nlohmann::json::parse(tokenize.output.substr(tokenize.output.rfind('['))).size());

  CommandResult missing = run_command(bin_path("flashq-bench") + " tokenizer --no-hf --tokenizer " +
                                      model_->path().string() + " --file " + (scratch_.path() / "absent.txt").string());
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("absent.txt"), std::string::npos) << missing.output;
}

TEST_F(Cli, TokenizeWorksOnADirectoryWithOnlyTokenizerFiles) {
  std::filesystem::path dir = scratch_.path() / "tokenizer-only";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(model_->path() / "tokenizer.json", dir / "tokenizer.json");
  write_text_file(scratch_.path() / "lines.txt", "hello world\n  spaces  and 123\n");
  CommandResult ids = run_command(bin_path("flashq-model") + " tokenize --model " + dir.string() + " < " +
                                  (scratch_.path() / "lines.txt").string());
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  write_text_file(scratch_.path() / "ids.txt", ids.output);
  CommandResult text = run_command(bin_path("flashq-model") + " tokenize --decode --model " + dir.string() + " < " +
                                   (scratch_.path() / "ids.txt").string());
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_EQ(text.output, "\"hello world\"\n\"  spaces  and 123\"\n");
}

// --jsonl reads what --decode writes, so text with newlines and tabs makes the round trip.
TEST_F(Cli, TokenizeJsonlEncodesTextHoldingNewlines) {
  const std::string lines = "\"two\\nlines\"\n\"tab\\there \\u00e9\"\n\"\"\n";
  write_text_file(scratch_.path() / "lines.jsonl", lines);
  std::string tokenize = bin_path("flashq-model") + " tokenize --model " + model_->path().string();
  CommandResult ids = run_command(tokenize + " --jsonl < " + (scratch_.path() / "lines.jsonl").string());
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  write_text_file(scratch_.path() / "ids.txt", ids.output);
  CommandResult text = run_command(tokenize + " --decode < " + (scratch_.path() / "ids.txt").string());
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_EQ(text.output, "\"two\\nlines\"\n\"tab\\there é\"\n\"\"\n");
  // The newline is one character of the text, not a line break between two texts.
  EXPECT_EQ(std::count(ids.output.begin(), ids.output.end(), '\n'), 3) << ids.output;
}

TEST_F(Cli, TokenizeJsonlRefusesALineThatIsNotAJsonStringNamingIt) {
  write_text_file(scratch_.path() / "lines.jsonl", "\"fine\"\nnot json\n");
  CommandResult r = run_command(bin_path("flashq-model") + " tokenize --jsonl --model " +
                                model_->path().string() + " < " +
                                (scratch_.path() / "lines.jsonl").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("line 2: expected a JSON string"), std::string::npos) << r.output;
}

TEST_F(Cli, InspectPrintsConfigAndTensors) {
  CommandResult r = run_command(bin_path("flashq-model") + " inspect " + model_->path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.layers.1.mlp.down_proj.weight BF16 [64, 128]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("head_dim 16"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace flashq::testing
