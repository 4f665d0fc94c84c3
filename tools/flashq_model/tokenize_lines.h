// `flashq-model tokenize --model DIR [--decode]`: one line of text in, one JSON array of ids out
// (no special tokens added); with --decode, one JSON array of ids in, the text (as a JSON
// string, so newlines survive) out. Works on a directory holding only tokenizer files.
#pragma once

#include <filesystem>
#include <iosfwd>

namespace flashq {

void tokenize_lines(const std::filesystem::path& dir, bool decode, std::istream& in, std::ostream& out);

}  // namespace flashq
