#include "worker/text/stop_matcher.h"

#include <algorithm>

#include "shared/error.h"

namespace flashq {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  for (const std::string& stop : stops_) {
    if (stop.empty()) throw Error(ErrorCode::kInvalidArgument, "stop strings must not be empty");
  }
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  pending_ += text;
  Result result;
  // The earliest complete stop string wins.
  size_t first_stop = std::string::npos;
  for (const std::string& stop : stops_) first_stop = std::min(first_stop, pending_.find(stop));
  if (first_stop != std::string::npos) {
    result.text = pending_.substr(0, first_stop);
    result.stopped = true;
    pending_.clear();
    return result;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  result.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return result;
}

std::string StopMatcher::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace flashq
