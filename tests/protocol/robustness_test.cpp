// Decoding hostile bytes: every outcome is a decoded message or a kProtocol error, never a crash,
// an out-of-bounds read (run under AddressSanitizer) or an allocation sized by a declared length.
#include <random>

#include <gtest/gtest.h>

#include "shared/protocol/wire.h"
#include "tests/protocol/protocol_test_util.h"

namespace flashq::protocol {
namespace {

using testing::all_decoders;
using testing::bytes_of;
using testing::decoder_for;
using testing::expect_protocol_error;
using testing::full_bodies;
using testing::json;
using testing::msgpack_of;

// Decodes `body` with `decoder`; anything but success or a kProtocol error fails the test.
void expect_decoded_or_refused(const testing::NamedDecoder& decoder, std::string_view body) {
  try {
    decoder.decode(body);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProtocol) << decoder.name << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << decoder.name << " threw something else than flashq::Error: " << e.what();
  }
}

TEST(Robustness, RandomBytesAreDecodedOrRefused) {
  std::mt19937 rng(1234);
  for (const testing::NamedDecoder& decoder : all_decoders()) {
    for (int round = 0; round < 3000; ++round) {
      std::string body(rng() % 64, '\0');
      for (char& c : body) c = static_cast<char>(rng());
      // Half of them start like a map, to get past the first check.
      if (round % 2 == 0 && !body.empty()) body[0] = static_cast<char>(0x80 | (rng() % 16));
      expect_decoded_or_refused(decoder, body);
    }
  }
}

TEST(Robustness, EveryTruncationOfAValidBodyIsRefused) {
  for (const auto& [name, body] : full_bodies()) {
    const testing::NamedDecoder decoder = decoder_for(name);
    for (std::size_t size = 0; size < body.size(); ++size) {
      SCOPED_TRACE(name + " cut to " + std::to_string(size) + " of " + std::to_string(body.size()) + " bytes");
      // Clang before 16 cannot capture a structured binding; an init-capture names it instead.
      expect_protocol_error([&, &whole = body] { decoder.decode(std::string_view(whole).substr(0, size)); },
                            {name + " body"});
    }
  }
}

TEST(Robustness, RandomMutationsOfValidBodiesAreDecodedOrRefused) {
  std::mt19937 rng(99);
  for (const auto& [name, body] : full_bodies()) {
    for (int round = 0; round < 1500; ++round) {
      std::string mutated = body;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const std::size_t at = rng() % mutated.size();
        switch (rng() % 3) {
          case 0: mutated[at] = static_cast<char>(rng()); break;
          case 1: mutated.erase(at, 1 + rng() % 8); break;
          default: mutated.insert(at, 1, static_cast<char>(rng())); break;
        }
        if (mutated.empty()) mutated = "\x80";
      }
      for (const testing::NamedDecoder& decoder : all_decoders()) expect_decoded_or_refused(decoder, mutated);
    }
  }
}

TEST(Robustness, AnyValidBodyDecodedAsAnyTypeIsDecodedOrRefused) {
  for (const auto& [name, body] : full_bodies()) {
    for (const testing::NamedDecoder& decoder : all_decoders()) expect_decoded_or_refused(decoder, body);
  }
}

TEST(Robustness, HugeDeclaredLengthsAreRefusedAsTruncated) {
  // Each declares about 4 GiB (or 4 G elements) and then ends.
  for (const std::string& body : {bytes_of("\xdf\xff\xff\xff\xff"), bytes_of("\xdd\xff\xff\xff\xff"),
                                  bytes_of("\xdb\xff\xff\xff\xff"), bytes_of("\xc6\xff\xff\xff\xff"),
                                  bytes_of("\xc9\xff\xff\xff\xff\x01"),
                                  bytes_of("\x81\xa2id\xdb\xff\xff\xff\xff")}) {
    expect_protocol_error([&] { decode_body<Cancel>(body); }, {"CANCEL body", "truncated"});
  }
}

TEST(Robustness, HugeDeclaredArraysInsideAJobAreRefusedBeforeAnyAllocation) {
  // {"job": {"prompt_tokens": [ 16M elements declared, then nothing ]}}
  std::string body = bytes_of("\x81\xa3job\x81\xadprompt_tokens");
  body += bytes_of("\xdd\x00\xff\xff\xff");
  expect_protocol_error([&] { decode_body<Submit>(body); }, {"SUBMIT body", "truncated"});
  // Thirty levels of 16M-element arrays: a tree builder that believed them would ask for
  // 30 x 16M x 24 bytes. The structure check refuses them before any tree is built.
  std::string nested = bytes_of("\x81\xa8metadata");
  for (int i = 0; i < 30; ++i) nested += bytes_of("\xdd\x00\xff\xff\xff");
  expect_protocol_error([&] { decode_body<Disconnect>(nested); }, {"DISCONNECT body", "truncated"});
}

TEST(Robustness, DeeplyNestedMetadataIsRefused) {
  for (const char opener : {'\x91', '\x81'}) {
    // {"job": {"prompt": "p", "metadata": [[[[...1...]]]]}} 100,000 levels deep.
    std::string body = bytes_of("\x81\xa3job\x82\xa6prompt\xa1p\xa8metadata");
    for (int i = 0; i < 100'000; ++i) {
      body += opener;
      if (opener == '\x81') body += bytes_of("\xa1k");  // a map's key, then the nested value
    }
    body += '\x01';
    expect_protocol_error([&] { decode_body<Submit>(body); }, {"SUBMIT body", "nested deeper than 32"});
  }
}

TEST(Robustness, AWholeBodyOfNestingIsRefused) {
  const std::string body(1 << 20, '\x91');
  for (const testing::NamedDecoder& decoder : all_decoders()) {
    expect_protocol_error([&] { decoder.decode(body); }, {decoder.name + " body", "nested deeper than 32"});
  }
}

TEST(Robustness, BodiesOfMoreThanTwoMillionValuesAreRefused) {
  // {"id": "j", "padding": [0, 0, ...]}: the map, two keys, two values, then the elements.
  const std::size_t limit = 2u << 20;
  const std::string body = msgpack_of({{"id", "j"}, {"padding", std::vector<int>(limit - 5, 0)}});
  EXPECT_NO_THROW(decode_body<Cancel>(body));
  const std::string over = msgpack_of({{"id", "j"}, {"padding", std::vector<int>(limit - 4, 0)}});
  expect_protocol_error([&] { decode_body<Cancel>(over); }, {"CANCEL body", "more than 2097152 msgpack values"});
}

TEST(Robustness, TheLargestLegitimateAssignFitsTheLimits) {
  Job job = testing::full_job();
  job.prompt = TokenIds(262'144, 151'000);
  const Assign assign{job, 2, TokenIds(1'000'000, 151'000), 3'000'000};
  EXPECT_EQ(decode_body<Assign>(encode_body(assign)), assign);
}

TEST(Robustness, ReservedAndNeverUsedBytesAreNotMsgpack) {
  expect_protocol_error([] { decode_body<Cancel>(bytes_of("\xc1")); }, {"CANCEL body", "not valid msgpack"});
  expect_protocol_error([] { decode_body<Cancel>(bytes_of("\x81\xa2id\xc1")); }, {"CANCEL body", "not valid msgpack"});
}

TEST(Robustness, ExtensionsAndBinariesAreWrongTypesForTypedFields) {
  // {"id": ext(1, "j")} and {"id": bin("j")}
  expect_protocol_error([] { decode_body<Cancel>(bytes_of("\x81\xa2id\xd4\x01j")); },
                        {"CANCEL field id", "must be a string, got an extension"});
  expect_protocol_error([] { decode_body<Cancel>(bytes_of("\x81\xa2id\xc4\x01j")); },
                        {"CANCEL field id", "must be a string, got a binary"});
}

TEST(Robustness, ExtensionsPassThroughInMetadata) {
  // {"job": {"prompt": "p", "metadata": ext(5, "abcd")}}
  const std::string metadata = bytes_of("\xd6\x05\x61\x62\x63\x64");
  const std::string body = bytes_of("\x81\xa3job\x82\xa6prompt\xa1p\xa8metadata") + metadata;
  EXPECT_EQ(decode_body<Submit>(body).job.metadata, metadata);
}

TEST(Robustness, RandomFramesAreParsedOrRefused) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20'000; ++round) {
    std::vector<std::string> frames(rng() % 5);
    for (std::string& frame : frames) {
      frame.resize(rng() % 5);
      for (char& c : frame) c = static_cast<char>(rng() % 4 == 0 ? "FQ1"[rng() % 3] : rng());
    }
    if (frames.size() == 3 && rng() % 2 == 0) frames[0] = "FQ1";
    const std::vector<std::string_view> views(frames.begin(), frames.end());
    try {
      from_frames(views);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
    }
  }
}

}  // namespace
}  // namespace flashq::protocol
