// Helpers for the safetensors tests: a fresh temporary directory per test, hand-made file
// images (so tests can write exactly the lie they want the reader to catch), and an assertion
// that a call fails with a given error code and a message naming the file and the problem.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shared/error.h"
#include "worker/model/safetensors.h"

namespace flashq::testing {

// The 8-byte little-endian length, the header text, the data: a file image as on disk.
inline std::string make_image(const std::string& header_json, const std::string& data) {
  std::string image(8, '\0');
  uint64_t length = header_json.size();
  for (int i = 0; i < 8; ++i) image[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return image + header_json + data;
}

template <typename T>
std::string to_bytes(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The bytes a tensor views, for comparing with what was written.
inline std::string tensor_bytes(const Tensor& tensor) {
  return std::string(static_cast<const char*>(tensor.raw()), tensor.nbytes());
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Calls `body` and checks that it throws flashq::Error with `code` and a message containing
// every one of `parts`.
template <typename Body>
::testing::AssertionResult fails_with(Body&& body, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    body();
  } catch (const Error& e) {
    std::string message = e.what();
    if (e.code() != code) {
      return ::testing::AssertionFailure() << "error code " << error_code_name(e.code()) << ", expected "
                                           << error_code_name(code) << "; message: " << message;
    }
    for (const std::string& part : parts) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << message << "\" does not contain \"" << part << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-flashq exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// A test with its own empty directory, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("flashq-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Writes a file with this header text and `data_size` zero bytes of data.
  std::filesystem::path write_header(const std::string& header_json, size_t data_size,
                                     const std::string& name = "bad.safetensors") {
    std::filesystem::path path = dir_ / name;
    write_file(path, make_image(header_json, std::string(data_size, '\0')));
    return path;
  }

  // Opening `path` fails with `code`, naming the file and every one of `parts`.
  ::testing::AssertionResult open_fails(const std::filesystem::path& path, ErrorCode code,
                                        std::initializer_list<std::string> parts) {
    ::testing::AssertionResult result = fails_with([&] { SafetensorsFile::open(path); }, code, parts);
    if (!result) return result;
    return fails_with([&] { SafetensorsFile::open(path); }, code, {path.string()});
  }

  std::filesystem::path dir_;
};

}  // namespace flashq::testing
