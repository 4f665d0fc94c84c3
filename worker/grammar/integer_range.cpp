#include "worker/grammar/integer_range.h"

#include <algorithm>
#include <vector>

#include "shared/error.h"

namespace flashq::grammar {
namespace {

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t count) {
  if (count == 0) return "";
  return count == 1 ? "[0-9]" : "[0-9]{" + std::to_string(count) + "}";
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) {
    if (part.empty()) continue;
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

// Numbers written with exactly a.size() digits, from a to b (same length, a <= b).
std::string same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  size_t rest = a.size() - 1;
  if (a[0] == b[0]) return join({digit_class(a[0], a[0]), same_length(a.substr(1), b.substr(1))}, " ");
  bool low_full = a.find_first_not_of('0', 1) == std::string::npos;
  bool high_full = b.find_first_not_of('9', 1) == std::string::npos;
  if (low_full && high_full) return join({digit_class(a[0], b[0]), any_digits(rest)}, " ");
  std::vector<std::string> parts;
  char middle_lo = a[0] + 1, middle_hi = b[0] - 1;
  if (low_full) {
    middle_lo = a[0];
  } else {
    parts.push_back(join({digit_class(a[0], a[0]), same_length(a.substr(1), std::string(rest, '9'))}, " "));
  }
  if (high_full) middle_hi = b[0];
  if (middle_lo <= middle_hi) parts.push_back(join({digit_class(middle_lo, middle_hi), any_digits(rest)}, " "));
  if (!high_full) {
    parts.push_back(join({digit_class(b[0], b[0]), same_length(std::string(rest, '0'), b.substr(1))}, " "));
  }
  return parts.size() == 1 ? parts[0] : "(" + join(parts, " | ") + ")";
}

int64_t power_of_ten(size_t n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// Non-negative integers from lo (>= 0) to hi, or without end.
std::string non_negative(int64_t lo, std::optional<int64_t> hi) {
  std::vector<std::string> parts;
  size_t lo_digits = std::to_string(lo).size();
  size_t hi_digits = hi ? std::to_string(*hi).size() : lo_digits;
  for (size_t n = lo_digits; n <= hi_digits; ++n) {
    int64_t first = std::max(lo, n == 1 ? int64_t{0} : power_of_ten(n - 1));
    int64_t last = power_of_ten(n) - 1;
    if (hi) last = std::min(last, *hi);
    if (first <= last) parts.push_back(same_length(std::to_string(first), std::to_string(last)));
  }
  if (!hi) parts.push_back("[1-9] [0-9]{" + std::to_string(lo_digits) + ",}");
  return parts.size() == 1 ? parts[0] : "(" + join(parts, " | ") + ")";
}

const char* const kAnyFraction = "(\".\" [0-9]+)?";
const char* const kNonZeroFraction = "\".\" [0-9]* [1-9] [0-9]*";
const char* const kZeroFraction = "(\".\" \"0\"+)?";

// Non-negative decimals from a to b (integers, a <= b, b absent: no end), each end open or
// closed: by integer part, the fraction deciding at the two ends.
std::string magnitude_range(int64_t a, bool a_open, std::optional<int64_t> b, bool b_open) {
  if (b && a > *b) return "";
  std::vector<std::string> parts;
  std::string at_a = "\"" + std::to_string(a) + "\" ";
  if (b && *b == a) {
    if (!a_open && !b_open) parts.push_back(at_a + kZeroFraction);
  } else {
    parts.push_back(at_a + (a_open ? kNonZeroFraction : kAnyFraction));
    if (!b || a + 1 <= *b - 1) {
      parts.push_back(non_negative(a + 1, b ? std::optional<int64_t>(*b - 1) : std::nullopt) + " " + kAnyFraction);
    }
    if (b && !b_open) parts.push_back("\"" + std::to_string(*b) + "\" " + kZeroFraction);
  }
  if (parts.empty()) return "";
  return parts.size() == 1 ? parts[0] : "(" + join(parts, " | ") + ")";
}

void check_bound(int64_t bound) {
  if (bound > kMaxIntegerBound || bound < -kMaxIntegerBound) {
    throw Error(ErrorCode::kInvalidArgument,
                "number bound " + std::to_string(bound) + " is beyond the supported +-10^18");
  }
}

}  // namespace

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  if (lo) check_bound(lo->value);
  if (hi) check_bound(hi->value);
  std::vector<std::string> parts;
  // Negative numbers, by magnitude: above -hi (or above 0), up to -lo.
  if (!lo || lo->value < 0) {
    bool from_zero = !hi || hi->value >= 0;
    int64_t a = from_zero ? 0 : -hi->value;
    bool a_open = from_zero ? true : hi->exclusive;
    std::optional<int64_t> b;
    if (lo) b.emplace(-lo->value);
    std::string negative = magnitude_range(a, a_open, b, lo && lo->exclusive);
    if (!negative.empty()) parts.push_back("\"-\" " + negative);
  }
  // Non-negative numbers: from max(lo, 0) up to hi.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    bool above_zero = lo && lo->value >= 0;
    int64_t a = above_zero ? lo->value : 0;
    std::optional<int64_t> b;
    if (hi) b.emplace(hi->value);
    std::string non_negative_part = magnitude_range(a, above_zero && lo->exclusive, b, hi && hi->exclusive);
    if (!non_negative_part.empty()) parts.push_back(non_negative_part);
  }
  if (parts.empty()) throw Error(ErrorCode::kInvalidArgument, "no number lies between minimum and maximum");
  return parts.size() == 1 ? parts[0] : "(" + join(parts, " | ") + ")";
}

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  for (const auto& bound : {lo, hi}) {
    if (bound && (*bound > kMaxIntegerBound || *bound < -kMaxIntegerBound)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "integer bound " + std::to_string(*bound) + " is beyond the supported +-10^18");
    }
  }
  if (lo && hi && *lo > *hi) {
    throw Error(ErrorCode::kInvalidArgument, "no integer lies between minimum " +
                                                 std::to_string(*lo) + " and maximum " +
                                                 std::to_string(*hi));
  }
  std::vector<std::string> parts;
  if (!lo || *lo < 0) {  // the negative part, by absolute value
    int64_t nearest = hi ? std::min<int64_t>(*hi, -1) : -1;
    if (!lo || *lo <= nearest) {
      parts.push_back("\"-\" " + non_negative(-nearest, lo ? std::optional<int64_t>(-*lo) : std::nullopt));
    }
  }
  if (!hi || *hi >= 0) parts.push_back(non_negative(lo ? std::max<int64_t>(*lo, 0) : 0, hi));
  return parts.size() == 1 ? parts[0] : "(" + join(parts, " | ") + ")";
}

}  // namespace flashq::grammar
