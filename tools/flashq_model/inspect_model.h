// `flashq-model inspect DIR`: what a model directory holds (config, tensors, tokenizer).
#pragma once

#include <filesystem>
#include <iosfwd>

namespace flashq {

void inspect_model(const std::filesystem::path& dir, std::ostream& out);

}  // namespace flashq
