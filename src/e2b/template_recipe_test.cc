#include "e2b/template_recipe.h"

#include <gtest/gtest.h>

#include "storage/context_tar.h"

namespace space::e2b {
namespace {

using nlohmann::json;

const std::string kHash(64, 'a');

std::string OneFileTar(const std::string& name, const std::string& data) {
  std::string tar = storage::UstarHeader(name, '0', 0644, 0, 0, data.size(), "");
  tar += data;
  tar.resize((tar.size() + 511) / 512 * 512, '\0');
  return tar + std::string(1024, '\0');
}

E2bBuildTarget Target() {
  E2bBuildTarget t;
  t.team = "default";
  t.name = "my-app";
  t.files[kHash] = OneFileTar("app/main.py", "print(1)\n");
  return t;
}

TEST(E2bTemplateRecipeTest, MapsTheSdkStepsOntoARecipe) {
  // As the SDK sends it for fromTemplate('base').runCmd(..).runCmd(.., {user:'root'})
  // .copy('app/', 'app', {mode: 0o755}).setEnvs(..).setWorkdir(..).setUser('user').setStartCmd(..).
  json body = json::parse(R"({
    "fromTemplate": "base", "force": false, "startCmd": "python3 -m http.server", "readyCmd": "sleep 1",
    "steps": [
      {"type": "WORKDIR", "args": ["/srv"], "force": false},
      {"type": "USER", "args": ["user"], "force": false},
      {"type": "RUN", "args": ["echo hi"], "force": false},
      {"type": "RUN", "args": ["apt-get update", "root"], "force": false},
      {"type": "COPY", "args": ["./app/", "app", "", "0755"], "force": false, "filesHash": ")" +
                          kHash + R"("},
      {"type": "ENV", "args": ["A", "1", "B", "two words"], "force": false}
    ]})");
  auto r = RecipeFromE2bBuild(body, Target());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->from, "base");
  EXPECT_EQ(r->name, "my-app");
  EXPECT_EQ(r->start, "python3 -m http.server");
  EXPECT_EQ(r->ready, "sleep 1");
  EXPECT_FALSE(r->no_cache);
  std::vector<std::string> kinds;
  for (const auto& s : r->steps) kinds.push_back(node::StepJson(s).dump());
  ASSERT_EQ(r->steps.size(), 11u) << testing::PrintToString(kinds);
  EXPECT_EQ(r->steps[0].value, "/srv");
  EXPECT_EQ(r->steps[1].value, "user");
  EXPECT_EQ(r->steps[2].command, "echo hi");
  // A RUN with a user: that user for the one step, then back.
  EXPECT_EQ(r->steps[3].value, "root");
  EXPECT_EQ(r->steps[4].command, "apt-get update");
  EXPECT_EQ(r->steps[5].value, "user");
  // COPY: src without ./ and /, dest below the workdir, then owner (the current user) and mode as root.
  EXPECT_EQ(r->steps[6].kind, node::StepKind::kCopy);
  EXPECT_EQ(r->steps[6].src, "app");
  EXPECT_EQ(r->steps[6].dest, "/srv/app");
  EXPECT_EQ(r->steps[7].value, "root");
  EXPECT_EQ(r->steps[8].command, "chown -R 'user:user' '/srv/app' && chmod -R 0755 '/srv/app'");
  EXPECT_EQ(r->steps[9].value, "user");
  EXPECT_EQ(r->steps[10].env.at("B"), "two words");
  auto members = storage::ListTar(r->context);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ((*members)[0].path, "app/main.py");
  // force on any step: no layer is taken from the cache.
  body["steps"][2]["force"] = true;
  EXPECT_TRUE(RecipeFromE2bBuild(body, Target())->no_cache);
}

TEST(E2bTemplateRecipeTest, RefusesWhatDoesNotMapWithAReason) {
  struct Case {
    const char* what;
    std::string body;
    const char* says;
  };
  const Case cases[] = {
      {"image", R"({"fromImage": "python:3.12", "steps": []})", "fromImage"},
      {"no parent", R"({"steps": []})", "fromTemplate is required"},
      {"bad parent", R"({"fromTemplate": "../etc"})", "not a template name"},
      {"glob",
       R"({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["*.txt", "/x"], "filesHash": ")" + kHash +
           R"("}]})",
       "glob"},
      {"not uploaded",
       R"({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["app", "/app"], "filesHash": ")" +
           std::string(64, 'b') + R"("}]})",
       "not uploaded"},
      {"no hash", R"({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["app", "/app"]}]})", "filesHash"},
      {"escape",
       R"({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["../../etc", "/x"], "filesHash": ")" + kHash +
           R"("}]})",
       "src"},
      {"relative without workdir",
       R"({"fromTemplate": "base", "steps": [)" +
           std::string(R"({"type": "COPY", "args": ["app", "rel"], "filesHash": ")") + kHash + R"("}]})",
       "relative"},
      {"bad mode",
       R"({"fromTemplate": "base", "steps": [{"type": "COPY", "args": ["app", "/app", "", "0999"], "filesHash": ")" +
           kHash + R"("}]})",
       "octal"},
      {"odd env", R"({"fromTemplate": "base", "steps": [{"type": "ENV", "args": ["A"]}]})", "pairs"},
      {"bad env name", R"({"fromTemplate": "base", "steps": [{"type": "ENV", "args": ["A=B", "1"]}]})", "not a name"},
      {"unknown type", R"({"fromTemplate": "base", "steps": [{"type": "HEALTHCHECK", "args": []}]})",
       "not one SPACE builds"},
      {"bad user", R"({"fromTemplate": "base", "steps": [{"type": "USER", "args": ["-rf"]}]})", "USER"},
      {"args not strings", R"({"fromTemplate": "base", "steps": [{"type": "RUN", "args": [1]}]})", "strings"},
      {"steps not array", R"({"fromTemplate": "base", "steps": {}})", "array"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto j = json::parse(c.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << c.body;
    auto r = RecipeFromE2bBuild(j, Target());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
  // More steps than a recipe may have.
  json many = {{"fromTemplate", "base"}, {"steps", json::array()}};
  for (int i = 0; i < 200; ++i) many["steps"].push_back({{"type", "RUN"}, {"args", {"true"}}});
  EXPECT_FALSE(RecipeFromE2bBuild(many, Target()).ok());
}

}  // namespace
}  // namespace space::e2b
