// The text of a sequence's output as it streams: the one place where output ids become text and
// stop strings are matched. Whole UTF-8 characters only (a character split over two tokens waits
// for the second); text that might begin a stop string is held back until known either way, so a
// stop string never reaches a client, not even in part, and one that spans two steps still stops.
//
// A continuation (a job re-assigned after its worker died) carries on exactly where the earlier
// attempts stopped: the detokenizer is seeded with the resume tokens (a character split across
// the boundary comes out whole), and text the earlier attempt held back (the bytes after
// `resume_text_bytes`: an incomplete character or a possible stop string) goes through the stop
// matcher again with the first step, so a stop string that spans the boundary still ends the
// output. An earlier attempt that ended (its last step released the detokenizer's tail, an
// incomplete character as U+FFFD) but died before its final result streamed more than its tokens
// decode to: those bytes are not sent again. Without resume tokens the text is simply the
// output's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "worker/text/stop_matcher.h"
#include "worker/text/incremental_decoder.h"
#include "worker/text/tokenizer.h"

namespace flashq {

class TextStream {
 public:
  // kInvalidArgument for an empty stop string.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings,
             std::span<const int32_t> resume_tokens = {}, int64_t resume_text_bytes = 0);

  struct Step {
    size_t tokens_kept = 0;  // ids of the step that belong to the output (all, unless stopped)
    std::string text;        // new text safe to stream
    bool stopped = false;    // a stop string ended the output at tokens_kept
  };

  // Output ids, in order; stops at the first stop string.
  Step push(std::span<const int32_t> ids);
  // The output ended (not by a stop string): releases every held-back byte. Returns the text and
  // whether that tail completed a stop string after all.
  Step finish();

 private:
  // Drops the bytes of `piece` that the earlier attempt streamed already.
  std::string unstreamed(std::string piece);

  const Tokenizer& tokenizer_;
  IncrementalDecoder detokenizer_;
  StopMatcher stops_;
  std::string carried_;          // held back by the earlier attempt: sent with the first step
  size_t already_streamed_ = 0;  // streamed beyond the resume tokens' text: the earlier tail
  bool stopped_ = false;
};

}  // namespace flashq
