#include "e2b/connect_envelope.h"

#include <gtest/gtest.h>

namespace space::e2b {
namespace {

std::string Header(uint8_t flags, uint32_t len) {
  std::string h(5, '\0');
  h[0] = static_cast<char>(flags);
  h[1] = static_cast<char>(len >> 24);
  h[2] = static_cast<char>(len >> 16);
  h[3] = static_cast<char>(len >> 8);
  h[4] = static_cast<char>(len);
  return h;
}

TEST(ConnectEnvelope, EncodeMatchesTheWireExample) {
  // From a real `commands.run('echo hello')` exchange.
  std::string e = EncodeEnvelope(0x02, "{}");
  EXPECT_EQ(e, std::string("\x02\x00\x00\x00\x02{}", 7));
}

TEST(ConnectEnvelope, RoundTripsSeveral) {
  std::string body = EncodeEnvelope(0, "{\"a\":1}") + EncodeEnvelope(0, "") + EncodeEnvelope(2, "{}");
  auto envs = DecodeEnvelopes(body);
  ASSERT_TRUE(envs.ok());
  ASSERT_EQ(envs->size(), 3u);
  EXPECT_EQ((*envs)[0].payload, "{\"a\":1}");
  EXPECT_EQ((*envs)[1].payload, "");
  EXPECT_EQ((*envs)[2].flags, 2);
}

struct BadCase {
  const char* name;
  std::string body;
};

TEST(ConnectEnvelope, RefusesHostileBodies) {
  const BadCase cases[] = {
      {"truncated header", std::string("\x00\x00\x00", 3)},
      {"length beyond body", Header(0, 10) + "abc"},
      {"huge length", Header(0, 0xffffffffu) + "x"},
      {"over the cap", Header(0, kMaxEnvelopePayload + 1)},
      {"compressed", Header(1, 2) + "{}"},
      {"unknown flag", Header(0x80, 2) + "{}"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(DecodeEnvelopes(c.body).ok()) << c.name;
  }
}

TEST(ConnectEnvelope, BoundsTheEnvelopeCount) {
  std::string body;
  for (int i = 0; i < 20; ++i) body += EncodeEnvelope(0, "{}");
  EXPECT_FALSE(DecodeEnvelopes(body, 1024, 16).ok());
}

TEST(ConnectEnvelope, SingleRequestMessage) {
  auto m = DecodeSingleRequestMessage(EncodeEnvelope(0, "{\"path\":\"/\"}"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, "{\"path\":\"/\"}");
  EXPECT_TRUE(DecodeSingleRequestMessage(EncodeEnvelope(0, "{}") + EncodeEnvelope(2, "{}")).ok());
  EXPECT_FALSE(DecodeSingleRequestMessage("").ok());
  EXPECT_FALSE(DecodeSingleRequestMessage(EncodeEnvelope(2, "{}")).ok());
  EXPECT_FALSE(DecodeSingleRequestMessage(EncodeEnvelope(0, "{}") + EncodeEnvelope(0, "{}")).ok());
}

}  // namespace
}  // namespace space::e2b
