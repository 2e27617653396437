// The TCP data channel's frame codec: round trips, incremental decoding,
// and rejection of garbage, truncated and oversized input.
#include "daemon/transport/tcp/wire.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::tcp {
namespace {

using ::testing::HasSubstr;

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()),
                                   s.size());
}

TEST(TcpWireTest, RequestHeaderRoundTrip) {
  const std::string frame = EncodeRequestFrame(
      FrameType::kRead, 0x0102030405060708, 77, 0xdeadbeefcafef00d, 4095, 12);
  ASSERT_EQ(frame.size(), kRequestHeaderSize);
  auto h = DecodeHeader(Bytes(frame));
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(h->has_value());
  EXPECT_EQ((*h)->type, FrameType::kRead);
  EXPECT_EQ((*h)->request_id, 0x0102030405060708u);
  EXPECT_EQ((*h)->region_id, 77u);
  EXPECT_EQ((*h)->key, 0xdeadbeefcafef00du);
  EXPECT_EQ((*h)->offset, 4095u);
  EXPECT_EQ((*h)->length, 12u);
  EXPECT_EQ((*h)->body_length(), 0u);
}

TEST(TcpWireTest, LittleEndianLayoutIsFixed) {
  const std::string frame =
      EncodeRequestFrame(FrameType::kWrite, 1, 2, 3, 4, 5, "hello");
  // Magic "RDT1", version 1, type 1, flags 0, request id 1.
  EXPECT_EQ(frame.substr(0, 4), "RDT1");
  EXPECT_EQ(frame[4], 1);
  EXPECT_EQ(frame[5], 1);
  EXPECT_EQ(frame[6], 0);
  EXPECT_EQ(frame[7], 0);
  EXPECT_EQ(frame[8], 1);
  EXPECT_EQ(frame[16], 2);  // region id
  EXPECT_EQ(frame[24], 3);  // key
  EXPECT_EQ(frame[32], 4);  // offset
  EXPECT_EQ(frame[40], 5);  // length
  EXPECT_EQ(frame.substr(48), "hello");
}

TEST(TcpWireTest, WriteImmSplitsLengthAndImmediate) {
  const std::string payload(300, 'q');
  const std::string frame = EncodeRequestFrame(
      FrameType::kWriteImm, 5, 6, 7, 8, payload.size(), payload, 0xa1b2c3d4);
  ASSERT_EQ(frame.size(), kRequestHeaderSize + payload.size());
  EXPECT_EQ(frame[5], 3);
  // Length in the low four bytes of the last field, immediate above it.
  EXPECT_EQ(static_cast<uint8_t>(frame[40]), 300 & 0xff);
  EXPECT_EQ(static_cast<uint8_t>(frame[41]), 300 >> 8);
  EXPECT_EQ(static_cast<uint8_t>(frame[44]), 0xd4);
  EXPECT_EQ(static_cast<uint8_t>(frame[47]), 0xa1);
  auto f = DecodeFrame(Bytes(frame));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->header.type, FrameType::kWriteImm);
  EXPECT_EQ((*f)->header.length, payload.size());
  EXPECT_EQ((*f)->header.immediate, 0xa1b2c3d4u);
  EXPECT_EQ((*f)->header.body_length(), payload.size());
  EXPECT_TRUE(IsRequest(FrameType::kWriteImm));
  // Re-encoding what was decoded gives back the same header bytes.
  uint8_t again[kRequestHeaderSize];
  EncodeRequest((*f)->header.type, (*f)->header.request_id,
                (*f)->header.region_id, (*f)->header.key, (*f)->header.offset,
                (*f)->header.length, again, (*f)->header.immediate);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(again), kRequestHeaderSize),
            frame.substr(0, kRequestHeaderSize));
}

TEST(TcpWireTest, IdentifyCarriesThePeerAddress) {
  const std::string frame = EncodeIdentifyFrame("10.0.0.2:7471");
  auto f = DecodeFrame(Bytes(frame));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->header.type, FrameType::kIdentify);
  EXPECT_EQ((*f)->header.length, 13u);
  EXPECT_EQ((*f)->size, kRequestHeaderSize + 13);
  EXPECT_TRUE(IsRequest(FrameType::kIdentify));
  EXPECT_FALSE(IsWrite(FrameType::kIdentify));
  const std::string body(reinterpret_cast<const char*>((*f)->payload.data()),
                         (*f)->payload.size());
  auto address = ParseIdentity(body);
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address, "10.0.0.2:7471");
  EXPECT_EQ(FrameTypeName(FrameType::kIdentify), "IDENTIFY");
  // What a peer may not name itself.
  for (const char* bad : {"", "10.0.0.2", "host:99999", "a b:1",
                          "10.0.0.2:7471\n[FAKE] log line"}) {
    auto parsed = ParseIdentity(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

TEST(TcpWireTest, WriteImmOfLengthZeroIsGarbage) {
  std::string frame = EncodeRequestFrame(FrameType::kWriteImm, 5, 6, 7, 8, 1,
                                         "x", 0xffffffff);
  frame[40] = 0;  // length 0, immediate still set
  auto h = DecodeHeader(Bytes(frame));
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(std::string(h.status().message()), HasSubstr("length 0"));
}

TEST(TcpWireTest, WriteFrameWithPayload) {
  const std::string payload(1000, 'x');
  const std::string frame =
      EncodeRequestFrame(FrameType::kWrite, 9, 1, 2, 3, payload.size(), payload);
  auto f = DecodeFrame(Bytes(frame));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->size, frame.size());
  EXPECT_EQ((*f)->payload.size(), payload.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->payload.data()),
                        (*f)->payload.size()),
            payload);
}

TEST(TcpWireTest, ReplyRoundTrip) {
  const std::string ok =
      EncodeReplyFrame(FrameType::kReadReply, 5, absl::OkStatus(), "data");
  auto f = DecodeFrame(Bytes(ok));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->header.type, FrameType::kReadReply);
  EXPECT_EQ((*f)->header.request_id, 5u);
  EXPECT_EQ((*f)->header.status, 0u);
  EXPECT_EQ((*f)->header.payload_length, 4u);
  EXPECT_TRUE((*f)->message.empty());

  const std::string error = EncodeReplyFrame(
      FrameType::kWriteReply, 6, absl::PermissionDeniedError("read-only"), "");
  f = DecodeFrame(Bytes(error));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->header.status,
            static_cast<uint32_t>(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ((*f)->message, "read-only");
  EXPECT_TRUE((*f)->payload.empty());
}

TEST(TcpWireTest, LongMessagesAreClipped) {
  const std::string long_message(5000, 'm');
  const std::string frame = EncodeReplyFrame(
      FrameType::kWriteReply, 1, absl::InternalError(long_message), "");
  auto f = DecodeFrame(Bytes(frame));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->message.size(), kMaxMessage);
}

TEST(TcpWireTest, EveryTruncationNeedsMoreBytes) {
  const std::vector<std::string> frames = {
      EncodeRequestFrame(FrameType::kWrite, 1, 2, 3, 4, 10, "0123456789"),
      EncodeRequestFrame(FrameType::kRead, 1, 2, 3, 4, 10),
      EncodeReplyFrame(FrameType::kReadReply, 1, absl::OkStatus(), "abc"),
      EncodeReplyFrame(FrameType::kWriteReply, 1,
                       absl::OutOfRangeError("nope"), ""),
  };
  for (const std::string& frame : frames) {
    for (size_t n = 0; n < frame.size(); ++n) {
      auto f = DecodeFrame(Bytes(frame.substr(0, n)));
      ASSERT_TRUE(f.ok()) << "prefix " << n << ": " << f.status();
      EXPECT_FALSE(f->has_value()) << "prefix " << n;
    }
    auto f = DecodeFrame(Bytes(frame));
    ASSERT_TRUE(f.ok());
    EXPECT_TRUE(f->has_value());
  }
}

TEST(TcpWireTest, DecodesOnlyTheFirstOfSeveralFrames) {
  const std::string a = EncodeRequestFrame(FrameType::kWrite, 1, 2, 3, 4, 3, "abc");
  const std::string b = EncodeRequestFrame(FrameType::kRead, 2, 2, 3, 4, 3);
  const std::string both = a + b;
  auto f = DecodeFrame(Bytes(both));
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ((*f)->size, a.size());
  f = DecodeFrame(Bytes(both).subspan((*f)->size));
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ((*f)->header.request_id, 2u);
}

struct BadCase {
  std::string name;
  std::string bytes;
  std::string message;
};

std::string Patch(std::string s, size_t at, std::string with) {
  s.replace(at, with.size(), with);
  return s;
}

std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

std::string Le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

TEST(TcpWireTest, RejectsGarbage) {
  const std::string read = EncodeRequestFrame(FrameType::kRead, 1, 2, 3, 4, 10);
  const std::string reply =
      EncodeReplyFrame(FrameType::kReadReply, 1, absl::OkStatus(), "abc");
  const std::string wreply =
      EncodeReplyFrame(FrameType::kWriteReply, 1, absl::OkStatus(), "");
  const std::vector<BadCase> cases = {
      {"http", "GET / HTTP/1.1\r\n\r\n", "bad magic"},
      {"magic", Patch(read, 0, "XDT1"), "bad magic"},
      {"version", Patch(read, 4, "\x02"), "version"},
      {"type", Patch(read, 5, "\x07"), "unknown frame type"},
      {"flags", Patch(read, 6, "\x01"), "reserved flags"},
      {"zero length", Patch(read, 40, Le64(0)), "length 0"},
      {"oversized", Patch(read, 40, Le64(kMaxFramePayload + 1)), "frame limit"},
      {"huge", Patch(read, 40, Le64(~0ull)), "frame limit"},
      {"status", Patch(reply, 16, Le32(17)), "status code"},
      {"ok with message", Patch(wreply, 20, Le32(3)), "error message"},
      {"long message",
       Patch(Patch(wreply, 16, Le32(13)), 20, Le32(kMaxMessage + 1)),
       "message of"},
      {"ok read without data", Patch(reply, 24, Le64(0)), "without data"},
      {"oversized reply", Patch(reply, 24, Le64(kMaxFramePayload + 1)),
       "frame limit"},
      {"write reply with data", Patch(wreply, 24, Le64(5)), "carries"},
      {"error with data", Patch(Patch(reply, 16, Le32(7)), 24, Le64(5)),
       "carries"},
      {"identify with a region",
       EncodeRequestFrame(FrameType::kIdentify, 0, 5, 0, 0, 4, "a:11"),
       "IDENTIFY with a region"},
      {"identify too long",
       EncodeRequestFrame(FrameType::kIdentify, 0, 0, 0, 0,
                          kMaxIdentityLength + 1),
       "IDENTIFY of"},
  };
  for (const BadCase& c : cases) {
    auto h = DecodeHeader(Bytes(c.bytes));
    ASSERT_FALSE(h.ok()) << c.name;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss) << c.name;
    EXPECT_THAT(h.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_FALSE(DecodeFrame(Bytes(c.bytes)).ok()) << c.name;
  }
}

TEST(TcpWireTest, RejectsGarbageEarly) {
  // Four bytes of the wrong magic are enough to refuse.
  auto h = DecodeHeader(Bytes("HTTP"));
  EXPECT_FALSE(h.ok());
  // A wrong type is refused at byte 6, before the rest of the header.
  std::string prefix("RDT1\x01\x09", 6);
  h = DecodeHeader(Bytes(prefix));
  EXPECT_FALSE(h.ok());
}

TEST(TcpWireTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(12345);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string bytes(rng() % 80, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Make some inputs start like real frames so the deeper checks run.
    if (i % 2 == 0 && bytes.size() >= 6) {
      bytes.replace(0, 5, "RDT1\x01");
      const uint8_t types[] = {1, 2, 0x81, 0x82};
      bytes[5] = static_cast<char>(types[rng() % 4]);
      if (bytes.size() >= 8 && i % 4 == 0) bytes[6] = bytes[7] = 0;
    }
    auto f = DecodeFrame(Bytes(bytes));
    if (f.ok() && f->has_value()) {
      ++accepted;
      EXPECT_LE((*f)->size, bytes.size());
      EXPECT_LE((*f)->payload.size(), kMaxFramePayload);
    }
  }
  // Not a correctness bound; just shows the interesting paths ran.
  RecordProperty("accepted", accepted);
}

}  // namespace
}  // namespace rdmad::tcp
