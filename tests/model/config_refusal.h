// Test helper for the config parsers: the message of a config.json that parse_model_config
// refuses with `expected`, and a test failure when it accepts it or refuses it otherwise.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "shared/error.h"
#include "worker/model/model_config.h"

namespace flashq {

inline std::string refusal(const nlohmann::json& config, ErrorCode expected) {
  try {
    parse_model_config(config, "dir/config.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "config was accepted: " << config.dump();
  return "";
}

}  // namespace flashq
