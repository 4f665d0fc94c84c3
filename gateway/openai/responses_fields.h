// Reading the fields of a Responses API request body: every object's keys checked against the
// ones OpenAI defines for it (an unknown key is a 400 naming it, never ignored), and typed reads
// that answer a wrong type with OpenAI's error object naming the field's path
// (`input[2].content[0].text`). The JSON keeps the body's key order (nlohmann::ordered_json):
// tool parameter schemas reach the chat template, and the response object echoes them, as the
// client wrote them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace flashq::gateway {

using ResponsesJson = nlohmann::ordered_json;

// Throws invalid_request naming `at` + "." + the first key of `object` not in `known`
// (code unknown_parameter), so a misspelt field is never silently dropped.
void check_known_fields(const ResponsesJson& object, std::initializer_list<std::string_view> known,
                        const std::string& at);

// `at` joined with a key or an index the way OpenAI names a parameter: "input[2].content".
std::string field_path(const std::string& at, std::string_view key);
std::string element_path(const std::string& at, std::size_t index);

// The value of `key` in `object`, or nullptr when absent or null (OpenAI treats them alike).
const ResponsesJson* optional_field(const ResponsesJson& object, std::string_view key);

// Typed reads: a wrong type is invalid_request (code invalid_type) naming `path`.
const std::string& as_string(const ResponsesJson& value, const std::string& path);
bool as_bool(const ResponsesJson& value, const std::string& path);
std::int64_t as_integer(const ResponsesJson& value, const std::string& path);
double as_number(const ResponsesJson& value, const std::string& path);
const ResponsesJson& as_object(const ResponsesJson& value, const std::string& path);
const ResponsesJson& as_array(const ResponsesJson& value, const std::string& path);

}  // namespace flashq::gateway
