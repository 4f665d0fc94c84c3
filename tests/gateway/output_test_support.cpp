// Feeding texts in pieces and checking the streams.
#include "tests/gateway/output_test_support.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace flashq::gateway::testing {

OutputDeltas feed_pieces(OutputParser& parser, const std::vector<std::string_view>& pieces) {
  OutputDeltas out;
  for (std::string_view piece : pieces) {
    const OutputDeltas more = parser.feed(piece);
    out.insert(out.end(), more.begin(), more.end());
  }
  const OutputDeltas last = parser.finish();
  out.insert(out.end(), last.begin(), last.end());
  return out;
}

OutputDeltas feed_whole(const ParserMaker& make, std::string_view text) {
  auto parser = make();
  return feed_pieces(*parser, {text});
}

AssistantMessage fold(const OutputDeltas& deltas) {
  AssistantMessage message;
  message.apply(deltas);
  return message;
}

void expect_openai_stream_order(const OutputDeltas& deltas) {
  int started = 0;
  std::set<int> ended;
  for (const OutputDelta& d : deltas) {
    switch (d.kind) {
      case DeltaKind::kContent:
      case DeltaKind::kReasoning:
        EXPECT_FALSE(d.text.empty()) << delta_kind_name(d.kind) << " delta without text";
        EXPECT_EQ(d.index, -1);
        break;
      case DeltaKind::kToolCallStart:
        EXPECT_EQ(d.index, started) << "calls start in index order";
        EXPECT_FALSE(d.id.empty()) << "the first delta of a call carries its id";
        EXPECT_FALSE(d.name.empty()) << "the first delta of a call carries its name";
        EXPECT_TRUE(d.text.empty());
        ++started;
        break;
      case DeltaKind::kToolCallArguments:
        EXPECT_LT(d.index, started) << "arguments after the call's start";
        EXPECT_FALSE(ended.contains(d.index)) << "arguments after the call's end";
        EXPECT_FALSE(d.text.empty());
        EXPECT_TRUE(d.id.empty() && d.name.empty()) << "later deltas carry arguments only";
        break;
      case DeltaKind::kToolCallEnd:
        EXPECT_LT(d.index, started);
        EXPECT_TRUE(ended.insert(d.index).second) << "one end per call";
        break;
    }
  }
}

AssistantMessage parse_every_split(const ParserMaker& make, std::string_view text) {
  const OutputDeltas whole = feed_whole(make, text);
  expect_openai_stream_order(whole);
  const AssistantMessage expected = fold(whole);

  auto check = [&](const std::vector<std::string_view>& pieces, const std::string& how) {
    auto parser = make();
    const OutputDeltas deltas = feed_pieces(*parser, pieces);
    expect_openai_stream_order(deltas);
    EXPECT_EQ(fold(deltas), expected) << "fed " << how;
  };

  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  check(bytes, "in 1-byte pieces");
  for (std::size_t split = 0; split <= text.size(); ++split) {
    check({text.substr(0, split), text.substr(split)}, "split at byte " + std::to_string(split));
  }
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 random(seed);
    std::vector<std::string_view> pieces;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(0, 9)(random);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    check(pieces, "in random pieces, seed " + std::to_string(seed));
  }
  return expected;
}

AssistantMessage parse_in_both_modes(const std::function<ParserMaker(ArgumentStreaming)>& make, std::string_view text) {
  const AssistantMessage validated = parse_every_split(make(ArgumentStreaming::kValidated), text);
  const AssistantMessage incremental = parse_every_split(make(ArgumentStreaming::kIncremental), text);
  EXPECT_EQ(validated, incremental);
  return validated;
}

ParsedToolCall complete_call(std::string id, std::string name, std::string arguments) {
  return {std::move(id), std::move(name), std::move(arguments), true};
}

}  // namespace flashq::gateway::testing
