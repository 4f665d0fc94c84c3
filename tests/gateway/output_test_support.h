// What every output-parser test needs: feeding a text whole, byte by byte, at every split point
// and in random pieces, and the check that a delta stream is one OpenAI can send.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/output/output_parser.h"

namespace flashq::gateway::testing {

using ParserMaker = std::function<std::unique_ptr<OutputParser>()>;

// The deltas of the text fed in these pieces, then finish().
OutputDeltas feed_pieces(OutputParser& parser, const std::vector<std::string_view>& pieces);
OutputDeltas feed_whole(const ParserMaker& make, std::string_view text);

AssistantMessage fold(const OutputDeltas& deltas);

// Feeds the text whole, in 1-byte pieces, split once at every point and in random pieces (fixed
// seeds), checks each delta stream with expect_openai_stream_order, and expects every one to fold
// into the same message; returns that message.
AssistantMessage parse_every_split(const ParserMaker& make, std::string_view text);

// Parses the text with parse_every_split in both argument-streaming modes (`make` builds the
// parser for a mode) and expects the same message of each, as for well-formed output; returns it.
AssistantMessage parse_in_both_modes(const std::function<ParserMaker(ArgumentStreaming)>& make, std::string_view text);

// A call the model completed, as the folded message holds it.
ParsedToolCall complete_call(std::string id, std::string name, std::string arguments);

// The stream rules of OpenAI's delta.tool_calls: calls start in index order 0, 1, ...; a call's
// first delta is its start (with id and name), the later ones arguments only, an end last; no
// delta without text where text is its point.
void expect_openai_stream_order(const OutputDeltas& deltas);

}  // namespace flashq::gateway::testing
