// GPT-2's byte-level alphabet, used by Qwen's tokenizer.json: every byte value is written as one
// printable code point, so a vocabulary of arbitrary byte strings becomes a vocabulary of visible
// text. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves; the other 68 bytes map to
// U+0100 onwards in byte order (so a space is 'Ġ' U+0120 and a newline 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flashq {

// UTF-8 of the code point that stands for `byte`.
std::string_view byte_level_char(uint8_t byte);

// Each byte of `bytes` replaced by its code point.
std::string bytes_to_byte_level(std::string_view bytes);

// The bytes a byte-level token stands for; nullopt when one of its code points is not in the
// alphabet (such tokens decode to their own UTF-8, as Hugging Face's ByteLevel decoder does).
std::optional<std::string> byte_level_to_bytes(std::string_view token);

}  // namespace flashq
