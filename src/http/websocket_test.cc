#include "http/websocket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace space::api {
namespace {

// A client frame: masked with `mask`, FIN and opcode as given.
std::string ClientFrame(uint8_t opcode, std::string_view payload, bool fin = true, bool masked = true) {
  std::string f;
  f += static_cast<char>((fin ? 0x80 : 0) | opcode);
  const uint64_t n = payload.size();
  const char mbit = masked ? static_cast<char>(0x80) : 0;
  if (n < 126) {
    f += static_cast<char>(mbit | static_cast<char>(n));
  } else if (n <= 0xffff) {
    f += static_cast<char>(mbit | 126);
    f += static_cast<char>(n >> 8);
    f += static_cast<char>(n & 0xff);
  } else {
    f += static_cast<char>(mbit | 127);
    for (int s = 56; s >= 0; s -= 8) f += static_cast<char>((n >> s) & 0xff);
  }
  const char mask[4] = {0x12, 0x34, 0x56, 0x78};
  if (masked) f.append(mask, 4);
  for (size_t i = 0; i < payload.size(); ++i) f += masked ? static_cast<char>(payload[i] ^ mask[i % 4]) : payload[i];
  return f;
}

TEST(WebSocketTest, AcceptKeyIsTheRfcExample) {
  EXPECT_EQ(WebSocketAccept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_TRUE(IsWebSocketKey("dGhlIHNhbXBsZSBub25jZQ=="));
  EXPECT_FALSE(IsWebSocketKey("short"));
  EXPECT_FALSE(IsWebSocketKey("!!!!!!!!!!!!!!!!!!!!!!=="));
}

TEST(WebSocketTest, BearerKeyFromTheSubprotocolList) {
  // "space_abc" base64url-encoded without padding is "c3BhY2VfYWJj".
  EXPECT_EQ(BearerFromSubprotocols("space.terminal.v1, space.bearer.c3BhY2VfYWJj"), "space_abc");
  EXPECT_EQ(BearerFromSubprotocols("space.terminal.v1"), "");
  EXPECT_EQ(BearerFromSubprotocols("space.bearer.!!!"), "");
  EXPECT_EQ(BearerFromSubprotocols("space.bearer.YQo"), "");  // "a\n": not a printable key
  EXPECT_EQ(BearerFromSubprotocols(""), "");
}

TEST(WebSocketTest, EncodesEachLengthForm) {
  EXPECT_EQ(EncodeWsFrame(WsOpcode::kText, "hi"), std::string("\x81\x02hi", 4));
  std::string mid(300, 'x');
  std::string f = EncodeWsFrame(WsOpcode::kBinary, mid);
  EXPECT_EQ(static_cast<uint8_t>(f[1]), 126);
  EXPECT_EQ(f.size(), 4 + mid.size());
  std::string big(70000, 'y');
  f = EncodeWsFrame(WsOpcode::kBinary, big);
  EXPECT_EQ(static_cast<uint8_t>(f[1]), 127);
  EXPECT_EQ(f.size(), 10 + big.size());
}

TEST(WebSocketTest, ReassemblesFragmentsFedByteByByte) {
  std::string wire = ClientFrame(0x2, "hel", false) + ClientFrame(0x9, "p") + ClientFrame(0x0, "lo", true) +
                     ClientFrame(0x1, std::string(300, 'z'));
  WsReader r(1024);
  std::vector<WsMessage> out;
  for (char c : wire) ASSERT_TRUE(r.Feed(std::string_view(&c, 1), &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].opcode, WsOpcode::kPing);  // a control frame may come between fragments
  EXPECT_EQ(out[1].opcode, WsOpcode::kBinary);
  EXPECT_EQ(out[1].payload, "hello");
  EXPECT_EQ(out[2].opcode, WsOpcode::kText);
  EXPECT_EQ(out[2].payload, std::string(300, 'z'));
}

TEST(WebSocketTest, RefusesWhatTheProtocolForbids) {
  struct Case {
    const char* what;
    std::string wire;
    StatusCode code;
  } cases[] = {
      {"unmasked", ClientFrame(0x2, "x", true, false), StatusCode::kInvalidArgument},
      {"reserved bits", std::string("\xc2\x80\0\0\0\0", 6), StatusCode::kInvalidArgument},
      {"unknown opcode", ClientFrame(0x3, "x"), StatusCode::kInvalidArgument},
      {"fragmented ping", ClientFrame(0x9, "x", false), StatusCode::kInvalidArgument},
      {"long ping", ClientFrame(0x9, std::string(126, 'p')), StatusCode::kInvalidArgument},
      {"stray continuation", ClientFrame(0x0, "x"), StatusCode::kInvalidArgument},
      {"interleaved message", ClientFrame(0x2, "a", false) + ClientFrame(0x2, "b"), StatusCode::kInvalidArgument},
      {"one big frame", ClientFrame(0x2, std::string(2000, 'b')), StatusCode::kPayloadTooLarge},
      {"fragments adding up", ClientFrame(0x2, std::string(600, 'b'), false) + ClientFrame(0x0, std::string(600, 'b')),
       StatusCode::kPayloadTooLarge},
  };
  for (const auto& c : cases) {
    WsReader r(1024);
    std::vector<WsMessage> out;
    Status st = r.Feed(c.wire, &out);
    EXPECT_EQ(st.code(), c.code) << c.what << ": " << st.ToString();
  }
}

TEST(WebSocketTest, AHugeLengthIsRefusedFromTheHeaderAlone) {
  // 2^62 bytes announced, 14 sent: refused at once, nothing buffered waiting for the rest.
  std::string wire("\x82\xff\x40\0\0\0\0\0\0\0\x01\x02\x03\x04", 14);
  WsReader r(1 << 20);
  std::vector<WsMessage> out;
  EXPECT_EQ(r.Feed(wire, &out).code(), StatusCode::kPayloadTooLarge);
}

TEST(WebSocketTest, ConnectionAnswersPingsAndEchoesClose) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  WsConnection ws(sv[0], 1024);
  std::string in = ClientFrame(0x9, "hb") + ClientFrame(0x2, "keys") + ClientFrame(0x8, std::string("\x03\xe8", 2));
  ASSERT_EQ(::write(sv[1], in.data(), in.size()), static_cast<ssize_t>(in.size()));
  auto m = ws.Read(1000);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->payload, "keys");
  EXPECT_EQ(ws.Read(1000).status().code(), StatusCode::kUnavailable);  // the close
  EXPECT_FALSE(ws.Send(WsOpcode::kBinary, "late").ok());
  char buf[64];
  ssize_t n = ::read(sv[1], buf, sizeof buf);
  std::string got(buf, static_cast<size_t>(n));
  EXPECT_EQ(got, EncodeWsFrame(WsOpcode::kPong, "hb") + EncodeWsFrame(WsOpcode::kClose, std::string("\x03\xe8", 2)));
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(WebSocketTest, ReadTimesOutAndSeesAHangUp) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  WsConnection ws(sv[0], 1024);
  EXPECT_EQ(ws.Read(20).status().code(), StatusCode::kDeadlineExceeded);
  ::close(sv[1]);
  EXPECT_EQ(ws.Read(1000).status().code(), StatusCode::kUnavailable);
  ::close(sv[0]);
}

}  // namespace
}  // namespace space::api
