// Turns a body (frame 2) into a msgpack object tree, refusing anything that is not exactly one
// complete msgpack value within the limits of limits.h. Every refusal is a kProtocol error
// naming the message type.
#pragma once

#include <string_view>

#include <msgpack.hpp>

namespace flashq::protocol {

// The tree refers to `bytes` (strings are not copied): keep `bytes` alive as long as the handle.
// `message` names the message type for errors ("SUBMIT").
msgpack::object_handle unpack_body(std::string_view bytes, std::string_view message);

// Checks that `bytes` is exactly one complete msgpack value, nested at most kMaxDepth levels and
// made of at most kMaxBodyValues values; `what` names it in the error ("SUBMIT body").
void check_msgpack_value(std::string_view bytes, std::string_view what);

}  // namespace flashq::protocol
