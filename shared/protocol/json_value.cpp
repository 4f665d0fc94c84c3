#include "shared/protocol/json_value.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "shared/error.h"

namespace flashq::protocol {
namespace {

using Json = nlohmann::ordered_json;

// A peer-supplied key as part of an error's field path: printable and short.
std::string printable_key(std::string_view key) {
  constexpr std::size_t kShown = 64;
  std::string out;
  for (char c : key.substr(0, kShown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (key.size() > kShown) out += "...";
  return out;
}

// The key as the JSON text spells it (each invalid UTF-8 sequence replaced), so that two keys
// that differ only in invalid bytes are refused as the duplicates they become.
std::string key_as_written(std::string_view key) {
  return Json(std::string(key)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Recursion is bounded: the body was unpacked with at most kMaxDepth levels of nesting.
Json to_json(const msgpack::object& value, const FieldPath& at) {
  switch (value.type) {
    case msgpack::type::NIL:
      return nullptr;
    case msgpack::type::BOOLEAN:
      return value.via.boolean;
    case msgpack::type::POSITIVE_INTEGER:
      return value.via.u64;
    case msgpack::type::NEGATIVE_INTEGER:
      return value.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      if (!std::isfinite(value.via.f64)) at.fail("must be a finite number (JSON has no NaN or infinity)");
      return value.via.f64;
    case msgpack::type::STR:
      return std::string(value.via.str.ptr, value.via.str.size);
    case msgpack::type::ARRAY: {
      Json out = Json::array();
      for (std::uint32_t i = 0; i < value.via.array.size; ++i)
        out.push_back(to_json(value.via.array.ptr[i], at.element(i)));
      return out;
    }
    case msgpack::type::MAP: {
      Json out = Json::object();
      std::set<std::string> keys;
      for (std::uint32_t i = 0; i < value.via.map.size; ++i) {
        const msgpack::object_kv& kv = value.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR)
          at.fail("map keys must be strings (JSON), key " + std::to_string(i) + " is not");
        const std::string_view key(kv.key.via.str.ptr, kv.key.via.str.size);
        if (!keys.insert(key_as_written(key)).second) at.fail("duplicate key in a map");
        out[std::string(key)] = to_json(kv.val, at.child(printable_key(key)));
      }
      return out;
    }
    case msgpack::type::BIN:
      at.fail("must be a JSON-like value, got a binary");
    case msgpack::type::EXT:
      at.fail("must be a JSON-like value, got an extension");
  }
  at.fail("must be a JSON-like value");
}

}  // namespace

std::string read_json_text(const msgpack::object& value, const FieldPath& at) {
  // Strings are not checked for UTF-8 on the wire (docs/protocol.md); JSON text cannot carry
  // other bytes, so each invalid sequence becomes U+FFFD, as the tokenizer would make it anyway.
  return to_json(value, at).dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string pack_json_text(std::string_view json_text, std::string_view what) {
  const Json value = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) throw Error(ErrorCode::kProtocol, std::string(what) + ": not valid JSON text");
  const std::vector<std::uint8_t> bytes = Json::to_msgpack(value);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace flashq::protocol
