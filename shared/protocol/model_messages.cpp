#include "shared/protocol/model_messages.h"

#include <limits>
#include <set>

#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/map_writer.h"

namespace flashq::protocol {
namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

std::string encode_model_info(const ModelInfo& model) {
  return MapWriter()
      .string("name", model.name)
      .integer("max_model_len", model.max_model_len)
      .string("tool_call_format", tool_call_format_name(model.tool_call_format))
      .string("reasoning_format", reasoning_format_name(model.reasoning_format))
      .integer("workers", model.workers)
      .integer("slots", model.slots)
      .finish();
}

ModelInfo read_model_info(const FieldReader& fields) {
  return ModelInfo{fields.string("name", {1, kMaxNameBytes}), fields.integer("max_model_len", 0, kInt32Max),
                   read_tool_call_format(fields, "tool_call_format"),
                   read_reasoning_format(fields, "reasoning_format"), fields.integer("workers", 1, kInt32Max),
                   fields.integer("slots", 1, kInt64Max)};
}

}  // namespace

std::string encode_body(const Models&) { return MapWriter().finish(); }

std::string encode_body(const ModelsReply& message) {
  std::vector<std::string> maps;
  maps.reserve(message.models.size());
  for (const ModelInfo& model : message.models) maps.push_back(encode_model_info(model));
  return MapWriter().maps("models", maps).finish();
}

template <>
Models decode_body<Models>(std::string_view body) {
  return read_body<Models>(body, [](const FieldReader&) { return Models{}; });
}

template <>
ModelsReply decode_body<ModelsReply>(std::string_view body) {
  return read_body<ModelsReply>(body, [](const FieldReader& fields) {
    const FieldPath at = fields.field_path("models");
    const auto elements = read_array(fields.require("models"), at, kMaxModels);
    ModelsReply reply;
    reply.models.reserve(elements.size());
    std::set<std::string> names;
    for (std::size_t i = 0; i < elements.size(); ++i) {
      const FieldReader model(elements[i], at.element(i));
      reply.models.push_back(read_model_info(model));
      // Each model once: a reader keys its view by name.
      if (!names.insert(reply.models.back().name).second) model.fail("name", "repeats an earlier model's name");
    }
    return reply;
  });
}

}  // namespace flashq::protocol
