// A token constraint for the engine's tests (token_constraint.h): which ids an output position may
// take depends on the position, so a test knows exactly what every token and draft must be.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <span>

#include "worker/engine/token_constraint.h"

namespace flashq::testing {

// Output position k may take the ids below kAllowedBelow that are k modulo 3; the output may end
// from position kEndFrom on, and must by kLength (nothing is allowed there).
class ModuloConstraint final : public TokenConstraint {
 public:
  static constexpr int32_t kAllowedBelow = 250;  // below every tiny model's special ids
  static constexpr int64_t kEndFrom = 6;
  static constexpr int64_t kLength = 14;

  static bool allows(int64_t position, int32_t token) {
    return position < kLength && token >= 0 && token < kAllowedBelow && token % 3 == position % 3;
  }

  void fill_allowed(std::span<uint32_t> allowed) const override {
    const auto below = std::min<int64_t>(kAllowedBelow, static_cast<int64_t>(allowed.size()) * 32);
    for (int32_t t = 0; t < below; ++t) {
      if (allows(position_, t)) allowed[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
    }
  }
  void advance(int32_t token) override {
    EXPECT_TRUE(allows(position_, token)) << "token " << token << " at output position " << position_;
    ++position_;
  }
  void rollback(int64_t tokens) override {
    ASSERT_LE(tokens, position_);
    position_ -= tokens;
  }
  bool can_end() const override { return position_ >= kEndFrom; }

  int64_t position() const { return position_; }

 private:
  int64_t position_ = 0;
};

}  // namespace flashq::testing
