#include "shared/error.h"

namespace flashq {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kBadConfig: return "bad_config";
    case ErrorCode::kBadCheckpoint: return "bad_checkpoint";
    case ErrorCode::kBadTokenizer: return "bad_tokenizer";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kProtocol: return "protocol";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace flashq
