// Two JSON schemas that must both hold (allOf, or the keywords beside an anyOf) as one schema,
// where each keyword's meaning survives the merge: the tighter bound, the union of required
// properties, the common types, the common enum values, properties merged property by
// property. Keywords whose intersection a grammar cannot express (two different patterns, two
// anyOfs, a $ref beside other constraints) are refused by name.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace flashq::grammar {

// Nothing when no value satisfies both (no common type or enum value). Throws kInvalidArgument
// naming the keyword and `path` when the two cannot be merged.
std::optional<nlohmann::ordered_json> merge_schemas(const nlohmann::ordered_json& a,
                                                    const nlohmann::ordered_json& b, const std::string& path);

}  // namespace flashq::grammar
