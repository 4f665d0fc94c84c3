// What every fuzz target asserts besides "no sanitizer report": a decoder answers bad input with
// a flashq::Error of its own code, and what it accepts keeps the promises its header makes.
// A broken promise aborts, so libFuzzer records the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "shared/error.h"

namespace flashq::fuzz {

inline void require(bool promise_kept, const char* promise) {
  if (promise_kept) return;
  std::fprintf(stderr, "fuzz: promise broken: %s\n", promise);
  std::abort();
}

// A refusal must carry the decoder's own code (kInternal, say, would be a bug of ours).
inline void require_code(const Error& error, ErrorCode expected) {
  if (error.code() == expected) return;
  std::fprintf(stderr, "fuzz: expected error code %s, got %s: %s\n", error_code_name(expected).data(),
               error_code_name(error.code()).data(), error.what());
  std::abort();
}

}  // namespace flashq::fuzz
