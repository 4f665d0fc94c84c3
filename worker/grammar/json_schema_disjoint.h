// Whether two JSON schemas can never accept the same value, as far as can be seen without
// solving them: different types, different constant values, or objects whose required
// discriminator property has different constants. oneOf is a union whose branches must not
// overlap; when they provably cannot, it is the same as anyOf, and the grammar enforces it.
#pragma once

#include <nlohmann/json.hpp>

namespace flashq::grammar {

// `a` and `b` with their top-level local $refs already resolved.
bool provably_disjoint(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

}  // namespace flashq::grammar
