#include "tools/flashq_model/tokenize_lines.h"

#include <istream>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "shared/error.h"
#include "worker/text/tokenizer.h"

namespace flashq {

void tokenize_lines(const std::filesystem::path& dir, TokenizeMode mode, std::istream& in,
                    std::ostream& out) {
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (mode == TokenizeMode::kEncodeText) {
      out << nlohmann::json(tokenizer->encode(line)).dump() << "\n";
      continue;
    }
    if (mode == TokenizeMode::kEncodeJsonStrings) {
      nlohmann::json text = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!text.is_string()) {
        throw Error(ErrorCode::kInvalidArgument,
                    "line " + std::to_string(line_number) + ": expected a JSON string");
      }
      out << nlohmann::json(tokenizer->encode(text.get_ref<const std::string&>())).dump() << "\n";
      continue;
    }
    nlohmann::json ids = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!ids.is_array()) {
      throw Error(ErrorCode::kInvalidArgument, "line " + std::to_string(line_number) + ": expected a JSON array of ids");
    }
    std::vector<int32_t> tokens;
    for (const auto& id : ids) {
      if (!id.is_number_integer()) {
        throw Error(ErrorCode::kInvalidArgument, "line " + std::to_string(line_number) + ": ids must be integers");
      }
      tokens.push_back(id.get<int32_t>());
    }
    out << nlohmann::json(tokenizer->decode(tokens)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
  }
}

}  // namespace flashq
