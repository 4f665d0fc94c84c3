// The protocol's size limits (docs/protocol.md, "Limits"). Decoding refuses anything beyond them,
// so a hostile peer can make us allocate at most a small multiple of the body it sent.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashq::protocol {

inline constexpr std::size_t kMaxBodyBytes = 16u << 20;  // frame 2
// ZMQ_MAXMSGSIZE of every socket: no frame is larger than a body, and a peer that sends one is
// disconnected by ZeroMQ before its bytes are buffered. A subscription is 1 byte and a topic.
inline constexpr std::int64_t kMaxFrameBytes = static_cast<std::int64_t>(kMaxBodyBytes);
inline constexpr std::int64_t kMaxSubscriptionBytes = 1024;
// Nesting of maps and arrays, the body map itself being level 1 (so metadata inside a job inside
// a body may nest 29 more levels).
inline constexpr std::size_t kMaxDepth = 32;
// msgpack values in a body (each map key and each value counts): the decoded tree costs 16 bytes
// a value, so at most 32 MiB. A maximal ASSIGN (262,144 prompt and 1,000,000 resume tokens)
// needs about 1.3 million.
inline constexpr std::size_t kMaxBodyValues = 2u << 20;

inline constexpr std::size_t kMaxIdBytes = 128;          // job ids, worker ids, backend names
inline constexpr std::size_t kMaxNameBytes = 256;        // model names
inline constexpr std::size_t kMaxSessionBytes = 256;     // a job's session
inline constexpr std::size_t kMaxCodeBytes = 128;        // error codes, rejection reasons, roles
inline constexpr std::size_t kMaxMessageBytes = 64u << 10;     // human-readable error text
inline constexpr std::size_t kMaxModels = 4096;           // models in one MODELS_REPLY
// Prompt text, or all the text of a chat (content, reasoning, tool call arguments).
inline constexpr std::size_t kMaxPromptBytes = 1u << 20;
inline constexpr std::size_t kMaxPromptTokens = 262'144;
inline constexpr std::size_t kMaxChatMessages = 4096;
// Chat jobs: tool calls of one message; a tool call's id, a tool_call_id and a message's name;
// the tool definitions and the template options (each counted as its msgpack encoding).
inline constexpr std::size_t kMaxToolCalls = 128;
inline constexpr std::size_t kMaxToolCallIdBytes = 256;
inline constexpr std::size_t kMaxTools = 512;
inline constexpr std::size_t kMaxToolsBytes = 1u << 20;
// A job's structured output (JSON text: a schema, a regex, choices or a grammar).
inline constexpr std::size_t kMaxStructuredOutputBytes = 1u << 20;
inline constexpr std::size_t kMaxTemplateOptions = 64;
inline constexpr std::size_t kMaxTemplateOptionsBytes = 64u << 10;
inline constexpr std::size_t kMaxStopStrings = 16;
inline constexpr std::size_t kMaxStopStringBytes = 1024;
inline constexpr std::size_t kMaxStopTokenIds = 1024;
inline constexpr std::int64_t kMaxMaxTokens = 1'000'000;
inline constexpr std::int64_t kMaxBlockSize = 1024;
inline constexpr std::int64_t kMaxDeadlineMs = 0xFFFF'FFFFll;  // about 49.7 days
// Output carried by one TOKENS or EVENT message, and resume_tokens in ASSIGN: at most a whole
// completion.
inline constexpr std::size_t kMaxOutputTokens = 1'000'000;
inline constexpr std::size_t kMaxOutputTextBytes = 8u << 20;

inline constexpr std::int32_t kMaxTokenId = 0x7FFF'FFFF;
// Log-probabilities (job.logprobs, TOKENS and EVENT `logprobs`): the most likely tokens reported
// per output token, as OpenAI's top_logprobs allows, and the bytes of one token.
inline constexpr std::int64_t kMaxTopLogprobs = 20;
inline constexpr std::size_t kMaxTokenBytes = 1024;

}  // namespace flashq::protocol
