#include "protocol/protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <vector>

#include "common/unique_fd.h"

namespace space::guest {
namespace {

std::vector<Frame> SampleFrames() {
  return {{FrameType::kHello, 0, "{\"version\":1}"},
          {FrameType::kStdout, 7, std::string(70000, 'x')},
          {FrameType::kStdin, 7, ""},
          {FrameType::kExit, 0xFFFFFFFF, "{}"}};
}

TEST(FrameParserTest, ReassemblesAtEverySplitSize) {
  std::string wire;
  for (const Frame& f : SampleFrames()) wire += EncodeFrame(f.type, f.stream, f.payload);
  for (size_t step : {size_t{1}, size_t{5}, kHeaderSize, size_t{13}, size_t{4096}, wire.size()}) {
    SCOPED_TRACE("step " + std::to_string(step));
    FrameParser p;
    std::vector<Frame> got;
    for (size_t off = 0; off < wire.size(); off += step) {
      ASSERT_TRUE(p.Feed(std::string_view(wire).substr(off, step)).ok());
      while (auto f = p.Next()) got.push_back(std::move(*f));
    }
    auto want = SampleFrames();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].type, want[i].type);
      EXPECT_EQ(got[i].stream, want[i].stream);
      EXPECT_EQ(got[i].payload, want[i].payload);
    }
    EXPECT_EQ(p.buffered(), 0u);
  }
}

std::string RawHeader(uint8_t version, uint8_t type, uint32_t stream, uint32_t length) {
  std::string h(kHeaderSize, '\0');
  h[0] = static_cast<char>(version);
  h[1] = static_cast<char>(type);
  for (int i = 0; i < 4; ++i) {
    h[4 + i] = static_cast<char>(stream >> (8 * i));
    h[8 + i] = static_cast<char>(length >> (8 * i));
  }
  return h;
}

TEST(FrameParserTest, RejectsInvalidStreams) {
  struct Case {
    const char* name;
    std::string bytes;
  };
  const Case cases[] = {
      {"bad version", RawHeader(2, 1, 0, 0)},
      {"version zero", RawHeader(0, 1, 0, 0)},
      {"oversized length", RawHeader(kVersion, 10, 1, kMaxPayload + 1)},
      {"max length", RawHeader(kVersion, 10, 1, 0xFFFFFFFF)},
      {"garbage", std::string("GET / HTTP/1.1\r\n\r\n")},
      {"garbage after a good frame", EncodeFrame(FrameType::kPing, 0, "hi") + "garbage garbage"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FrameParser p;
    Status st = p.Feed(c.bytes);
    while (st.ok() && p.Next()) {
    }
    // The error surfaces on the Feed of the bad bytes or, at the latest, on the next one.
    if (st.ok()) st = p.Feed({});
    EXPECT_FALSE(st.ok());
    EXPECT_FALSE(p.Next().has_value());
  }
}

TEST(FrameParserTest, AcceptsMaxPayloadHeader) {
  FrameParser p;
  EXPECT_TRUE(p.Feed(RawHeader(kVersion, 21, 3, kMaxPayload)).ok());
  EXPECT_FALSE(p.Next().has_value());
}

TEST(ReseedFrameTest, RoundTripsAndValidates) {
  const std::string entropy(kReseedBytes, '\x5a');
  FrameParser p;
  ASSERT_TRUE(p.Feed(EncodeReseed(entropy)).ok());
  auto f = p.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->type, FrameType::kReseed);
  EXPECT_EQ(f->stream, 0u);
  EXPECT_EQ(f->payload, entropy);
  EXPECT_TRUE(ValidateReseed(*f).ok());
  EXPECT_EQ(ReseedRealtimeNs(*f), 0);
  // With the host's clock after the entropy.
  const int64_t now_ns = 1796000000123456789;
  ASSERT_TRUE(p.Feed(EncodeReseed(entropy, now_ns)).ok());
  auto g = p.Next();
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE(ValidateReseed(*g).ok());
  EXPECT_EQ(g->payload.substr(0, kReseedBytes), entropy);
  EXPECT_EQ(ReseedRealtimeNs(*g), now_ns);
  struct Case {
    const char* name;
    Frame frame;
  };
  const Case bad[] = {
      {"short", {FrameType::kReseed, 0, std::string(kReseedBytes - 1, 'x')}},
      {"long", {FrameType::kReseed, 0, std::string(kReseedBytes + 1, 'x')}},
      {"longer than with a clock", {FrameType::kReseed, 0, std::string(kReseedBytes + kReseedClockBytes + 1, 'x')}},
      {"empty", {FrameType::kReseed, 0, ""}},
      {"not stream 0", {FrameType::kReseed, 5, entropy}},
      {"wrong type", {FrameType::kPing, 0, entropy}},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(ValidateReseed(c.frame).ok());
  }
}

TEST(GrowDiskFrameTest, RoundTripsAndRefusesOtherShapes) {
  const uint64_t bytes = (8ull << 30) + 4096;
  FrameParser p;
  ASSERT_TRUE(p.Feed(EncodeGrowDisk(bytes)).ok());
  auto f = p.Next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->type, FrameType::kGrowDisk);
  auto parsed = ParseGrowDisk(*f);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, bytes);
  const Frame bad[] = {
      {FrameType::kGrowDisk, 0, std::string(7, 'x')},
      {FrameType::kGrowDisk, 0, std::string(9, 'x')},
      {FrameType::kGrowDisk, 3, std::string(8, 'x')},
      {FrameType::kPing, 0, std::string(8, 'x')},
  };
  for (const Frame& b : bad) EXPECT_FALSE(ParseGrowDisk(b).ok());
}

TEST(FrameIoTest, WriteThenReadOverSocket) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  ASSERT_TRUE(WriteFrame(a.get(), FrameType::kPing, 9, "abc").ok());
  auto f = ReadFrame(b.get());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->type, FrameType::kPing);
  EXPECT_EQ(f->stream, 9u);
  EXPECT_EQ(f->payload, "abc");
  a.reset();
  EXPECT_FALSE(ReadFrame(b.get()).ok());
}

TEST(TcpAckTest, RoundTripsAndRefusesOtherSizes) {
  for (uint32_t v : {0u, 1u, 65536u, kTcpWindow, 0xffffffffu}) {
    Result<uint32_t> back = ParseTcpAck(EncodeTcpAck(v));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, v);
  }
  EXPECT_FALSE(ParseTcpAck("").ok());
  EXPECT_FALSE(ParseTcpAck("12345").ok());
}

}  // namespace
}  // namespace space::guest
