#include "worker/engine/generation_request.h"

namespace flashq {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "?";
}

}  // namespace flashq
