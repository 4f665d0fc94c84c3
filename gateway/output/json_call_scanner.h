// Recognises one tool call written as a JSON object, byte by byte:
//   {"name": "<function>", "arguments": {...}}      ("parameters" in place of "arguments")
// with any JSON whitespace between the tokens. This is the object both Qwen3 / Hermes (inside
// <tool_call>) and Llama 3.x (the whole message) write; "name" must come first, as every one of
// these templates renders it. The scanner is fed the bytes of the model's text as they arrive and
// says for each whether it belongs to the call's header, to its arguments, ends the arguments or
// the call, or cannot continue a call. The arguments are followed structurally (strings, escapes,
// nesting) and checked as JSON when they close, so an argument byte is known as such the moment it
// arrives. Arguments written as a JSON string that holds a JSON object (what Llama 3.1's template
// renders for a call whose OpenAI arguments were given as a string) are read whole and decoded.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace flashq::gateway {

class JsonCallScanner {
 public:
  enum class Step {
    kHeader,          // part of the call outside its arguments
    kArgumentsBegin,  // name() is read; this byte ('{') opens the arguments
    kArgument,        // inside the arguments
    kArgumentsEnd,    // closes the arguments; arguments_valid() says whether they are JSON
    kStringArgumentsEnd,  // closes arguments written as a string; arguments() is the object's
                          // JSON it held, arguments_valid() says whether it is one
    kCallEnd,         // the call's closing '}'
    kMismatch,        // cannot continue a call; the scanner must be reset before reuse
  };

  // A function name longer than this is not a name: the scanner gives up rather than hold
  // unbounded text back from the stream.
  static constexpr std::size_t kMaxNameBytes = 256;

  Step push(char c);
  void reset();

  const std::string& name() const { return name_; }
  const std::string& arguments() const { return arguments_; }
  bool arguments_valid() const { return arguments_valid_; }

 private:
  enum class State {
    kBeforeObject, kBeforeNameKey, kNameKey, kAfterNameKey, kBeforeName, kName, kAfterName,
    kBeforeArgumentsKey, kArgumentsKey, kAfterArgumentsKey, kBeforeArguments, kArguments, kArgumentsString,
    kAfterArguments, kDone, kFailed,
  };

  // Reads a JSON string's bytes after its opening quote; true once the closing quote is read.
  // Sets failed_string_ for a raw control character or a string longer than max_bytes.
  bool read_string_byte(char c, std::size_t max_bytes = kMaxNameBytes);
  Step fail();
  // push() by state: the "name" key, the name and the arguments key; the byte that opens the
  // arguments; a byte inside them; a byte of arguments written as a string.
  Step push_header_string(char c);
  Step push_arguments_start(char c);
  Step push_argument(char c);
  Step push_string_argument(char c);

  State state_ = State::kBeforeObject;
  std::string string_;  // raw bytes of the key or name being read, escapes undecoded
  bool escaped_ = false;
  bool failed_string_ = false;
  std::string name_;
  std::string arguments_;
  std::vector<char> open_brackets_;  // inside the arguments: the '{' / '[' not yet closed
  bool in_arguments_string_ = false;
  bool arguments_escaped_ = false;
  bool arguments_valid_ = false;
};

}  // namespace flashq::gateway
