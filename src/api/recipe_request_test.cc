#include "api/recipe_request.h"

#include <gtest/gtest.h>

namespace space::api {
namespace {

const std::string kDigest = "sha256:" + std::string(64, 'a');

TEST(RecipeRequestTest, TemplateRefs) {
  auto plain = ParseTemplateRef("base");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->name, "base");
  EXPECT_EQ(plain->digest, "");
  auto pinned = ParseTemplateRef("py@" + kDigest);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->name, "py");
  EXPECT_EQ(pinned->digest, kDigest);
  for (const std::string& bad :
       std::vector<std::string>{"", "Py", "py@", "py@sha256:abc", "py@md5:" + std::string(64, 'a'),
                                "py@sha256:" + std::string(64, 'A'), "@" + kDigest, "a/b"}) {
    EXPECT_FALSE(ParseTemplateRef(bad).ok()) << bad;
  }
}

TEST(RecipeRequestTest, ParsesEveryStep) {
  auto body = nlohmann::json::parse(R"({"name": "app", "from": "busybox", "steps": [
      {"run": "echo hi > /hello"}, {"env": {"GREETING": "hi"}}, {"workdir": "/app"}, {"user": "user"},
      {"copy": {"src": "app/", "dest": "/app"}}], "start": "serve", "ready": "true",
      "egress_profiles": ["debian"], "no_cache": true})");
  auto r = ParseRecipeJson(body, "context-bytes");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "app");
  EXPECT_EQ(r->from, "busybox");
  ASSERT_EQ(r->steps.size(), 5u);
  EXPECT_EQ(r->steps[0].kind, node::StepKind::kRun);
  EXPECT_EQ(r->steps[1].env.at("GREETING"), "hi");
  EXPECT_EQ(r->steps[2].value, "/app");
  EXPECT_EQ(r->steps[3].value, "user");
  EXPECT_EQ(r->steps[4].src, "app/");
  EXPECT_EQ(r->steps[4].dest, "/app");
  EXPECT_EQ(r->start, "serve");
  EXPECT_TRUE(r->no_cache);
  EXPECT_EQ(r->egress_profiles, std::vector<std::string>{"debian"});
}

TEST(RecipeRequestTest, ADockerfileIsTheRecipeItSays) {
  auto body =
      nlohmann::json::parse(R"({"name": "app", "dockerfile": "FROM busybox\nARG V=1\nRUN echo $V > /v\nCMD serve\n",
      "build_args": {"V": "2"}, "no_cache": true})");
  auto r = ParseRecipeJson(body, "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "app");
  EXPECT_EQ(r->from, "busybox");
  ASSERT_EQ(r->steps.size(), 1u);
  EXPECT_EQ(r->steps[0].kind, node::StepKind::kRun);
  EXPECT_EQ(r->steps[0].command, "echo 2 > /v");
  EXPECT_EQ(r->start, "serve");
  EXPECT_TRUE(r->no_cache);
}

TEST(RecipeRequestTest, RefusesBadRecipes) {
  const std::string big(node::kMaxCommandBytes + 1, 'x');
  nlohmann::json many = nlohmann::json::array();
  for (size_t i = 0; i <= node::kMaxRecipeSteps; ++i) many.push_back({{"run", "true"}});
  struct Case {
    const char* what;
    nlohmann::json body;
  } cases[] = {
      {"no name", {{"from", "base"}}},
      {"bad name", {{"name", "A B"}}},
      {"unknown field", {{"name", "a"}, {"dockerfile_path", "x"}}},
      {"dockerfile and steps", {{"name", "a"}, {"dockerfile", "FROM base\n"}, {"steps", nlohmann::json::array()}}},
      {"dockerfile refused", {{"name", "a"}, {"dockerfile", "FROM base\nHEALTHCHECK CMD true\n"}}},
      {"build_args alone", {{"name", "a"}, {"build_args", {{"V", "1"}}}}},
      {"self", {{"name", "a"}, {"from", "a"}}},
      {"bad digest", {{"name", "a"}, {"from", "base@sha256:12"}}},
      {"steps not array", {{"name", "a"}, {"steps", "run"}}},
      {"two keys", {{"name", "a"}, {"steps", {{{"run", "x"}, {"env", {{"A", "1"}}}}}}}},
      {"unknown step", {{"name", "a"}, {"steps", {{{"expose", 80}}}}}},
      {"empty run", {{"name", "a"}, {"steps", {{{"run", ""}}}}}},
      {"long run", {{"name", "a"}, {"steps", {{{"run", big}}}}}},
      {"bad env name", {{"name", "a"}, {"steps", {{{"env", {{"1A", "x"}}}}}}}},
      {"relative workdir", {{"name", "a"}, {"steps", {{{"workdir", "app"}}}}}},
      {"dotdot workdir", {{"name", "a"}, {"steps", {{{"workdir", "/a/../.."}}}}}},
      {"bad user", {{"name", "a"}, {"steps", {{{"user", "a;rm"}}}}}},
      {"copy dest relative", {{"name", "a"}, {"steps", {{{"copy", {{"src", "x"}, {"dest", "y"}}}}}}}},
      {"copy src climbs", {{"name", "a"}, {"steps", {{{"copy", {{"src", "../x"}, {"dest", "/y"}}}}}}}},
      {"copy src absolute", {{"name", "a"}, {"steps", {{{"copy", {{"src", "/etc"}, {"dest", "/y"}}}}}}}},
      {"too many steps", {{"name", "a"}, {"steps", many}}},
      {"bad profile", {{"name", "a"}, {"egress_profiles", {"NO WAY"}}}},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(ParseRecipeJson(c.body, "ctx").ok()) << c.what;
  }
  // A copy without a context.
  EXPECT_FALSE(ParseRecipeJson({{"name", "a"}, {"steps", {{{"copy", {{"src", "x"}, {"dest", "/y"}}}}}}}, "").ok());
}

TEST(RecipeRequestTest, MultipartCarriesRecipeAndContext) {
  Request req;
  req.team = "t";
  req.headers["content-type"] = "multipart/form-data; boundary=XyZ";
  req.body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"recipe\"\r\n\r\n"
      "{\"name\": \"a\", \"from\": \"busybox\", \"steps\": [{\"copy\": {\"src\": \".\", \"dest\": \"/app\"}}]}\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"context\"; filename=\"c.tar\"\r\n\r\n"
      "TARBYTES\r\n--XyZ--\r\n";
  EXPECT_TRUE(IsRecipeRequest(req, nullptr));
  auto r = ParseRecipeRequest(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->team, "t");
  EXPECT_EQ(r->context, "TARBYTES");
  req.body = "--XyZ\r\nContent-Disposition: form-data; name=\"evil\"\r\n\r\nx\r\n--XyZ--\r\n";
  EXPECT_FALSE(ParseRecipeRequest(req).ok());
}

TEST(RecipeRequestTest, RecognizesRecipeBodies) {
  Request req;
  nlohmann::json builtin = {{"name", "base"}};
  nlohmann::json import = {{"name", "x"}, {"source", "/srv/x"}};
  nlohmann::json recipe = {{"name", "x"}, {"from", "base"}};
  EXPECT_FALSE(IsRecipeRequest(req, &builtin));
  EXPECT_FALSE(IsRecipeRequest(req, &import));
  EXPECT_TRUE(IsRecipeRequest(req, &recipe));
}

}  // namespace
}  // namespace space::api
