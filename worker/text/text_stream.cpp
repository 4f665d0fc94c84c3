#include "worker/text/text_stream.h"

#include <algorithm>

namespace flashq {
namespace {

// Ids past the tokenizer (padding rows of the embedding) have no text.
bool has_text(const Tokenizer& tokenizer, int32_t id) { return id >= 0 && id < tokenizer.vocab_size(); }

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings,
                       std::span<const int32_t> resume_tokens, int64_t resume_text_bytes)
    : tokenizer_(tokenizer), detokenizer_(tokenizer), stops_(std::move(stop_strings)) {
  std::string resumed;
  for (int32_t id : resume_tokens) {
    if (has_text(tokenizer_, id)) resumed += detokenizer_.push({&id, 1});
  }
  const int64_t streamed = std::max<int64_t>(resume_text_bytes, 0);
  if (streamed <= static_cast<int64_t>(resumed.size())) {
    carried_ = resumed.substr(static_cast<size_t>(streamed));
  } else {
    already_streamed_ = static_cast<size_t>(streamed) - resumed.size();
  }
}

std::string TextStream::unstreamed(std::string piece) {
  const size_t drop = std::min(already_streamed_, piece.size());
  already_streamed_ -= drop;
  return piece.erase(0, drop);
}

TextStream::Step TextStream::push(std::span<const int32_t> ids) {
  Step step;
  if (stopped_) return step;
  if (!carried_.empty()) {
    StopMatcher::Result result = stops_.push(carried_);
    carried_.clear();
    step.text += result.text;
    if (result.stopped) {  // the earlier attempt's held-back text completes a stop string
      stopped_ = step.stopped = true;
      return step;
    }
  }
  for (int32_t id : ids) {
    ++step.tokens_kept;
    const std::string piece = has_text(tokenizer_, id) ? unstreamed(detokenizer_.push({&id, 1})) : std::string();
    StopMatcher::Result result = stops_.push(piece);
    step.text += result.text;
    if (result.stopped) {  // the held-back text is the stop string: dropped
      stopped_ = step.stopped = true;
      return step;
    }
  }
  return step;
}

TextStream::Step TextStream::finish() {
  Step step = push({});
  if (stopped_) return step;
  StopMatcher::Result tail = stops_.push(unstreamed(detokenizer_.flush()));
  step.text += tail.text;
  if (tail.stopped) {
    stopped_ = step.stopped = true;
  } else {
    step.text += stops_.flush();
  }
  return step;
}

}  // namespace flashq
