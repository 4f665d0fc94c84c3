// GBNF for the decimal integers in a range (JSON Schema's minimum and maximum on integers),
// without leading zeros, "-0" or a plus sign: the text a JSON serializer writes.
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

}  // namespace flashq::grammar
