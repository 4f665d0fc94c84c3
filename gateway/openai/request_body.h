// An OpenAI request body read field by field, for every endpoint: each typed read checks the value
// and names the field's path in its ApiError (`messages[2].content`, `input[3].content[0].text`),
// and null counts as absent (OpenAI's SDKs send null for an unset optional). No field is silently
// ignored: an object's fields are checked against the endpoint's table of them (refuse_unknown),
// or, where which fields belong depends on the others (a chat message's role), every field the
// endpoint never read is refused at the end (refuse_unread); a field accepted without being used
// is read with ignore().
//
// The JSON keeps the body's key order (nlohmann::ordered_json): tool definitions reach the chat
// template key by key as the client wrote them, and the response object echoes them so.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "gateway/openai/api_error.h"

namespace flashq::gateway {

using BodyJson = nlohmann::ordered_json;

// How an API words a body's refusals; the endpoints answer as OpenAI's own do.
enum class BodyDialect {
  // Chat completions and completions: a wrong type names the type given ("must be a string, not
  // an integer"); an unknown field is unrecognized_request_argument.
  kChat,
  // The Responses API: a wrong type says what is expected ("must be a string"); an unknown field
  // is unknown_parameter.
  kResponses,
};

// The names of the fields an object of one endpoint may hold.
using FieldTable = std::span<const std::string_view>;

// A field OpenAI defines for what flashq does not do: accepted only with the value that asks for
// nothing (null: only absent), refused otherwise with `why` (unsupported_parameter).
struct RefusedField {
  std::string_view name;
  BodyJson accepted;
  std::string why;
};

class RequestBody {
 public:
  // 400 when `body` is not a JSON object. `path` names the object in errors ("" for the body
  // itself, "stream_options", "messages[2]").
  explicit RequestBody(const BodyJson& body, std::string path = "", BodyDialect dialect = BodyDialect::kChat);

  // The value, or nullptr when absent or null; the key counts as read.
  const BodyJson* find(std::string_view key);
  // The value, present and not null; 400 missing_required_parameter otherwise.
  const BodyJson& require(std::string_view key);

  std::optional<std::string> string(std::string_view key);
  // A string, present and not null.
  std::string require_string(std::string_view key);
  std::optional<bool> boolean(std::string_view key);
  // Any 64-bit integer.
  std::optional<std::int64_t> integer(std::string_view key);
  // An integer in [min, max] (a float with an integral value is not one).
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max);
  // Any number.
  std::optional<double> number(std::string_view key);
  // A finite number in [min, max].
  std::optional<double> number(std::string_view key, double min, double max);
  const BodyJson* object(std::string_view key);
  const BodyJson* array(std::string_view key);

  // Accepted and not used (an end-user identifier, a caching hint).
  void ignore(std::string_view key) { find(key); }
  // 400 unsupported_parameter naming the key when it is present, not null, and not equal to
  // `allowed` (the value that asks for nothing, e.g. presence_penalty 0); `why` ends the message.
  void refuse_unless(std::string_view key, const BodyJson& allowed, const std::string& why);
  void refuse(std::string_view key, const std::string& why);
  // refuse_unless for each field of the table, in its order.
  void refuse_all(std::span<const RefusedField> fields);

  // 400 naming the first field of the object in neither `known` nor `more`, in the dialect's words.
  void refuse_unknown(FieldTable known, FieldTable more = {}) const;
  // 400 naming the first field no read above touched, in the dialect's words.
  void refuse_unread() const;

  // The field's path as errors give it: "messages[2].content".
  std::string field(std::string_view key) const;
  const std::string& path() const { return path_; }
  BodyDialect dialect() const { return dialect_; }
  const BodyJson& json() const { return body_; }

 private:
  [[noreturn]] void refuse_field(std::string_view key) const;

  const BodyJson& body_;
  std::string path_;
  BodyDialect dialect_;
  std::set<std::string, std::less<>> read_;
};

// `at` joined with a key or an index the way OpenAI names a parameter: "input[2].content".
std::string field_path(const std::string& at, std::string_view key);
std::string element_path(const std::string& at, std::size_t index);

// Typed reads of a value that is no object's field (an array's element), named `path` in errors.
const std::string& string_value(const BodyJson& value, const std::string& path, BodyDialect dialect);
const BodyJson& array_value(const BodyJson& value, const std::string& path, BodyDialect dialect);

// The JSON type of a value as a person reads it ("a string", "an array", ...).
std::string json_type_name(const BodyJson& value);

}  // namespace flashq::gateway
