#include "apps/flashq/live_text.h"

#include <sys/ioctl.h>
#include <unistd.h>

namespace flashq {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Display columns of UTF-8 text (every character one column: code is mostly ASCII).
size_t columns_of(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

LiveText::LiveText(std::FILE* out) : out_(out), terminal_(::isatty(::fileno(out)) == 1) {
  winsize size{};
  if (terminal_ && ::ioctl(::fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) columns_ = size.ws_col;
}

void LiveText::add(const protocol::Event& event) {
  if (!event.token_ids.empty()) {
    if (tokens_ == 0) first_token_at_ = std::chrono::steady_clock::now();
    tokens_ += static_cast<int64_t>(event.token_ids.size());
    ++token_events_;
  }
  if (!terminal_) {
    std::fwrite(event.text.data(), 1, event.text.size(), out_);
    std::fflush(out_);
    return;
  }
  // Complete lines are written for good; the open line is redrawn with the figures after it.
  std::string text = event.text;
  for (size_t newline; (newline = text.find('\n')) != std::string::npos; text.erase(0, newline + 1)) {
    line_ += text.substr(0, newline);
    std::fprintf(out_, "\r\033[K%s\n", line_.c_str());
    line_.clear();
  }
  line_ += text;
  draw_status();
}

void LiveText::draw_status() {
  char status[96] = "";
  const double elapsed = tokens_ > 1 ? seconds_since(first_token_at_) : 0;
  if (elapsed > 0 && token_events_ > 1) {
    // The first event's token came with the prefill: rates count the ones after it.
    std::snprintf(status, sizeof status, "   \033[2m[%lld tok, %.0f tok/s, tau %.2f]\033[0m",
                  static_cast<long long>(tokens_), static_cast<double>(tokens_ - 1) / elapsed,
                  static_cast<double>(tokens_ - 1) / static_cast<double>(token_events_ - 1));
  }
  // A line longer than the terminal wraps, and \r would no longer reach its start: no figures then.
  const bool fits = columns_of(line_) + 40 < static_cast<size_t>(columns_);
  std::fprintf(out_, "\r\033[K%s%s", line_.c_str(), fits ? status : "");
  std::fflush(out_);
}

void LiveText::finish(const protocol::FinalResult& result) {
  if (terminal_) std::fprintf(out_, "\r\033[K%s", line_.c_str());
  const int64_t tokens = result.usage.completion_tokens;
  const double decode_s = static_cast<double>(result.timings.total_ms - result.timings.ttft_ms) / 1000.0;
  std::fprintf(out_, "\n");
  std::fflush(out_);  // the text before the summary, when both go to one terminal or file
  std::fprintf(stderr, "%lld tokens in %.2f s (first after %lld ms): %.1f tok/s decoding, tau %.2f\n",
               static_cast<long long>(tokens), static_cast<double>(result.timings.total_ms) / 1000.0,
               static_cast<long long>(result.timings.ttft_ms),
               decode_s > 0 && tokens > 1 ? static_cast<double>(tokens - 1) / decode_s : 0.0, result.spec_stats.tau);
}

}  // namespace flashq
