// Frame 2 of every message: one msgpack map with string keys. Each message struct `M` in
// messages.h has `static constexpr MessageType kType`, `std::string encode_body(const M&)` and
// `M decode_body<M>(std::string_view body)`. Decoding is strict (docs/protocol.md, "Decoding"):
// anything else than exactly one map within the limits, with every required field present and
// every field of the right type and range, is a kProtocol error naming the message and field.
#pragma once

#include <string_view>

namespace flashq::protocol {

template <typename Message>
Message decode_body(std::string_view body);

}  // namespace flashq::protocol
