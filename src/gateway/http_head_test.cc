#include "gateway/http_head.h"

#include <gtest/gtest.h>

namespace space::gateway {
namespace {

TEST(HttpHeadTest, ParsesAndRebuilds) {
  auto h = ParseRequestHead("GET /x HTTP/1.1\r\nHost: a.test\r\nAuthorization:  Bearer p \r\n\r\nBODY");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->method, "GET");
  EXPECT_EQ(h->target, "/x");
  EXPECT_EQ(h->Get("authorization"), "Bearer p");
  EXPECT_EQ(h->head_size, 60u);  // everything before BODY
  h->Set("Authorization", "Bearer s");
  h->Set("Connection", "close");
  EXPECT_EQ(h->Serialize(), "GET /x HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer s\r\nConnection: close\r\n\r\n");
}

TEST(HttpHeadTest, IncompleteIsNotFoundAndMalformedIsRefused) {
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.1\r\nHost: a").status().code(), StatusCode::kNotFound);
  for (const char* bad : {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", "GET / HTTP/2\r\n\r\n",
                          "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
                          "GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n", "GET  HTTP/1.1\r\n\r\n"}) {
    EXPECT_EQ(ParseRequestHead(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  std::string huge = "GET / HTTP/1.1\r\nX: " + std::string(kMaxRequestHead, 'a');
  EXPECT_EQ(ParseRequestHead(huge).status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpHeadTest, SplitsAuthorities) {
  EXPECT_EQ(*SplitHostPort("Example.ORG.", 80), std::make_pair(std::string("example.org"), uint16_t{80}));
  EXPECT_EQ(*SplitHostPort("a.test:8443", 80), std::make_pair(std::string("a.test"), uint16_t{8443}));
  EXPECT_EQ(SplitHostPort("[::1]", 443)->first, "[::1]");
  EXPECT_FALSE(SplitHostPort("a.test:", 80).ok());
  EXPECT_FALSE(SplitHostPort("a.test:99999", 80).ok());
  EXPECT_FALSE(SplitHostPort(":80", 80).ok());
}

}  // namespace
}  // namespace space::gateway
