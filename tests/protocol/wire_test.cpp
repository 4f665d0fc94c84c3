// Frames (docs/protocol.md, "Frames" and "Types"): tag, type byte and body; the stream's topic.
#include <gtest/gtest.h>

#include "shared/protocol/stream.h"
#include "shared/protocol/wire.h"
#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::expect_protocol_error;

std::vector<std::string_view> views(const std::vector<std::string>& frames) {
  return {frames.begin(), frames.end()};
}

WireMessage from(const std::vector<std::string>& frames) {
  const std::vector<std::string_view> v = views(frames);
  return from_frames(v);
}

const std::string kCancelBody = encode_body(Cancel{"j1"});

TEST(Frames, AreTagTypeByteAndBody) {
  const std::vector<std::string> frames = to_frames(to_wire(Cancel{"j1"}));
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0], "FQ1");
  EXPECT_EQ(frames[1], std::string(1, '\x04'));
  EXPECT_EQ(frames[2], kCancelBody);
}

TEST(Frames, TypeBytesAreTheDocumentedValues) {
  const std::vector<std::pair<MessageType, std::pair<int, std::string_view>>> table = {
      {MessageType::kHeartbeat, {0x01, "HEARTBEAT"}},   {MessageType::kDisconnect, {0x02, "DISCONNECT"}},
      {MessageType::kError, {0x03, "ERROR"}},           {MessageType::kCancel, {0x04, "CANCEL"}},
      {MessageType::kSubmit, {0x10, "SUBMIT"}},         {MessageType::kStatus, {0x11, "STATUS"}},
      {MessageType::kReplay, {0x12, "REPLAY"}},         {MessageType::kModels, {0x13, "MODELS"}},
      {MessageType::kModelsReply, {0x24, "MODELS_REPLY"}},
      {MessageType::kAccepted, {0x20, "ACCEPTED"}},     {MessageType::kRejected, {0x21, "REJECTED"}},
      {MessageType::kStatusReply, {0x22, "STATUS_REPLY"}}, {MessageType::kEvent, {0x23, "EVENT"}},
      {MessageType::kReady, {0x30, "READY"}},           {MessageType::kTokens, {0x31, "TOKENS"}},
      {MessageType::kFinal, {0x32, "FINAL"}},           {MessageType::kAssign, {0x40, "ASSIGN"}},
  };
  for (const auto& [type, expected] : table) {
    EXPECT_EQ(static_cast<int>(type), expected.first) << expected.second;
    EXPECT_EQ(message_type_name(type), expected.second);
    EXPECT_EQ(message_type_from_byte(static_cast<std::uint8_t>(expected.first)), type);
  }
  int known = 0;
  for (int b = 0; b < 256; ++b) known += message_type_from_byte(static_cast<std::uint8_t>(b)).has_value();
  EXPECT_EQ(known, static_cast<int>(table.size()));
}

TEST(Frames, EveryTypeByteSurvivesTheFrames) {
  for (int b = 0; b < 256; ++b) {
    const auto type = message_type_from_byte(static_cast<std::uint8_t>(b));
    if (!type) continue;
    const WireMessage message{*type, "\x80"};
    EXPECT_EQ(from(to_frames(message)), message) << message_type_name(*type);
  }
}

TEST(Frames, WrongFrameCountsAreRefused) {
  expect_protocol_error([] { from({}); }, {"expected 3 frames", "got 0"});
  expect_protocol_error([] { from({"FQ1", "\x04"}); }, {"expected 3 frames", "got 2"});
  expect_protocol_error([] { from({"FQ1", "\x04", kCancelBody, "binary"}); }, {"expected 3 frames", "got 4"});
}

TEST(Frames, UnknownTagsAreRefused) {
  for (const std::string tag : {"FQ2", "", "fq1", "FQ1\n", "FQ"}) {
    expect_protocol_error([&] { from({tag, "\x04", kCancelBody}); }, {"frame 0", "unknown protocol tag"});
  }
}

TEST(Frames, TheTypeFrameIsExactlyOneKnownByte) {
  expect_protocol_error([] { from({"FQ1", "", kCancelBody}); }, {"frame 1", "1 byte, got 0"});
  expect_protocol_error([] { from({"FQ1", "\x04\x04", kCancelBody}); }, {"frame 1", "1 byte, got 2"});
  expect_protocol_error([] { from({"FQ1", std::string(1, '\0'), kCancelBody}); }, {"frame 1", "unknown message type 0x00"});
  expect_protocol_error([] { from({"FQ1", "\xff", kCancelBody}); }, {"frame 1", "unknown message type 0xff"});
}

TEST(Frames, BodiesOver16MiBAreRefusedByTheFraming) {
  const std::string big((16u << 20) + 1, '\0');
  expect_protocol_error([&] { from({"FQ1", "\x10", big}); }, {"SUBMIT body", "over the limit"});
}

TEST(Frames, DecodingAsAnotherTypeIsRefused) {
  const WireMessage wire = to_wire(Cancel{"j1"});
  expect_protocol_error([&] { from_wire<Status>(wire); }, {"expected message type STATUS, got CANCEL"});
}

TEST(Frames, ABadBodyPassesTheFramingButNotTheDecoder) {
  const WireMessage wire = from({"FQ1", "\x10", "\xc1"});
  EXPECT_EQ(wire.type, MessageType::kSubmit);
  expect_protocol_error([&] { from_wire<Submit>(wire); }, {"SUBMIT body", "not valid msgpack"});
}

TEST(Frames, BothHeartbeatsShareOneTypeByte) {
  EXPECT_EQ(WorkerHeartbeat::kType, BrokerHeartbeat::kType);
  EXPECT_NO_THROW(from_wire<BrokerHeartbeat>(to_wire(WorkerHeartbeat{2})));
  expect_protocol_error([] { from_wire<WorkerHeartbeat>(to_wire(BrokerHeartbeat{})); },
                        {"HEARTBEAT field load", "missing"});
}

TEST(StreamFrames, AreTopicThenTheEventsThreeFrames) {
  const Event event{"job-7", 3, {1, 2}, "ab", std::nullopt};
  const std::vector<std::string> frames = to_stream_frames(event);
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0], "job/job-7");
  EXPECT_EQ(frames[1], "FQ1");
  EXPECT_EQ(frames[2], std::string(1, '\x23'));
  const std::vector<std::string_view> v = views(frames);
  EXPECT_EQ(from_stream_frames(v), event);
}

TEST(StreamFrames, ATopicThatIsNotTheEventsOwnIsRefused) {
  // "job/a" is a prefix of "job/ab": a subscriber to job/a receives job/ab's events.
  std::vector<std::string> frames = to_stream_frames(Event{"ab", 0, {1}, "x", std::nullopt});
  frames[0] = "job/a";
  const std::vector<std::string_view> v = views(frames);
  expect_protocol_error([&] { from_stream_frames(v); }, {"topic does not match", "job/ab"});
}

TEST(StreamFrames, OnlyEventsTravelOnTheStream) {
  std::vector<std::string> frames = to_frames(to_wire(Cancel{"ab"}));
  frames.insert(frames.begin(), "job/ab");
  const std::vector<std::string_view> v = views(frames);
  expect_protocol_error([&] { from_stream_frames(v); }, {"expected message type EVENT, got CANCEL"});
}

TEST(StreamFrames, WrongFrameCountsAreRefused) {
  const std::vector<std::string> frames = to_frames(to_wire(Event{"ab", 0, {1}, "x", std::nullopt}));
  const std::vector<std::string_view> v = views(frames);
  expect_protocol_error([&] { from_stream_frames(v); }, {"expected 4 frames", "got 3"});
}

}  // namespace
}  // namespace flashq::protocol
