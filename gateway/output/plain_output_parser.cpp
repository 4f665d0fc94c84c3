// Everything is content.
#include "gateway/output/plain_output_parser.h"

namespace flashq::gateway {

OutputDeltas PlainOutputParser::feed(std::string_view text) {
  OutputDeltas out;
  append_text(out, DeltaKind::kContent, text);
  return out;
}

}  // namespace flashq::gateway
