#include "api/dockerfile.h"

#include <gtest/gtest.h>

namespace space::api {
namespace {

TEST(DockerfileTest, TranslatesTheSubset) {
  auto r = DockerfileToRecipe(R"(# syntax=docker/dockerfile:1
ARG GREETING=hello
FROM busybox
ENV A=1 B="two words"
ENV LEGACY some value
WORKDIR /app
WORKDIR sub
RUN echo $GREETING > /greeting && \
    echo done
RUN ["sh", "-c", "echo it's"]
COPY ./app/ .
ADD data.txt /data/
USER user
CMD ["sleep", "infinity"]
)",
                              {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& j = *r;
  EXPECT_EQ(j["from"], "busybox");
  const auto& s = j["steps"];
  ASSERT_EQ(s.size(), 9u) << j.dump();
  EXPECT_EQ(s[0]["env"]["B"], "two words");
  EXPECT_EQ(s[1]["env"]["LEGACY"], "some value");
  EXPECT_EQ(s[2]["workdir"], "/app");
  EXPECT_EQ(s[3]["workdir"], "/app/sub");
  EXPECT_EQ(s[4]["run"], "echo hello > /greeting && echo done");
  EXPECT_EQ(s[5]["run"], "sh -c 'echo it'\\''s'");
  EXPECT_EQ(s[6]["copy"]["src"], "app/");
  EXPECT_EQ(s[6]["copy"]["dest"], "/app/sub/.");
  EXPECT_EQ(s[7]["copy"]["dest"], "/data/");
  EXPECT_EQ(s[8]["user"], "user");
  EXPECT_EQ(j["start"], "sleep infinity");
  EXPECT_TRUE(RecipeNeedsContext(j));
}

TEST(DockerfileTest, BuildArgsWin) {
  auto r = DockerfileToRecipe("FROM base\nARG V=1\nRUN echo ${V} $V $OTHER\n", {{"V", "2"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["steps"][0]["run"], "echo 2 2 $OTHER");
  EXPECT_FALSE(RecipeNeedsContext(*r));
}

TEST(DockerfileTest, RefusesWhatItCannotDoWithTheLine) {
  struct Case {
    const char* text;
    const char* line;
  } cases[] = {
      {"FROM base\nEXPOSE 80\n", "line 2"},
      {"FROM base\n\n\nENTRYPOINT [\"x\"]\n", "line 4"},
      {"FROM base\nHEALTHCHECK CMD true\n", "line 2"},
      {"FROM base AS build\n", "line 1"},
      {"FROM base\nFROM busybox\n", "line 2"},
      {"FROM python:3.12\n", "line 1"},
      {"FROM base\nADD https://example.com/x /x\n", "line 2"},
      {"FROM base\nCOPY --chown=1 a /a\n", "line 2"},
      {"FROM base\nCOPY *.py /app/\n", "line 2"},
      {"FROM base\nCOPY a b /app\n", "line 2"},
      {"RUN true\n", "line 1"},
      {"FROM base\nRUN [\"unterminated\n", "line 2"},
      {"FROM base\nENV\n", "line 2"},
  };
  for (const auto& c : cases) {
    auto r = DockerfileToRecipe(c.text, {});
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.line), std::string::npos) << c.text << ": " << r.status().message();
  }
  EXPECT_FALSE(DockerfileToRecipe("# nothing\n", {}).ok());
}

}  // namespace
}  // namespace space::api
