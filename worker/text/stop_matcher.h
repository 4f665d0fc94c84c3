// Stop strings over streamed text. Text that might be the beginning of a stop string is held
// back until it is known either way, so a stop string never reaches a client, not even in part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashq {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was found; `text` ends right before it
  };

  // Appends newly decoded text.
  Result push(std::string_view text);
  // End of generation: releases the held-back text.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // received but not yet emitted
};

}  // namespace flashq
