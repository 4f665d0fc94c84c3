// Typed reads of an OpenAI request body's fields, each failure a 400 naming the field's path.
#include "gateway/openai/request_body.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace flashq::gateway {

std::string json_type_name(const BodyJson& value) {
  switch (value.type()) {
    case BodyJson::value_t::null:
      return "null";
    case BodyJson::value_t::object:
      return "an object";
    case BodyJson::value_t::array:
      return "an array";
    case BodyJson::value_t::string:
      return "a string";
    case BodyJson::value_t::boolean:
      return "a boolean";
    case BodyJson::value_t::number_integer:
    case BodyJson::value_t::number_unsigned:
      return "an integer";
    case BodyJson::value_t::number_float:
      return "a number";
    default:
      return "not JSON";
  }
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, const std::string& expected, const BodyJson& value,
                             BodyDialect dialect) {
  const std::string given = dialect == BodyDialect::kChat ? ", not " + json_type_name(value) : "";
  throw invalid_request("'" + path + "' must be " + expected + given, path, "invalid_type");
}

}  // namespace

std::string field_path(const std::string& at, std::string_view key) {
  return at.empty() ? std::string(key) : at + "." + std::string(key);
}

std::string element_path(const std::string& at, std::size_t index) {
  return at + "[" + std::to_string(index) + "]";
}

const std::string& string_value(const BodyJson& value, const std::string& path, BodyDialect dialect) {
  if (!value.is_string()) wrong_type(path, "a string", value, dialect);
  return value.get_ref<const std::string&>();
}

const BodyJson& array_value(const BodyJson& value, const std::string& path, BodyDialect dialect) {
  if (!value.is_array()) wrong_type(path, "an array", value, dialect);
  return value;
}

RequestBody::RequestBody(const BodyJson& body, std::string path, BodyDialect dialect)
    : body_(body), path_(std::move(path)), dialect_(dialect) {
  if (body_.is_object()) return;
  if (dialect_ == BodyDialect::kResponses) {
    if (path_.empty()) throw invalid_request("the request body must be a JSON object", std::nullopt, "invalid_type");
    wrong_type(path_, "an object", body_, dialect_);
  }
  const std::string what = path_.empty() ? "the request body" : path_;
  throw invalid_request(what + " must be a JSON object, not " + json_type_name(body_),
                        path_.empty() ? std::nullopt : std::optional<std::string>(what));
}

std::string RequestBody::field(std::string_view key) const { return field_path(path_, key); }

const BodyJson* RequestBody::find(std::string_view key) {
  read_.emplace(key);
  const auto it = body_.find(std::string(key));
  if (it == body_.end() || it->is_null()) return nullptr;
  return &*it;
}

const BodyJson& RequestBody::require(std::string_view key) {
  const BodyJson* value = find(key);
  if (value == nullptr) {
    throw invalid_request("'" + field(key) + "' is required", field(key), "missing_required_parameter");
  }
  return *value;
}

std::optional<std::string> RequestBody::string(std::string_view key) {
  const BodyJson* value = find(key);
  if (value == nullptr) return std::nullopt;
  return string_value(*value, field(key), dialect_);
}

std::string RequestBody::require_string(std::string_view key) {
  return string_value(require(key), field(key), dialect_);
}

std::optional<bool> RequestBody::boolean(std::string_view key) {
  const BodyJson* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) wrong_type(field(key), "a boolean", *value, dialect_);
  return value->get<bool>();
}

std::optional<std::int64_t> RequestBody::integer(std::string_view key) {
  const BodyJson* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number_integer()) wrong_type(field(key), "an integer", *value, dialect_);
  return value->get<std::int64_t>();
}

std::optional<std::int64_t> RequestBody::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  const BodyJson* value = find(key);
  if (value == nullptr) return std::nullopt;
  const std::string range = " between " + std::to_string(min) + " and " + std::to_string(max);
  if (!value->is_number_integer()) wrong_type(field(key), "an integer" + range, *value, dialect_);
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

std::optional<double> RequestBody::number(std::string_view key) {
  const BodyJson* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) wrong_type(field(key), "a number", *value, dialect_);
  return value->get<double>();
}

std::optional<double> RequestBody::number(std::string_view key, double min, double max) {
  const std::optional<double> x = number(key);
  if (!x) return std::nullopt;
  if (!std::isfinite(*x) || *x < min || *x > max) {
    BodyJson bounds = {min, max};
    throw invalid_request("'" + field(key) + "' must be between " + bounds[0].dump() + " and " + bounds[1].dump() +
                              ", not " + body_.at(std::string(key)).dump(),
                          field(key));
  }
  return x;
}

const BodyJson* RequestBody::object(std::string_view key) {
  const BodyJson* value = find(key);
  if (value != nullptr && !value->is_object()) wrong_type(field(key), "an object", *value, dialect_);
  return value;
}

const BodyJson* RequestBody::array(std::string_view key) {
  const BodyJson* value = find(key);
  if (value != nullptr) array_value(*value, field(key), dialect_);
  return value;
}

void RequestBody::refuse_unless(std::string_view key, const BodyJson& allowed, const std::string& why) {
  const BodyJson* value = find(key);
  if (value == nullptr || *value == allowed) return;
  throw unsupported_parameter(field(key), why);
}

void RequestBody::refuse(std::string_view key, const std::string& why) {
  if (find(key) != nullptr) throw unsupported_parameter(field(key), why);
}

void RequestBody::refuse_all(std::span<const RefusedField> fields) {
  for (const RefusedField& refused : fields) refuse_unless(refused.name, refused.accepted, refused.why);
}

void RequestBody::refuse_field(std::string_view key) const {
  const std::string path = field(key);
  if (dialect_ == BodyDialect::kResponses) {
    throw invalid_request("unknown parameter '" + path + "'", path, "unknown_parameter");
  }
  throw invalid_request("Unrecognized request argument supplied: " + path, path, "unrecognized_request_argument");
}

void RequestBody::refuse_unknown(FieldTable known, FieldTable more) const {
  for (const auto& [key, value] : body_.items()) {
    const bool listed = std::find(known.begin(), known.end(), key) != known.end() ||
                        std::find(more.begin(), more.end(), key) != more.end();
    if (!listed) refuse_field(key);
  }
}

void RequestBody::refuse_unread() const {
  for (const auto& [key, value] : body_.items()) {
    if (read_.find(key) == read_.end()) refuse_field(key);
  }
}

}  // namespace flashq::gateway
