// Test helpers for the NumPy reference (tests/reference): its command lines take token ids as a
// comma-separated list, and it writes logits, taps and draft logits as raw float32 files.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace flashq::testing {

// A file of little-endian float32 values, as the reference writes them.
inline std::vector<float> read_f32(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

// "1,2,3": ids as the reference's --tokens takes them.
inline std::string join(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) text += (i ? "," : "") + std::to_string(ids[i]);
  return text;
}

}  // namespace flashq::testing
