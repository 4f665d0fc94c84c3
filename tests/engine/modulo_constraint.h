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
// from position kEndFrom on, and must by kLength (nothing is allowed there). With `forcing`,
// positions kForcedFrom..kForcedTo-1 allow exactly one token each (forced_at), which
// forced_token() names.
class ModuloConstraint final : public TokenConstraint {
 public:
  static constexpr int32_t kAllowedBelow = 250;  // below every tiny model's special ids
  static constexpr int64_t kEndFrom = 6;
  static constexpr int64_t kLength = 14;
  static constexpr int64_t kForcedFrom = 1;
  static constexpr int64_t kForcedTo = 5;

  explicit ModuloConstraint(bool forcing = false) : forcing_(forcing) {}

  static int32_t forced_at(int64_t position) { return static_cast<int32_t>(30 + position); }
  static bool allows(int64_t position, int32_t token) {
    return position < kLength && token >= 0 && token < kAllowedBelow && token % 3 == position % 3;
  }
  bool allows_here(int64_t position, int32_t token) const {
    if (forcing_ && position >= kForcedFrom && position < kForcedTo) return token == forced_at(position);
    return allows(position, token);
  }

  void fill_allowed(std::span<uint32_t> allowed) const override {
    const auto below = std::min<int64_t>(kAllowedBelow, static_cast<int64_t>(allowed.size()) * 32);
    for (int32_t t = 0; t < below; ++t) {
      if (allows_here(position_, t)) allowed[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
    }
  }
  void advance(int32_t token) override {
    EXPECT_TRUE(allows_here(position_, token)) << "token " << token << " at output position " << position_;
    ++position_;
  }
  void rollback(int64_t tokens) override {
    ASSERT_LE(tokens, position_);
    position_ -= tokens;
  }
  bool can_end() const override { return position_ >= kEndFrom; }
  std::optional<int32_t> forced_token() override {
    if (!forcing_ || position_ < kForcedFrom || position_ >= kForcedTo) return std::nullopt;
    return forced_at(position_);
  }

  int64_t position() const { return position_; }

 private:
  bool forcing_;
  int64_t position_ = 0;
};

}  // namespace flashq::testing
