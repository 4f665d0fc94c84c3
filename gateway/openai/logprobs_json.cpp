#include "gateway/openai/logprobs_json.h"

namespace flashq::gateway {
namespace {

// nlohmann's strict dump refuses invalid UTF-8 (type_error 316); tokens rarely are.
bool is_utf8(const std::string& bytes) {
  try {
    (void)nlohmann::json(bytes).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

nlohmann::ordered_json byte_list(const std::string& bytes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (unsigned char byte : bytes) out.push_back(byte);
  return out;
}

nlohmann::ordered_json entry_json(const protocol::LogprobEntry& entry) {
  return {{"token", logprob_token_text(entry.bytes)}, {"logprob", entry.logprob}, {"bytes", byte_list(entry.bytes)}};
}

}  // namespace

std::string logprob_token_text(const std::string& bytes) {
  if (is_utf8(bytes)) return bytes;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "bytes:";
  for (unsigned char byte : bytes) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xF];
  }
  return out;
}

nlohmann::ordered_json token_logprobs_json(std::span<const protocol::OutputLogprobs> logprobs) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const protocol::OutputLogprobs& token : logprobs) {
    nlohmann::ordered_json entry = entry_json(token.chosen);
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const protocol::LogprobEntry& candidate : token.top) top.push_back(entry_json(candidate));
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

nlohmann::ordered_json completion_logprobs_json(std::span<const protocol::OutputLogprobs> logprobs,
                                                std::int64_t text_offset) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::array(), token_logprobs = nlohmann::ordered_json::array(),
                         top_logprobs = nlohmann::ordered_json::array(), offsets = nlohmann::ordered_json::array();
  for (const protocol::OutputLogprobs& token : logprobs) {
    tokens.push_back(logprob_token_text(token.chosen.bytes));
    token_logprobs.push_back(token.chosen.logprob);
    nlohmann::ordered_json top = nlohmann::ordered_json::object();
    for (const protocol::LogprobEntry& candidate : token.top) {
      top.emplace(logprob_token_text(candidate.bytes), candidate.logprob);  // the first of equal texts kept
    }
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += static_cast<std::int64_t>(token.chosen.bytes.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

}  // namespace flashq::gateway
