#include "controlplane/node_client.h"

#include <gtest/gtest.h>

namespace space::controlplane {
namespace {

TEST(NodeClientTest, ParsesNodeUrls) {
  auto hp = ParseNodeUrl("http://10.0.0.5:7722");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->first, "10.0.0.5");
  EXPECT_EQ(hp->second, 7722);
  hp = ParseNodeUrl("http://[::1]:80/");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->first, "::1");
  for (const char* bad : {"https://10.0.0.5:1", "http://10.0.0.5", "http://10.0.0.5:0", "http://10.0.0.5:99999",
                          "http://10.0.0.5:12x", "10.0.0.5:1", "http://:1"}) {
    EXPECT_FALSE(ParseNodeUrl(bad).ok()) << bad;
  }
}

TEST(NodeClientTest, UnreachableNodeIsUnavailable) {
  // Port 1 on loopback: nothing listens there, so connect is refused at once.
  auto r = Call("http://127.0.0.1:1", "GET", "/healthz", "", {}, 2000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace space::controlplane
