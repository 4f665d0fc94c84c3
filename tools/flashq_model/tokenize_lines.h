// `flashq-model tokenize --model DIR [--decode | --jsonl]`: one line of text in, one JSON array of
// ids out (no special tokens added); with --jsonl, each line is a JSON string instead, so text
// holding newlines can be tokenized; with --decode, one JSON array of ids in, the text (as a JSON
// string, which --jsonl reads back) out. Works on a directory holding only tokenizer files.
#pragma once

#include <filesystem>
#include <iosfwd>

namespace flashq {

enum class TokenizeMode { kEncodeText, kEncodeJsonStrings, kDecode };

void tokenize_lines(const std::filesystem::path& dir, TokenizeMode mode, std::istream& in,
                    std::ostream& out);

}  // namespace flashq
