// The text of one job attempt as the worker streams it. The worker, not the engine, owns the
// streamed text so that a continuation carries on exactly where the earlier attempts stopped:
// its detokenizer is seeded with the resume tokens (a character split across the boundary comes
// out whole), and text the earlier attempt held back (the bytes after `resume_text_bytes`: an
// incomplete character or a possible stop string) goes through the stop matcher again, so a stop
// string that spans the boundary still ends the job. For a first attempt this gives exactly the
// engine's own text and stops. An earlier attempt that ended (its last step released the
// detokenizer's tail, an incomplete character as U+FFFD) but died before its final result
// streamed more than its tokens decode to: those bytes are not sent again.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "worker/engine/stop_matcher.h"
#include "worker/tokenizer/incremental_decoder.h"
#include "worker/tokenizer/tokenizer.h"

namespace flashq {

class JobText {
 public:
  JobText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, std::span<const int32_t> resume_tokens,
          int64_t resume_text_bytes);

  struct Step {
    size_t tokens_kept = 0;  // ids of the step that belong to the output (all, unless stopped)
    std::string text;        // new text safe to stream
    bool stopped = false;    // a stop string ended the output at tokens_kept
  };

  // The ids one engine step produced, in order; stops at the first stop string.
  Step push(std::span<const int32_t> ids);
  // The job ended (not by a stop string): releases every held-back byte. Returns the text and
  // whether that tail completed a stop string after all.
  Step finish();

 private:
  const Tokenizer& tokenizer_;
  IncrementalDecoder detokenizer_;
  StopMatcher stops_;
  // Drops the bytes of `piece` that the earlier attempt streamed already.
  std::string unstreamed(std::string piece);

  std::string carried_;  // held back by the earlier attempt: sent with the first step
  size_t already_streamed_ = 0;  // streamed beyond the resume tokens' text: the earlier tail
  bool stopped_ = false;
};

}  // namespace flashq
