#include "shared/protocol/token_logprobs.h"

#include <algorithm>

#include "shared/protocol/field_reader.h"
#include "shared/protocol/limits.h"
#include "shared/protocol/map_writer.h"
#include "shared/protocol/strict_unpack.h"

namespace flashq::protocol {
namespace {

// Log-softmax in float may come out a rounding step above zero for a token of probability 1.
constexpr double kLogprobRounding = 1e-3;

std::string encode_entry(const LogprobEntry& entry, std::span<const LogprobEntry> top, bool with_top) {
  MapWriter out;
  out.integer("token", entry.token).number("logprob", entry.logprob).binary("bytes", entry.bytes);
  if (with_top) {
    std::vector<std::string> maps;
    maps.reserve(top.size());
    for (const LogprobEntry& candidate : top) maps.push_back(encode_entry(candidate, {}, false));
    out.maps("top", maps);
  }
  return out.finish();
}

LogprobEntry read_entry(const FieldReader& fields) {
  LogprobEntry entry;
  entry.token = static_cast<std::int32_t>(fields.integer("token", 0, kMaxTokenId));
  entry.logprob = fields.number("logprob");
  if (entry.logprob > kLogprobRounding) fields.fail("logprob", "must be <= 0, got " + std::to_string(entry.logprob));
  entry.logprob = std::min(entry.logprob, 0.0);
  entry.bytes = read_binary(fields.require("bytes"), fields.field_path("bytes"), {0, kMaxTokenBytes});
  return entry;
}

}  // namespace

std::string encode_output_logprobs(std::span<const OutputLogprobs> logprobs) {
  std::string out;
  msgpack::sbuffer header;
  msgpack::packer<msgpack::sbuffer>(header).pack_array(static_cast<std::uint32_t>(logprobs.size()));
  out.assign(header.data(), header.size());
  for (const OutputLogprobs& token : logprobs) out += encode_entry(token.chosen, token.top, true);
  return out;
}

namespace {

std::vector<OutputLogprobs> read_logprobs_array(const msgpack::object& value, const FieldPath& at,
                                                std::size_t max_tokens) {
  const std::span<const msgpack::object> elements = read_array(value, at, max_tokens);
  std::vector<OutputLogprobs> out;
  out.reserve(elements.size());
  for (std::size_t i = 0; i < elements.size(); ++i) {
    const FieldReader fields(elements[i], at.element(i));
    OutputLogprobs token{.chosen = read_entry(fields), .top = {}};
    const FieldPath top_at = fields.field_path("top");
    const auto top = read_array(fields.require("top"), top_at, static_cast<std::size_t>(kMaxTopLogprobs));
    for (std::size_t j = 0; j < top.size(); ++j) token.top.push_back(read_entry(FieldReader(top[j], top_at.element(j))));
    out.push_back(std::move(token));
  }
  return out;
}

}  // namespace

std::vector<OutputLogprobs> read_output_logprobs(const FieldReader& fields, std::string_view key,
                                                 std::size_t max_tokens) {
  const msgpack::object* value = fields.find(key);
  if (value == nullptr) return {};
  return read_logprobs_array(*value, fields.field_path(key), max_tokens);
}

std::vector<OutputLogprobs> read_logprobs_for(const FieldReader& fields, std::size_t token_count) {
  std::vector<OutputLogprobs> out = read_output_logprobs(fields, "logprobs", kMaxOutputTokens);
  if (!out.empty() && out.size() != token_count) {
    fields.fail("logprobs", "must hold one entry per token id (" + std::to_string(token_count) + "), got " +
                                std::to_string(out.size()));
  }
  return out;
}

std::string encode_stored_logprobs(std::span<const OutputLogprobs> logprobs) {
  return MapWriter().raw("logprobs", encode_output_logprobs(logprobs)).finish();
}

std::vector<OutputLogprobs> decode_stored_logprobs(std::string_view bytes, std::string_view what) {
  const msgpack::object_handle handle = unpack_body(bytes, what);
  const FieldReader fields(handle.get(), FieldPath{what, ""});
  if (!fields.has("logprobs")) fields.fail("logprobs", "is missing");
  return read_output_logprobs(fields, "logprobs", kMaxOutputTokens);
}

}  // namespace flashq::protocol
