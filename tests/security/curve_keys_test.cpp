// CURVE keys from flags and files (shared/curve): every malformed key, missing file and bad
// allow-list line is a typed error naming where it came from.
#include "shared/curve/curve_keys.h"

#include <gtest/gtest.h>
#include <zmq.h>

#include "shared/curve/curve_allow_list.h"
#include "shared/curve/curve_socket.h"
#include "shared/error.h"
#include "shared/json_file.h"
#include "tests/support/temp_dir.h"

namespace flashq::testing {
namespace {

// The code and message of the Error `f` throws (kInternal with "no error" when it throws none).
template <typename F>
std::pair<ErrorCode, std::string> error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {ErrorCode::kInternal, "no error"};
}

class CurveKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!zmq_has("curve")) GTEST_SKIP() << "libzmq without CURVE";
    pair_ = generate_curve_key_pair();
  }
  std::string write(const std::string& name, const std::string& text) {
    write_text_file(dir_ / name, text);
    return (dir_ / name).string();
  }

  TempDir dir_;
  CurveKeyPair pair_;
};

TEST_F(CurveKeys, GeneratedPairIsConsistentZ85) {
  EXPECT_EQ(pair_.public_key.size(), kCurveKeyZ85Length);
  EXPECT_EQ(parse_curve_key(pair_.secret_key, "test"), pair_.secret_key);
  EXPECT_EQ(curve_public_key_of(pair_.secret_key), pair_.public_key);
  EXPECT_NE(generate_curve_key_pair().secret_key, pair_.secret_key);
}

TEST_F(CurveKeys, WrongLengthIsInvalidArgument) {
  auto [code, message] = error_of([&] { parse_curve_key(pair_.secret_key.substr(0, 39), "--curve-secret-key"); });
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("--curve-secret-key: a CURVE key is 40 Z85 characters, got 39"), std::string::npos) << message;
  EXPECT_EQ(error_of([] { parse_curve_key("", "k"); }).first, ErrorCode::kInvalidArgument);
}

TEST_F(CurveKeys, CharacterOutsideZ85IsInvalidArgument) {
  for (char bad : {'_', ' ', '"', '\'', ',', '\\', '~', '\0'}) {
    std::string key = pair_.public_key;
    key[5] = bad;
    auto [code, message] = error_of([&] { parse_curve_key(key, "k"); });
    EXPECT_EQ(code, ErrorCode::kInvalidArgument) << "character " << int(bad);
    EXPECT_NE(message.find("character 6 is outside the Z85 alphabet"), std::string::npos) << message;
  }
}

TEST_F(CurveKeys, Z85GroupAbove32BitsIsInvalidArgument) {
  // "#####" is 85^5 - 1, past 2^32 - 1.
  auto [code, message] = error_of([] { parse_curve_key(std::string(40, '#'), "k"); });
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("out of range"), std::string::npos) << message;
}

TEST_F(CurveKeys, FlagTakesTheKeyItselfOrAFileTrimmed) {
  EXPECT_EQ(load_curve_key(pair_.secret_key, "--curve-secret-key"), pair_.secret_key);
  EXPECT_EQ(load_curve_key(write("k", "\n  " + pair_.secret_key + " \r\n\n"), "--curve-secret-key"), pair_.secret_key);
}

TEST_F(CurveKeys, MissingFileIsNotFound) {
  auto [code, message] = error_of([&] { load_curve_key((dir_ / "broker.key").string(), "--curve-secret-key"); });
  EXPECT_EQ(code, ErrorCode::kNotFound);
  EXPECT_NE(message.find("--curve-secret-key: no such file"), std::string::npos) << message;
  EXPECT_NE(message.find("broker.key"), std::string::npos) << message;
}

TEST_F(CurveKeys, FileWithoutOneKeyIsBadConfigNamingTheFile) {
  for (const std::string& text :
       {std::string(), std::string("short\n"), pair_.secret_key + "\n" + pair_.public_key, std::string(40, '_')}) {
    const std::string path = write("bad.key", text);
    auto [code, message] = error_of([&] { load_curve_key(path, "--curve-secret-key"); });
    EXPECT_EQ(code, ErrorCode::kBadConfig) << text;
    EXPECT_NE(message.find(path), std::string::npos) << message;
  }
}

TEST_F(CurveKeys, AllowListReadsKeysAndComments) {
  const CurveKeyPair other = generate_curve_key_pair();
  const std::string path = write("allowed", "# producers\n\n" + pair_.public_key + "   # alice\n  " + other.public_key +
                                                "\n#" + std::string(39, 'a') + "\n");
  EXPECT_EQ(load_curve_allow_list(path), (std::set<std::string>{pair_.public_key, other.public_key}));
}

TEST_F(CurveKeys, AllowListBadLineIsBadConfigNamingFileAndLine) {
  const std::string path = write("allowed", "# ok\n" + pair_.public_key + "\n" + pair_.public_key + " trailing\n");
  auto [code, message] = error_of([&] { load_curve_allow_list(path); });
  EXPECT_EQ(code, ErrorCode::kBadConfig);
  EXPECT_NE(message.find(path + ":3:"), std::string::npos) << message;

  const std::string not_z85 = write("allowed2", std::string(40, '_') + "\n");
  EXPECT_EQ(error_of([&] { load_curve_allow_list(not_z85); }).first, ErrorCode::kBadConfig);
}

TEST_F(CurveKeys, EmptyOrMissingAllowListIsRefused) {
  EXPECT_EQ(error_of([&] { load_curve_allow_list(write("empty", "# nobody yet\n\n")); }).first, ErrorCode::kBadConfig);
  EXPECT_EQ(error_of([&] { load_curve_allow_list(dir_ / "missing"); }).first, ErrorCode::kNotFound);
}

TEST_F(CurveKeys, ClientKeysNeedBothFlagsAndDeriveThePublicKey) {
  EXPECT_FALSE(load_curve_client_keys("", ""));
  EXPECT_EQ(error_of([&] { load_curve_client_keys(pair_.public_key, ""); }).first, ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { load_curve_client_keys("", pair_.secret_key); }).first, ErrorCode::kInvalidArgument);
  const CurveKeyPair server = generate_curve_key_pair();
  std::optional<CurveClientKeys> keys = load_curve_client_keys(server.public_key, write("own.key", pair_.secret_key));
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->server_public_key, server.public_key);
  EXPECT_EQ(keys->own.secret_key, pair_.secret_key);
  EXPECT_EQ(keys->own.public_key, pair_.public_key);
}

}  // namespace
}  // namespace flashq::testing
