// An OpenAI request body read field by field: each typed read checks the value and names the field
// in its ApiError, null counts as absent (OpenAI's SDKs send null for an unset optional), and every
// field the endpoint never read is refused at the end (unrecognized_request_argument, as OpenAI
// answers an unknown parameter), so no field is silently ignored: a field the endpoint accepts
// without using it is read with ignore().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "gateway/openai/api_error.h"

namespace flashq::gateway {

class RequestBody {
 public:
  // 400 invalid_request_error when the body is not a JSON object. `prefix` names the fields of a
  // nested object in errors ("stream_options." , "messages[2].").
  explicit RequestBody(const nlohmann::ordered_json& body, std::string prefix = "");

  // The value, or nullptr when absent or null; the key counts as read.
  const nlohmann::ordered_json* find(std::string_view key);
  // The value, present and not null; 400 missing_required_parameter otherwise.
  const nlohmann::ordered_json& require(std::string_view key);

  std::optional<std::string> string(std::string_view key);
  std::optional<bool> boolean(std::string_view key);
  // An integer in [min, max] (a float with an integral value is not one).
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max);
  // A finite number in [min, max].
  std::optional<double> number(std::string_view key, double min, double max);

  // Accepted and not used (an end-user identifier, a caching hint).
  void ignore(std::string_view key) { find(key); }
  // 400 unsupported_parameter naming the key when it is present, not null, and not equal to
  // `allowed` (the value that asks for nothing, e.g. presence_penalty 0); `why` ends the message.
  void refuse_unless(std::string_view key, const nlohmann::ordered_json& allowed, const std::string& why);
  void refuse(std::string_view key, const std::string& why);

  // 400 unrecognized_request_argument naming the first field no read above touched.
  void refuse_unread() const;

  // The field's name as errors give it: prefix + key.
  std::string field(std::string_view key) const { return prefix_ + std::string(key); }

 private:
  const nlohmann::ordered_json& body_;
  std::string prefix_;
  std::set<std::string, std::less<>> read_;
};

// The JSON type of a value as a person reads it ("a string", "an array", ...).
std::string json_type_name(const nlohmann::ordered_json& value);

}  // namespace flashq::gateway
