#include "shared/protocol/field_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "shared/error.h"
#include "shared/protocol/limits.h"

namespace flashq::protocol {
namespace {

std::string_view type_name(const msgpack::object& value) {
  switch (value.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "a binary";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    case msgpack::type::EXT: return "an extension";
  }
  return "an unknown type";
}

[[noreturn]] void fail_type(const msgpack::object& value, const FieldPath& at, std::string_view expected) {
  at.fail("must be " + std::string(expected) + ", got " + std::string(type_name(value)));
}

// A peer-supplied key, safe to put in a log line.
std::string printable(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::string out;
  for (char c : text.substr(0, kShown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > kShown) out += "...";
  return out;
}

std::string range_text(std::int64_t min, std::int64_t max) {
  return std::to_string(min) + ".." + std::to_string(max);
}

}  // namespace

FieldPath FieldPath::child(std::string_view key) const {
  return {message, path.empty() ? std::string(key) : path + "." + std::string(key)};
}

FieldPath FieldPath::element(std::size_t index) const {
  return {message, path + "[" + std::to_string(index) + "]"};
}

void FieldPath::fail(const std::string& problem) const {
  const std::string where = path.empty() ? " body: " : " field " + path + ": ";
  throw Error(ErrorCode::kProtocol, std::string(message) + where + problem);
}

std::string read_string(const msgpack::object& value, const FieldPath& at, ByteRange bytes) {
  if (value.type != msgpack::type::STR) fail_type(value, at, "a string");
  const std::size_t size = value.via.str.size;
  if (size < bytes.min || size > bytes.max) {
    at.fail("must be a string of " + std::to_string(bytes.min) + ".." + std::to_string(bytes.max) +
            " bytes, got " + std::to_string(size) + " bytes");
  }
  return std::string(value.via.str.ptr, size);
}

std::string read_binary(const msgpack::object& value, const FieldPath& at, ByteRange bytes) {
  if (value.type != msgpack::type::BIN) fail_type(value, at, "a binary");
  const std::size_t size = value.via.bin.size;
  if (size < bytes.min || size > bytes.max) {
    at.fail("must be " + std::to_string(bytes.min) + ".." + std::to_string(bytes.max) + " bytes, got " +
            std::to_string(size) + " bytes");
  }
  return std::string(value.via.bin.ptr, size);
}

std::int64_t read_integer(const msgpack::object& value, const FieldPath& at, std::int64_t min, std::int64_t max) {
  std::int64_t n = 0;
  if (value.type == msgpack::type::POSITIVE_INTEGER) {
    if (value.via.u64 > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      at.fail("must be an integer in " + range_text(min, max) + ", got " + std::to_string(value.via.u64));
    }
    n = static_cast<std::int64_t>(value.via.u64);
  } else if (value.type == msgpack::type::NEGATIVE_INTEGER) {
    n = value.via.i64;
  } else {
    fail_type(value, at, "an integer");
  }
  if (n < min || n > max) at.fail("must be an integer in " + range_text(min, max) + ", got " + std::to_string(n));
  return n;
}

std::uint64_t read_unsigned(const msgpack::object& value, const FieldPath& at) {
  if (value.type == msgpack::type::NEGATIVE_INTEGER) {
    at.fail("must be a non-negative integer, got " + std::to_string(value.via.i64));
  }
  if (value.type != msgpack::type::POSITIVE_INTEGER) fail_type(value, at, "a non-negative integer");
  return value.via.u64;
}

double read_number(const msgpack::object& value, const FieldPath& at) {
  double x = 0;
  switch (value.type) {
    case msgpack::type::POSITIVE_INTEGER: x = static_cast<double>(value.via.u64); break;
    case msgpack::type::NEGATIVE_INTEGER: x = static_cast<double>(value.via.i64); break;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: x = value.via.f64; break;
    default: fail_type(value, at, "a number");
  }
  if (!std::isfinite(x)) at.fail("must be a finite number");
  return x;
}

bool read_bool(const msgpack::object& value, const FieldPath& at) {
  if (value.type != msgpack::type::BOOLEAN) fail_type(value, at, "a boolean");
  return value.via.boolean;
}

std::span<const msgpack::object> read_array(const msgpack::object& value, const FieldPath& at,
                                            std::size_t max_elements) {
  if (value.type != msgpack::type::ARRAY) fail_type(value, at, "an array");
  const std::size_t size = value.via.array.size;
  if (size > max_elements) {
    at.fail("at most " + std::to_string(max_elements) + " elements, got " + std::to_string(size));
  }
  if (size == 0) return {};
  return {value.via.array.ptr, size};
}

std::vector<std::int32_t> read_token_ids(const msgpack::object& value, const FieldPath& at,
                                         std::size_t max_elements) {
  const std::span<const msgpack::object> elements = read_array(value, at, max_elements);
  std::vector<std::int32_t> ids;
  ids.reserve(elements.size());
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const msgpack::object& element = elements[i];
    // The common case first; errors go through read_integer for their message.
    if (element.type == msgpack::type::POSITIVE_INTEGER && element.via.u64 <= kMaxTokenId) {
      ids.push_back(static_cast<std::int32_t>(element.via.u64));
    } else {
      ids.push_back(static_cast<std::int32_t>(read_integer(element, at.element(i), 0, kMaxTokenId)));
    }
  }
  return ids;
}

std::string read_raw(const msgpack::object& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return std::string(buffer.data(), buffer.size());
}

FieldReader::FieldReader(const msgpack::object& map, FieldPath at) : at_(std::move(at)) {
  if (map.type != msgpack::type::MAP) fail_type(map, at_, "a map");
  fields_.reserve(map.via.map.size);
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) {
      at_.fail("keys must be strings, key " + std::to_string(i) + " is " + std::string(type_name(kv.key)));
    }
    fields_.emplace_back(std::string_view(kv.key.via.str.ptr, kv.key.via.str.size), &kv.val);
  }
  std::sort(fields_.begin(), fields_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto duplicate = std::adjacent_find(fields_.begin(), fields_.end(),
                                            [](const auto& a, const auto& b) { return a.first == b.first; });
  if (duplicate != fields_.end()) at_.fail("duplicate key \"" + printable(duplicate->first) + "\"");
}

void FieldReader::fail(std::string_view key, const std::string& problem) const { field_path(key).fail(problem); }

const msgpack::object* FieldReader::find(std::string_view key) const {
  const auto it = std::lower_bound(fields_.begin(), fields_.end(), key,
                                   [](const auto& field, std::string_view k) { return field.first < k; });
  if (it == fields_.end() || it->first != key || it->second->type == msgpack::type::NIL) return nullptr;
  return it->second;
}

const msgpack::object& FieldReader::require(std::string_view key) const {
  const msgpack::object* value = find(key);
  if (value == nullptr) fail(key, "missing (required)");
  return *value;
}

std::string FieldReader::string(std::string_view key, ByteRange bytes) const {
  return read_string(require(key), field_path(key), bytes);
}

std::optional<std::string> FieldReader::optional_string(std::string_view key, ByteRange bytes) const {
  const msgpack::object* value = find(key);
  if (value == nullptr) return std::nullopt;
  return read_string(*value, field_path(key), bytes);
}

std::int64_t FieldReader::integer(std::string_view key, std::int64_t min, std::int64_t max) const {
  return read_integer(require(key), field_path(key), min, max);
}

std::int64_t FieldReader::integer_or(std::string_view key, std::int64_t min, std::int64_t max,
                                     std::int64_t fallback) const {
  const msgpack::object* value = find(key);
  return value == nullptr ? fallback : read_integer(*value, field_path(key), min, max);
}

std::uint64_t FieldReader::unsigned_or(std::string_view key, std::uint64_t fallback) const {
  const msgpack::object* value = find(key);
  return value == nullptr ? fallback : read_unsigned(*value, field_path(key));
}

double FieldReader::number(std::string_view key) const { return read_number(require(key), field_path(key)); }

double FieldReader::number_or(std::string_view key, double fallback) const {
  const msgpack::object* value = find(key);
  return value == nullptr ? fallback : read_number(*value, field_path(key));
}

bool FieldReader::boolean_or(std::string_view key, bool fallback) const {
  const msgpack::object* value = find(key);
  return value == nullptr ? fallback : read_bool(*value, field_path(key));
}

std::vector<std::int32_t> FieldReader::token_ids(std::string_view key, std::size_t max_elements) const {
  return read_token_ids(require(key), field_path(key), max_elements);
}

std::vector<std::int32_t> FieldReader::token_ids_or_empty(std::string_view key, std::size_t max_elements) const {
  const msgpack::object* value = find(key);
  if (value == nullptr) return {};
  return read_token_ids(*value, field_path(key), max_elements);
}

FieldReader FieldReader::map(std::string_view key) const { return FieldReader(require(key), field_path(key)); }

std::optional<FieldReader> FieldReader::optional_map(std::string_view key) const {
  const msgpack::object* value = find(key);
  if (value == nullptr) return std::nullopt;
  return FieldReader(*value, field_path(key));
}

FieldReader body_reader(const msgpack::object& root, std::string_view message) {
  return FieldReader(root, FieldPath{message, ""});
}

}  // namespace flashq::protocol
