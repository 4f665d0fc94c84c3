// The parser of a model with no tool-call or reasoning format (or a request that asks for none,
// tool_choice "none"): every byte is content, sent as it comes.
#pragma once

#include "gateway/output/output_parser.h"

namespace flashq::gateway {

class PlainOutputParser final : public OutputParser {
 public:
  OutputDeltas feed(std::string_view text) override;
  OutputDeltas finish() override { return {}; }
};

}  // namespace flashq::gateway
