// JSON-like values inside a message (a job's `tools`, `chat_template_kwargs`, a tool call's
// `arguments`): a msgpack value made only of what JSON can say (nil, booleans, integers, finite
// floats, strings, arrays, and maps with string keys), held as compact JSON text so that the
// protocol library need not expose a JSON type. Map keys keep the order they came in: templates
// render tool definitions key by key, and a model was trained on its producer's order.
#pragma once

#include <msgpack.hpp>
#include <string>
#include <string_view>

#include "shared/protocol/field_reader.h"

namespace flashq::protocol {

// The value as compact JSON text. kProtocol, naming the path of the offending element, for a
// binary, an extension, a map key that is not a string, a duplicate key or a float that is not
// finite. Nesting is bounded by the body's own limit (kMaxDepth).
std::string read_json_text(const msgpack::object& value, const FieldPath& at);

// JSON text as one msgpack value (the shortest forms). kProtocol naming `what` when `json_text`
// is not valid JSON.
std::string pack_json_text(std::string_view json_text, std::string_view what);

}  // namespace flashq::protocol
