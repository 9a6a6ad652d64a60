#include "console/console.h"

#include <gtest/gtest.h>

#include "console/console_assets.h"

namespace space::console {
namespace {

class RecordingResponder : public api::Responder {
 public:
  void Send(int s, std::string_view type, std::string b) override {
    status = s;
    content_type = type;
    body = std::move(b);
  }
  Status StartStream(int, std::string_view) override { return Internal("not here"); }
  Status Write(std::string_view) override { return Internal("not here"); }
  std::string Header(const std::string& name) const {
    for (const auto& [n, v] : extra_headers_) {
      if (n == name) return v;
    }
    return "";
  }
  int status = 0;
  std::string content_type, body;
};

api::Request Get(std::string path) {
  api::Request r;
  r.method = "GET";
  r.path = std::move(path);
  return r;
}

TEST(ConsoleTest, TheBundleIsBuiltIn) {
  auto assets = Assets();
  ASSERT_EQ(assets.size(), 3u);
  for (const Asset& a : assets) EXPECT_GT(a.data.size(), 100u) << a.name;
  EXPECT_NE(assets[0].data.find("/console/app.js"), std::string_view::npos);
}

TEST(ConsoleTest, ServesEachFileWithItsPolicy) {
  for (const char* path : {"/console", "/console/", "/console/app.js", "/console/app.css"}) {
    RecordingResponder res;
    ASSERT_TRUE(Serve(Get(path), res)) << path;
    EXPECT_EQ(res.status, 200) << path;
    EXPECT_EQ(res.Header("Content-Security-Policy"), kContentSecurityPolicy);
    EXPECT_EQ(res.Header("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(res.Header("X-Frame-Options"), "DENY");
  }
  RecordingResponder res;
  ASSERT_TRUE(Serve(Get("/console/app.js"), res));
  EXPECT_EQ(res.content_type, "text/javascript; charset=utf-8");
}

TEST(ConsoleTest, TheIndexCarriesNoInlineScript) {
  for (const Asset& a : Assets()) {
    if (a.name != "index.html") continue;
    std::string html(a.data);
    size_t at = 0;
    while ((at = html.find("<script", at)) != std::string::npos) {
      size_t close = html.find('>', at);
      ASSERT_NE(close, std::string::npos);
      EXPECT_NE(html.substr(at, close - at).find("src="), std::string::npos) << "an inline <script> in index.html";
      EXPECT_EQ(html.compare(close + 1, 9, "</script>"), 0) << "a <script src> with a body";
      at = close;
    }
    EXPECT_EQ(html.find("http://"), std::string::npos);
    EXPECT_EQ(html.find("https://"), std::string::npos);
  }
}

TEST(ConsoleTest, OtherPathsAreNotItsAndUnknownFilesAre404) {
  RecordingResponder res;
  EXPECT_FALSE(Serve(Get("/v1/sandboxes"), res));
  EXPECT_FALSE(Serve(Get("/consoles"), res));
  EXPECT_EQ(res.status, 0);
  ASSERT_TRUE(Serve(Get("/console/../../etc/passwd"), res));
  EXPECT_EQ(res.status, 404);
  api::Request post = Get("/console");
  post.method = "POST";
  RecordingResponder res2;
  ASSERT_TRUE(Serve(post, res2));
  EXPECT_EQ(res2.status, 400);
  RecordingResponder root;
  ASSERT_TRUE(Serve(Get("/"), root));
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.Header("Location"), "/console");
}

}  // namespace
}  // namespace space::console
