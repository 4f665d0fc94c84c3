// GBNF for the numbers in a range (JSON Schema's minimum and maximum): integers, and decimal
// numbers between integral bounds, written without leading zeros, "-0", a plus sign or (for
// bounded decimals) an exponent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace flashq::grammar {

// Bounds beyond this magnitude are refused (the digit arithmetic stays within int64).
inline constexpr int64_t kMaxIntegerBound = 1'000'000'000'000'000'000;

// A GBNF expression for the integers in [lo, hi], either side open when absent. Throws
// kInvalidArgument when the range is empty or a bound is beyond kMaxIntegerBound.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

struct NumberBound {
  int64_t value;
  bool exclusive;
};

// A GBNF expression for the JSON numbers (integer part, optional fraction, no exponent) in the
// range given by integral bounds, either side open when absent. Throws kInvalidArgument when
// the range holds no number or a bound is beyond kMaxIntegerBound.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace flashq::grammar
