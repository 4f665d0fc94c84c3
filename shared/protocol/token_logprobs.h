// Log-probabilities of output tokens as TOKENS and EVENT carry them (docs/protocol.md,
// "Log-probabilities"): per output token its id, log-probability and bytes, and the most likely
// tokens of the row it was chosen from. The bytes travel because OpenAI's answers show each
// token's text and bytes, and only the worker has the tokenizer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flashq::protocol {

class FieldReader;

struct LogprobEntry {
  std::int32_t token = 0;
  double logprob = 0;  // <= 0, finite
  std::string bytes;   // the token's bytes as the tokenizer decodes it alone; may be part of a UTF-8 character
  bool operator==(const LogprobEntry&) const = default;
};

struct OutputLogprobs {
  LogprobEntry chosen;
  std::vector<LogprobEntry> top;  // most likely first, at most kMaxTopLogprobs
  bool operator==(const OutputLogprobs&) const = default;
};

// As the `logprobs` field's value: an array of maps {token, logprob, bytes (bin), top: [...]}.
std::string encode_output_logprobs(std::span<const OutputLogprobs> logprobs);
// Reads and checks that array in field `key` (absent: empty): at most `max_tokens` entries, ids
// and bytes in range, log-probabilities finite and <= 0 (a little above 0 is rounding, kept as 0).
std::vector<OutputLogprobs> read_output_logprobs(const FieldReader& fields, std::string_view key,
                                                 std::size_t max_tokens);
// The `logprobs` field of a message holding `token_count` token ids: absent, or one per id.
std::vector<OutputLogprobs> read_logprobs_for(const FieldReader& fields, std::size_t token_count);
// The same in a map of its own ({"logprobs": [...]}), as a store keeps it apart from a message;
// decoding throws kProtocol naming `what` for anything else.
std::string encode_stored_logprobs(std::span<const OutputLogprobs> logprobs);
std::vector<OutputLogprobs> decode_stored_logprobs(std::string_view bytes, std::string_view what);

}  // namespace flashq::protocol
