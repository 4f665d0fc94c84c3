// Text a parser holds back while it cannot yet tell what it is: a run of layout whitespace, then
// the beginning of a tag that may be coming (`\n\n<tool_ca`). The run's length is kept as bytes
// arrive, so a model that writes thousands of blank lines costs no more per byte than one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flashq::gateway {

// Layout whitespace between the parts of a model's output (what templates put around tags).
inline bool is_layout_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// `text` without its leading layout whitespace.
inline std::string_view after_layout_space(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && is_layout_space(text[i])) ++i;
  return text.substr(i);
}

class HeldText {
 public:
  // `spaces`: the bytes that count as layout (a string literal: it is not copied).
  explicit HeldText(std::string_view spaces = " \t\n\r") : spaces_(spaces) {}

  void push(char c) {
    text_ += c;
    if (leading_ + 1 == text_.size() && spaces_.find(c) != std::string_view::npos) ++leading_;
  }
  void pop_back() {
    if (leading_ == text_.size()) --leading_;
    text_.pop_back();
  }
  void clear() {
    text_.clear();
    leading_ = 0;
  }
  std::string take() {
    leading_ = 0;
    std::string out;
    out.swap(text_);
    return out;
  }

  std::string_view text() const { return text_; }
  // What follows the leading whitespace.
  std::string_view tail() const { return std::string_view(text_).substr(leading_); }
  bool empty() const { return text_.empty(); }

 private:
  std::string_view spaces_;
  std::string text_;
  std::size_t leading_ = 0;  // bytes of whitespace at the front of text_
};

}  // namespace flashq::gateway
