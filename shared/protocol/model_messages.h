// Producer -> broker MODELS and its answer MODELS_REPLY (docs/protocol.md, "Models"): what the
// broker's connected workers serve, model by model, with what a front end needs to list a model
// and read its output (its context length and output formats, from each worker's READY).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/protocol/body.h"
#include "shared/protocol/message_type.h"
#include "shared/protocol/output_format.h"

namespace flashq::protocol {

// Producer -> broker: which models are served now? An empty map. Answered by MODELS_REPLY.
struct Models {
  static constexpr MessageType kType = MessageType::kModels;
  bool operator==(const Models&) const = default;
};

// One model served by at least one connected worker.
struct ModelInfo {
  std::string name;
  // The smallest context length its workers reported (tokens of prompt and completion
  // together); 0 when one of them did not report it.
  std::int64_t max_model_len = 0;
  // As the most recently connected of its workers reported them.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  std::int64_t workers = 1;  // connected workers serving it
  std::int64_t slots = 1;    // their slots, summed
  bool operator==(const ModelInfo&) const = default;
};

// Broker -> producer: every model a connected worker serves, sorted by name, each once. Empty
// when no worker is connected.
struct ModelsReply {
  static constexpr MessageType kType = MessageType::kModelsReply;
  std::vector<ModelInfo> models;
  bool operator==(const ModelsReply&) const = default;
};

std::string encode_body(const Models& message);
std::string encode_body(const ModelsReply& message);

template <> Models decode_body<Models>(std::string_view body);
template <> ModelsReply decode_body<ModelsReply>(std::string_view body);

}  // namespace flashq::protocol
