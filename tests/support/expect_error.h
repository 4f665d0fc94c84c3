// The one check of a typed refusal: `action` throws a flashq::Error of `code`.
#pragma once

#include <gtest/gtest.h>

#include "shared/error.h"

namespace flashq {

inline void expect_code(ErrorCode code, const auto& action) {
  try {
    action();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
  }
}

}  // namespace flashq
