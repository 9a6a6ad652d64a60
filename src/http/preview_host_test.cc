#include "http/preview_host.h"

#include <gtest/gtest.h>

namespace space::api {
namespace {

TEST(PreviewHostTest, ParsesPortAndLabelCaseInsensitively) {
  auto h = ParsePreviewHost("8000-sbx-abc123.localhost:7722", "localhost");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->port, 8000);
  EXPECT_EQ(h->label, "sbx-abc123");
  h = ParsePreviewHost("3000-SBX_AbC.Preview.Example.COM", "preview.example.com");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->port, 3000);
  EXPECT_EQ(h->label, "sbx_abc");  // an E2B host: the SDK puts the id as it is
  EXPECT_TRUE(ParsePreviewHost("80-x.localhost.", "localhost").has_value());
}

TEST(PreviewHostTest, RefusesEverythingElse) {
  for (const char* host :
       {"localhost:7722", "127.0.0.1:7722", "8000-sbx.localhost.evil.com", "8000-sbx.evil.com", "a.8000-sbx.localhost",
        "8000-.localhost", "-sbx.localhost", "0-sbx.localhost", "65536-sbx.localhost", "123456-sbx.localhost",
        "80x-sbx.localhost", "8000-sb%x.localhost", "8000-sbx.localhost:", "8000-sbx.localhost:99999x", "[::1]:7722",
        "8000-sbxlocalhost", ".localhost", ""}) {
    EXPECT_FALSE(ParsePreviewHost(host, "localhost").has_value()) << host;
  }
  EXPECT_FALSE(ParsePreviewHost("8000-sbx.localhost", "").has_value());
  EXPECT_FALSE(ParsePreviewHost("8000-" + std::string(64, 'a') + ".localhost", "localhost").has_value());
}

}  // namespace
}  // namespace space::api
