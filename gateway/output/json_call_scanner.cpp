// The tool-call object's grammar, one byte at a time.
#include "gateway/output/json_call_scanner.h"

#include <nlohmann/json.hpp>

namespace flashq::gateway {
namespace {

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

void JsonCallScanner::reset() { *this = JsonCallScanner(); }

JsonCallScanner::Step JsonCallScanner::fail() {
  state_ = State::kFailed;
  return Step::kMismatch;
}

bool JsonCallScanner::read_string_byte(char c, std::size_t max_bytes) {
  if (escaped_) {
    escaped_ = false;
  } else if (c == '\\') {
    escaped_ = true;
  } else if (c == '"') {
    return true;
  } else if (static_cast<unsigned char>(c) < 0x20) {
    failed_string_ = true;  // JSON strings hold no raw control characters
  }
  string_ += c;
  if (string_.size() > max_bytes) failed_string_ = true;
  return false;
}

JsonCallScanner::Step JsonCallScanner::push(char c) {
  // Whitespace between tokens belongs to the header wherever a token is awaited.
  auto awaiting = [&](char expected, State next) {
    if (is_json_space(c)) return Step::kHeader;
    if (c != expected) return fail();
    state_ = next;
    string_.clear();
    escaped_ = false;
    return Step::kHeader;
  };
  switch (state_) {
    case State::kBeforeObject: return awaiting('{', State::kBeforeNameKey);
    case State::kBeforeNameKey: return awaiting('"', State::kNameKey);
    case State::kAfterNameKey: return awaiting(':', State::kBeforeName);
    case State::kBeforeName: return awaiting('"', State::kName);
    case State::kAfterName: return awaiting(',', State::kBeforeArgumentsKey);
    case State::kBeforeArgumentsKey: return awaiting('"', State::kArgumentsKey);
    case State::kAfterArgumentsKey: return awaiting(':', State::kBeforeArguments);
    case State::kNameKey:
    case State::kName:
    case State::kArgumentsKey: return push_header_string(c);
    case State::kBeforeArguments: return push_arguments_start(c);
    case State::kArguments: return push_argument(c);
    case State::kArgumentsString: return push_string_argument(c);
    case State::kAfterArguments:
      if (is_json_space(c)) return Step::kHeader;
      if (c != '}') return fail();
      state_ = State::kDone;
      return Step::kCallEnd;
    case State::kDone:
    case State::kFailed:
      return fail();
  }
  return fail();
}

JsonCallScanner::Step JsonCallScanner::push_header_string(char c) {
  if (!read_string_byte(c)) return failed_string_ ? fail() : Step::kHeader;
  if (state_ == State::kNameKey) {
    if (string_ != "name") return fail();
    state_ = State::kAfterNameKey;
  } else if (state_ == State::kName) {
    // The raw bytes may hold escapes: the name is what the JSON string means.
    nlohmann::json decoded = nlohmann::json::parse("\"" + string_ + "\"", nullptr, false);
    if (!decoded.is_string() || decoded.get_ref<const std::string&>().empty()) return fail();
    name_ = decoded.get<std::string>();
    state_ = State::kAfterName;
  } else {
    if (string_ != "arguments" && string_ != "parameters") return fail();
    state_ = State::kAfterArgumentsKey;
  }
  return Step::kHeader;
}

JsonCallScanner::Step JsonCallScanner::push_arguments_start(char c) {
  if (is_json_space(c)) return Step::kHeader;
  if (c == '"') {
    state_ = State::kArgumentsString;
    string_.clear();
    escaped_ = false;
    return Step::kHeader;
  }
  // The arguments are an object, as OpenAI's function.arguments is the JSON of one.
  if (c != '{') return fail();
  state_ = State::kArguments;
  arguments_ = "{";
  open_brackets_.assign(1, '{');
  return Step::kArgumentsBegin;
}

JsonCallScanner::Step JsonCallScanner::push_argument(char c) {
  arguments_ += c;
  if (in_arguments_string_) {
    if (arguments_escaped_) {
      arguments_escaped_ = false;
    } else if (c == '\\') {
      arguments_escaped_ = true;
    } else if (c == '"') {
      in_arguments_string_ = false;
    }
    return Step::kArgument;
  }
  if (c == '"') {
    in_arguments_string_ = true;
  } else if (c == '{' || c == '[') {
    open_brackets_.push_back(c);
  } else if (c == '}' || c == ']') {
    if (open_brackets_.back() != (c == '}' ? '{' : '[')) return fail();
    open_brackets_.pop_back();
    if (open_brackets_.empty()) {
      arguments_valid_ = nlohmann::json::accept(arguments_);
      state_ = State::kAfterArguments;
      return Step::kArgumentsEnd;
    }
  }
  return Step::kArgument;
}

JsonCallScanner::Step JsonCallScanner::push_string_argument(char c) {
  if (!read_string_byte(c, std::string::npos)) return failed_string_ ? fail() : Step::kHeader;
  const nlohmann::json decoded = nlohmann::json::parse("\"" + string_ + "\"", nullptr, false);
  if (!decoded.is_string()) return fail();
  arguments_ = decoded.get<std::string>();
  arguments_valid_ = nlohmann::json::parse(arguments_, nullptr, false).is_object();
  state_ = State::kAfterArguments;
  return Step::kStringArgumentsEnd;
}

}  // namespace flashq::gateway
