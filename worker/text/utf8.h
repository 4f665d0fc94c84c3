// UTF-8 as the tokenizers need it: repairing invalid input the way Hugging Face and Python do,
// and walking code points of text that is already valid.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flashq {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Replaces every maximal invalid subsequence by one U+FFFD: the rule of Rust's
// String::from_utf8_lossy, the WHATWG decoder and Python's errors='replace'.
std::string replace_invalid_utf8(std::string_view bytes);

bool is_valid_utf8(std::string_view bytes);

// Length of the valid UTF-8 sequence at `pos` (1 to 4), or 0 when the bytes there are invalid.
size_t utf8_sequence_length(std::string_view bytes, size_t pos);

// Code point at `pos` in valid UTF-8; `pos` moves past it.
char32_t next_code_point(std::string_view text, size_t& pos);
// Code point ending at `end` in valid UTF-8; `end` moves to its first byte.
char32_t previous_code_point(std::string_view text, size_t& end);

void append_utf8(std::string& out, char32_t code_point);

}  // namespace flashq
