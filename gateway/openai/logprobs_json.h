// Output tokens' log-probabilities (the events' `logprobs`) in OpenAI's JSON forms (docs/
// gateway.md, "Log-probabilities"): chat completions' and the Responses API's list of
// {token, logprob, bytes, top_logprobs}, and completions' legacy parallel arrays.
//
// A token's `token` is its text; a token whose bytes are not whole UTF-8 (part of a character
// that spans tokens) is written "bytes:\xe2\x80" with each byte escaped, as OpenAI writes it.
// `bytes` are always the token's exact bytes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "shared/protocol/token_logprobs.h"

namespace flashq::gateway {

std::string logprob_token_text(const std::string& bytes);

// Chat completions' `logprobs.content` and Responses' output_text `logprobs`: one entry per token,
// each with `top` top_logprobs (the request's top_logprobs; the job asked for that many).
nlohmann::ordered_json token_logprobs_json(std::span<const protocol::OutputLogprobs> logprobs);

// Completions' `logprobs` object: {tokens, token_logprobs, top_logprobs, text_offset}. Offsets
// count UTF-8 bytes of the choice's text from `text_offset`.
nlohmann::ordered_json completion_logprobs_json(std::span<const protocol::OutputLogprobs> logprobs,
                                                std::int64_t text_offset);

}  // namespace flashq::gateway
