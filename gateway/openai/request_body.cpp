// Typed reads of an OpenAI request body's fields, each failure a 400 naming the field.
#include "gateway/openai/request_body.h"

#include <cmath>
#include <limits>

namespace flashq::gateway {

std::string json_type_name(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::null:
      return "null";
    case nlohmann::ordered_json::value_t::object:
      return "an object";
    case nlohmann::ordered_json::value_t::array:
      return "an array";
    case nlohmann::ordered_json::value_t::string:
      return "a string";
    case nlohmann::ordered_json::value_t::boolean:
      return "a boolean";
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::ordered_json::value_t::number_float:
      return "a number";
    default:
      return "not JSON";
  }
}

RequestBody::RequestBody(const nlohmann::ordered_json& body, std::string prefix)
    : body_(body), prefix_(std::move(prefix)) {
  if (!body_.is_object()) {
    const std::string what = prefix_.empty() ? "the request body" : prefix_.substr(0, prefix_.size() - 1);
    throw invalid_request(what + " must be a JSON object, not " + json_type_name(body_),
                          prefix_.empty() ? std::nullopt : std::optional<std::string>(what));
  }
}

const nlohmann::ordered_json* RequestBody::find(std::string_view key) {
  read_.emplace(key);
  const auto it = body_.find(std::string(key));
  if (it == body_.end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::ordered_json& RequestBody::require(std::string_view key) {
  const nlohmann::ordered_json* value = find(key);
  if (value == nullptr) {
    throw invalid_request("'" + field(key) + "' is required", field(key), "missing_required_parameter");
  }
  return *value;
}

std::optional<std::string> RequestBody::string(std::string_view key) {
  const nlohmann::ordered_json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    throw invalid_request("'" + field(key) + "' must be a string, not " + json_type_name(*value), field(key),
                          "invalid_type");
  }
  return value->get<std::string>();
}

std::optional<bool> RequestBody::boolean(std::string_view key) {
  const nlohmann::ordered_json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    throw invalid_request("'" + field(key) + "' must be a boolean, not " + json_type_name(*value), field(key),
                          "invalid_type");
  }
  return value->get<bool>();
}

std::optional<std::int64_t> RequestBody::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  const nlohmann::ordered_json* value = find(key);
  if (value == nullptr) return std::nullopt;
  const std::string range = " between " + std::to_string(min) + " and " + std::to_string(max);
  if (!value->is_number_integer()) {
    throw invalid_request("'" + field(key) + "' must be an integer" + range + ", not " + json_type_name(*value),
                          field(key), "invalid_type");
  }
  // JSON's non-negative integers are read as unsigned, and may exceed int64's range.
  bool in_range = false;
  if (value->is_number_unsigned()) {
    const std::uint64_t x = value->get<std::uint64_t>();
    in_range = max >= 0 && x <= static_cast<std::uint64_t>(max) && (min <= 0 || x >= static_cast<std::uint64_t>(min));
  } else {
    const std::int64_t x = value->get<std::int64_t>();
    in_range = x >= min && x <= max;
  }
  if (!in_range) throw invalid_request("'" + field(key) + "' must be" + range + ", not " + value->dump(), field(key));
  return value->get<std::int64_t>();
}

std::optional<double> RequestBody::number(std::string_view key, double min, double max) {
  const nlohmann::ordered_json* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) {
    throw invalid_request("'" + field(key) + "' must be a number, not " + json_type_name(*value), field(key),
                          "invalid_type");
  }
  const double x = value->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    nlohmann::ordered_json bounds = {min, max};
    throw invalid_request("'" + field(key) + "' must be between " + bounds[0].dump() + " and " + bounds[1].dump() +
                              ", not " + value->dump(),
                          field(key));
  }
  return x;
}

void RequestBody::refuse_unless(std::string_view key, const nlohmann::ordered_json& allowed, const std::string& why) {
  const nlohmann::ordered_json* value = find(key);
  if (value == nullptr || *value == allowed) return;
  throw unsupported_parameter(field(key), why);
}

void RequestBody::refuse(std::string_view key, const std::string& why) {
  if (find(key) != nullptr) throw unsupported_parameter(field(key), why);
}

void RequestBody::refuse_unread() const {
  for (const auto& [key, value] : body_.items()) {
    if (read_.find(key) == read_.end()) {
      throw invalid_request("Unrecognized request argument supplied: " + field(key), field(key),
                            "unrecognized_request_argument");
    }
  }
}

}  // namespace flashq::gateway
