#include "ingress/upstream_request.h"

#include <gtest/gtest.h>

namespace space::ingress {
namespace {

api::Request Req() {
  api::Request r;
  r.method = "POST";
  r.target = "/submit?a=1";
  r.headers = {{"host", "8000-sbx-a.localhost:7722"},
               {"x-space-port-token", "secret"},
               {"cookie", "theme=dark; space_port_token=secret; lang=en"},
               {"content-type", "text/plain"},
               {"transfer-encoding", "chunked"},
               {"x-forwarded-for", "1.2.3.4"},
               {"connection", "keep-alive"}};
  r.body = "hello";
  return r;
}

TEST(UpstreamRequestTest, TheTokenNeverReachesTheSandbox) {
  api::Request r = Req();
  EXPECT_EQ(PresentedToken(r), "secret");
  std::string up = UpstreamRequest(r, "8000-sbx-a.localhost:7722");
  EXPECT_EQ(up.find("secret"), std::string::npos) << up;
  EXPECT_NE(up.find("cookie: theme=dark; lang=en\r\n"), std::string::npos) << up;
  EXPECT_EQ(up.rfind("POST /submit?a=1 HTTP/1.1\r\nHost: 8000-sbx-a.localhost:7722\r\n", 0), 0u) << up;
  EXPECT_NE(up.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(up.find("Content-Length: 5\r\n\r\nhello"), std::string::npos);
  EXPECT_EQ(up.find("chunked"), std::string::npos);
  EXPECT_EQ(up.find("1.2.3.4"), std::string::npos);  // the client's claims about itself are not passed on
}

TEST(UpstreamRequestTest, CookieOnlyTokenAndUpgrades) {
  api::Request r;
  r.method = "GET";
  r.target = "/ws";
  r.headers = {{"cookie", "space_port_token=t0"}, {"upgrade", "websocket"}, {"sec-websocket-key", "k"}};
  EXPECT_EQ(PresentedToken(r), "t0");
  EXPECT_EQ(CookieWithoutToken(r.Header("cookie")), "");
  EXPECT_TRUE(IsUpgrade(r));
  std::string up = UpstreamRequest(r, "h");
  EXPECT_EQ(up.find("cookie"), std::string::npos);
  EXPECT_NE(up.find("Connection: Upgrade\r\nUpgrade: websocket\r\n"), std::string::npos) << up;
  EXPECT_NE(up.find("sec-websocket-key: k\r\n"), std::string::npos);
  EXPECT_EQ(up.find("Content-Length"), std::string::npos);
}

TEST(UpstreamRequestTest, TargetWithoutToken) {
  EXPECT_EQ(TargetWithoutToken("/?token=abc"), "/");
  EXPECT_EQ(TargetWithoutToken("/p?x=1&token=abc&y=2"), "/p?x=1&y=2");
  EXPECT_EQ(TargetWithoutToken("/p"), "/p");
  EXPECT_EQ(TargetWithoutToken("/p?tokens=1"), "/p?tokens=1");
}

}  // namespace
}  // namespace space::ingress
