// `flashq-bench tokenizer`: encoding throughput of a tokenizer.json on a large text file, beside
// Hugging Face tokenizers (the Rust library through its Node binding, npm @anush008/tokenizers)
// on the same file in the same run, with both id counts compared.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace flashq {

std::function<void()> add_tokenizer_bench(CLI::App& app);

}  // namespace flashq
