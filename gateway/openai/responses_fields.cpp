// Checked reads of a Responses API body's fields.
#include "gateway/openai/responses_fields.h"

#include <algorithm>

#include "gateway/openai/api_error.h"

namespace flashq::gateway {

namespace {

[[noreturn]] void wrong_type(const std::string& path, const char* expected) {
  throw invalid_request("'" + path + "' must be " + expected, path, "invalid_type");
}

}  // namespace

void check_known_fields(const ResponsesJson& object, std::initializer_list<std::string_view> known,
                        const std::string& at) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      const std::string path = field_path(at, key);
      throw invalid_request("unknown parameter '" + path + "'", path, "unknown_parameter");
    }
  }
}

std::string field_path(const std::string& at, std::string_view key) {
  return at.empty() ? std::string(key) : at + "." + std::string(key);
}

std::string element_path(const std::string& at, std::size_t index) {
  return at + "[" + std::to_string(index) + "]";
}

const ResponsesJson* optional_field(const ResponsesJson& object, std::string_view key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

const std::string& as_string(const ResponsesJson& value, const std::string& path) {
  if (!value.is_string()) wrong_type(path, "a string");
  return value.get_ref<const std::string&>();
}

bool as_bool(const ResponsesJson& value, const std::string& path) {
  if (!value.is_boolean()) wrong_type(path, "a boolean");
  return value.get<bool>();
}

std::int64_t as_integer(const ResponsesJson& value, const std::string& path) {
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number_unsigned()) {
    if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) wrong_type(path, "an integer in range");
    return value.get<std::int64_t>();
  }
  wrong_type(path, "an integer");
}

double as_number(const ResponsesJson& value, const std::string& path) {
  if (!value.is_number()) wrong_type(path, "a number");
  return value.get<double>();
}

const ResponsesJson& as_object(const ResponsesJson& value, const std::string& path) {
  if (!value.is_object()) wrong_type(path, "an object");
  return value;
}

const ResponsesJson& as_array(const ResponsesJson& value, const std::string& path) {
  if (!value.is_array()) wrong_type(path, "an array");
  return value;
}

}  // namespace flashq::gateway
