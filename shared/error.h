// Typed errors. Inside a process every failure is a flashq::Error with a code; at the
// boundaries (CLI exit status, wire ERROR messages) the code becomes a typed error.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace flashq {

enum class ErrorCode {
  kInvalidArgument,  // a bad flag, option or request field
  kBadConfig,        // config.json, generation_config.json or a flashq config file
  kBadCheckpoint,    // safetensors files: header, offsets, dtypes, shapes, missing tensors
  kBadTokenizer,     // tokenizer.json or a SentencePiece model
  kUnsupported,      // something real that we do not implement (named in the message)
  kNotFound,         // a file, tensor, job or model that does not exist
  kIo,               // the operating system said no
  kProtocol,         // a message that breaks the wire protocol (docs/protocol.md)
  kInternal,         // a bug: an invariant of ours did not hold
};

// Stable lower_snake name of a code, as it appears on the wire and in logs.
std::string_view error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}

  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Throws kInternal when an invariant of ours does not hold; `what` names the invariant.
inline void check_invariant(bool ok, const char* what) {
  if (!ok) throw Error(ErrorCode::kInternal, std::string("internal invariant failed: ") + what);
}

}  // namespace flashq
