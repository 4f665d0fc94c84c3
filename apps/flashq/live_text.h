// `flashq submit --live`: the job's text as it streams, with the figures a person watching wants
// next to it: tokens so far, tokens per second, and tau (tokens per event: the worker sends one
// event per engine step, so this is the mean of accepted tokens plus the bonus per target pass).
// On a terminal the figures sit after the line being written and are redrawn as it grows;
// elsewhere (a log, a pipe) the text is written plain. Either way finish() prints a summary line.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "shared/protocol/final_result.h"
#include "shared/protocol/producer_messages.h"

namespace flashq {

class LiveText {
 public:
  // `out` is where the text goes; the figures are drawn only when it is a terminal.
  explicit LiveText(std::FILE* out);

  void add(const protocol::Event& event);
  // Ends the text and prints "N tokens in T s: R tok/s, tau X" (from the final result's figures).
  void finish(const protocol::FinalResult& result);

 private:
  void draw_status();

  std::FILE* out_;
  bool terminal_;
  int columns_ = 80;
  std::chrono::steady_clock::time_point first_token_at_;
  int64_t tokens_ = 0;
  int64_t token_events_ = 0;
  std::string line_;  // the text after the last newline (what the status is drawn after)
};

}  // namespace flashq
