#include "shared/json_file.h"

#include <fstream>
#include <sstream>

namespace flashq {

std::string read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kNotFound, path.string() + ": no such file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kIo, path.string() + ": read failed");
  return text.str();
}

nlohmann::json parse_json_text(std::string_view text, const std::string& label, ErrorCode code_on_error) {
  // The parser is iterative, but copying, comparing and printing a value recurse: a file of a
  // million '[' would overflow the stack. Real config files nest a few levels.
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) {
      throw Error(code_on_error, label + ": invalid JSON: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit_depth);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw Error(code_on_error, label + ": invalid JSON: " + e.what());
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path, ErrorCode code_on_error) {
  return parse_json_text(read_text_file(path), path.string(), code_on_error);
}

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCode::kIo, tmp.string() + ": cannot open for writing");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) throw Error(ErrorCode::kIo, tmp.string() + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(ErrorCode::kIo, path.string() + ": rename failed: " + ec.message());
}

}  // namespace flashq
