// What the gateway knows of one model its brokers' workers serve (from MODELS_REPLY): enough to
// answer /v1/models, to check a request against the context length, and to read the model's
// output (its tool-call and reasoning formats, as its workers' chat template writes them).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "gateway/output/output_parser_factory.h"

namespace flashq::gateway {

struct ServedModel {
  std::string name;
  std::int64_t max_model_len = 0;  // tokens of prompt and completion together; 0: not known
  OutputFormat output_format;
  // The template's generation prompt opens <think> (thinking-only checkpoints): the output
  // starts inside the reasoning unless the request turns thinking off.
  bool reasoning_opens_in_prompt = false;
  bool operator==(const ServedModel&) const = default;
};

// By name. The gateway's current view; a request naming a model not in it is a 404.
using ModelDirectory = std::map<std::string, ServedModel>;

}  // namespace flashq::gateway
