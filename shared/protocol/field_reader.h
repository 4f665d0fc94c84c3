// Typed, validated reads of the fields of one msgpack map, for the decoders of messages.h.
// Every failure is a kProtocol error that names the message type and the field's path, e.g.
// "SUBMIT field job.top_p: must be in (0, 1], got 1.5".
//
// Absent and nil are the same: an optional field that is nil takes its default, a required one
// is missing. Keys must be strings and unique; keys nobody asks for are ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "shared/protocol/message_type.h"
#include "shared/protocol/strict_unpack.h"

namespace flashq::protocol {

// Where a value sits: the message type and the dotted path of the field ("job.stop[2]").
struct FieldPath {
  std::string_view message;
  std::string path;

  FieldPath child(std::string_view key) const;
  FieldPath element(std::size_t index) const;
  [[noreturn]] void fail(const std::string& problem) const;
};

struct ByteRange {
  std::size_t min = 0;
  std::size_t max = 0;
};

// Reads of a single value (an array element or a field's value).
std::string read_string(const msgpack::object& value, const FieldPath& at, ByteRange bytes);
// A msgpack bin (bytes that need not be UTF-8, such as a token's).
std::string read_binary(const msgpack::object& value, const FieldPath& at, ByteRange bytes);
std::int64_t read_integer(const msgpack::object& value, const FieldPath& at, std::int64_t min, std::int64_t max);
std::uint64_t read_unsigned(const msgpack::object& value, const FieldPath& at);
double read_number(const msgpack::object& value, const FieldPath& at);  // finite, int or float
bool read_bool(const msgpack::object& value, const FieldPath& at);
std::span<const msgpack::object> read_array(const msgpack::object& value, const FieldPath& at,
                                            std::size_t max_elements);
std::vector<std::int32_t> read_token_ids(const msgpack::object& value, const FieldPath& at,
                                         std::size_t max_elements);
// The value packed again as msgpack bytes (for opaque fields such as job.metadata).
std::string read_raw(const msgpack::object& value);

class FieldReader {
 public:
  // `map` must be a msgpack map; `at` is its own path ("" for the body). The reader refers to
  // `map`, which must outlive it.
  FieldReader(const msgpack::object& map, FieldPath at);

  const FieldPath& path() const { return at_; }
  FieldPath field_path(std::string_view key) const { return at_.child(key); }
  [[noreturn]] void fail(std::string_view key, const std::string& problem) const;

  // The value of `key`, or null when it is absent or nil.
  const msgpack::object* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // The value of `key`; a missing field is an error.
  const msgpack::object& require(std::string_view key) const;

  std::string string(std::string_view key, ByteRange bytes) const;
  std::optional<std::string> optional_string(std::string_view key, ByteRange bytes) const;
  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max) const;
  std::int64_t integer_or(std::string_view key, std::int64_t min, std::int64_t max, std::int64_t fallback) const;
  std::uint64_t unsigned_or(std::string_view key, std::uint64_t fallback) const;
  double number(std::string_view key) const;
  double number_or(std::string_view key, double fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  std::vector<std::int32_t> token_ids(std::string_view key, std::size_t max_elements) const;
  std::vector<std::int32_t> token_ids_or_empty(std::string_view key, std::size_t max_elements) const;
  FieldReader map(std::string_view key) const;
  std::optional<FieldReader> optional_map(std::string_view key) const;

 private:
  FieldPath at_;
  std::vector<std::pair<std::string_view, const msgpack::object*>> fields_;  // sorted by key
};

// A reader over a whole body: `root` must be a map.
FieldReader body_reader(const msgpack::object& root, std::string_view message);

// Unpacks a whole body of `Message` and hands its fields to `read_fields(const FieldReader&)`.
template <typename Message, typename ReadFields>
Message read_body(std::string_view body, ReadFields read_fields) {
  const std::string_view name = message_type_name(Message::kType);
  const msgpack::object_handle handle = unpack_body(body, name);
  return read_fields(body_reader(handle.get(), name));
}

}  // namespace flashq::protocol
