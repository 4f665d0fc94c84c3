// Reading JSON files with errors that name the file and the problem.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/error.h"

namespace flashq {

// Arrays and objects nested deeper than this are refused (values are copied and printed recursively).
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` as JSON; unparsable text (or nested past kMaxJsonDepth) is `code_on_error`, the
// message prefixed with `label`.
nlohmann::json parse_json_text(std::string_view text, const std::string& label,
                               ErrorCode code_on_error = ErrorCode::kBadConfig);

// Parses `path` as JSON; a missing file is kNotFound, unparsable text is `code_on_error`.
nlohmann::json read_json_file(const std::filesystem::path& path,
                              ErrorCode code_on_error = ErrorCode::kBadConfig);

// Reads a whole file into memory (kNotFound when it does not exist, kIo when it cannot be read).
std::string read_text_file(const std::filesystem::path& path);

// Writes `text` to `path` atomically enough for tools: write to a temp name, then rename.
void write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace flashq
