#include "shared/protocol/strict_unpack.h"

#include <string>

#include "shared/error.h"
#include "shared/protocol/limits.h"

namespace flashq::protocol {
namespace {

[[noreturn]] void fail(std::string_view what, const std::string& problem) {
  throw Error(ErrorCode::kProtocol, std::string(what) + ": " + problem);
}

// Walks the bytes without building anything, so a declared length costs nothing until the bytes
// behind it have been seen. It stops at the first value past the limits, before the parser's
// own stack (one entry a level) can grow further.
class StructureCheck : public msgpack::null_visitor {
 public:
  bool start_array(std::uint32_t) { return enter(); }
  bool end_array() { return leave(); }
  bool start_map(std::uint32_t) { return enter(); }
  bool end_map() { return leave(); }
  bool start_array_item() { return count_value(); }
  bool start_map_key() { return count_value(); }
  bool start_map_value() { return count_value(); }
  void parse_error(std::size_t, std::size_t) { malformed_ = true; }
  void insufficient_bytes(std::size_t, std::size_t) { truncated_ = true; }

  bool too_deep() const { return too_deep_; }
  bool too_many_values() const { return too_many_values_; }
  bool malformed() const { return malformed_; }
  bool truncated() const { return truncated_; }

 private:
  bool enter() {
    if (++depth_ > kMaxDepth) too_deep_ = true;
    return !too_deep_;
  }
  bool leave() {
    --depth_;
    return true;
  }
  bool count_value() {
    if (++values_ > kMaxBodyValues) too_many_values_ = true;
    return !too_many_values_;
  }

  std::size_t depth_ = 0;
  std::size_t values_ = 1;  // the outermost value
  bool too_deep_ = false;
  bool too_many_values_ = false;
  bool malformed_ = false;
  bool truncated_ = false;
};

// Zero-copy: strings, binaries and extensions point into the body.
bool reference_everything(msgpack::type::object_type, std::size_t, void*) { return true; }

}  // namespace

void check_msgpack_value(std::string_view bytes, std::string_view what) {
  if (bytes.empty()) fail(what, "empty, expected one msgpack value");
  StructureCheck check;
  std::size_t offset = 0;
  bool complete = false;
  try {
    complete = msgpack::parse(bytes.data(), bytes.size(), offset, check);
  } catch (const msgpack::unpack_error& e) {
    fail(what, std::string("not valid msgpack (") + e.what() + ")");
  }
  if (check.too_deep()) fail(what, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (check.too_many_values()) fail(what, "more than " + std::to_string(kMaxBodyValues) + " msgpack values");
  if (check.malformed()) fail(what, "not valid msgpack");
  if (!complete || check.truncated()) fail(what, "truncated msgpack");
  if (offset != bytes.size()) {
    fail(what, std::to_string(bytes.size() - offset) + " bytes after the end of the msgpack value");
  }
}

msgpack::object_handle unpack_body(std::string_view bytes, std::string_view message) {
  const std::string what = std::string(message) + " body";
  if (bytes.size() > kMaxBodyBytes) {
    fail(what, std::to_string(bytes.size()) + " bytes, over the limit of " + std::to_string(kMaxBodyBytes));
  }
  check_msgpack_value(bytes, what);
  // The check above proved every declared length is backed by bytes and counted the values, so
  // the tree costs at most 16 bytes times kMaxBodyValues. The limits are a second guard.
  const msgpack::unpack_limit limit(/*array=*/kMaxBodyValues, /*map=*/kMaxBodyValues, /*str=*/kMaxBodyBytes,
                                    /*bin=*/kMaxBodyBytes, /*ext=*/kMaxBodyBytes, /*depth=*/kMaxDepth);
  msgpack::object_handle handle;
  try {
    std::size_t offset = 0;
    handle = msgpack::unpack(bytes.data(), bytes.size(), offset, reference_everything, nullptr, limit);
  } catch (const msgpack::unpack_error& e) {
    fail(what, std::string("not valid msgpack (") + e.what() + ")");
  }
  if (handle.get().type != msgpack::type::MAP) fail(what, "not a msgpack map");
  return handle;
}

}  // namespace flashq::protocol
