#include "credentials/credential.h"

#include <gtest/gtest.h>

#include <set>

namespace space::credentials {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1767225600000;  // 2026-01-01T00:00:00Z

json Good() { return json{{"secret", "sk-test-123"}, {"hosts", {"api.openai.com"}}}; }
json With(const char* key, json value) {
  json j = Good();
  j[key] = std::move(value);
  return j;
}
json Without(const char* key) {
  json j = Good();
  j.erase(key);
  return j;
}

TEST(ParseCredentialRequest, DefaultsAndFullRequest) {
  std::string secret;
  auto spec = ParseCredentialRequest("openai", Good(), &secret, kNow);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(secret, "sk-test-123");
  EXPECT_EQ(spec->header, "Authorization");
  EXPECT_EQ(spec->format, "Bearer {secret}");
  EXPECT_EQ(spec->scope, "team");
  EXPECT_EQ(spec->env, "");
  EXPECT_EQ(spec->expires_at_ms, 0);
  EXPECT_EQ(spec->rate_limit_per_min, 0);

  json full = json::parse(R"({"secret": "ghp_x", "hosts": ["api.github.com", "*.githubusercontent.com"],
      "header": "X-Api-Key", "format": "token {secret}", "env": "GITHUB_TOKEN", "scope": "sandbox:sbx_7",
      "expires_at": "2026-12-01T00:00:00Z", "rate_limit_per_min": 60})");
  spec = ParseCredentialRequest("gh.token_1", full, &secret, kNow);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(secret, "ghp_x");
  EXPECT_EQ(spec->hosts, (std::vector<std::string>{"api.github.com", "*.githubusercontent.com"}));
  EXPECT_EQ(spec->header, "X-Api-Key");
  EXPECT_EQ(spec->format, "token {secret}");
  EXPECT_EQ(spec->env, "GITHUB_TOKEN");
  EXPECT_EQ(spec->scope, "sandbox:sbx_7");
  EXPECT_EQ(spec->expires_at_ms, 1796083200000);
  EXPECT_EQ(spec->rate_limit_per_min, 60);
}

TEST(ParseCredentialRequest, AcceptsEachGoodFieldValue) {
  struct Case {
    const char* key;
    json value;
  } cases[] = {
      {"secret", std::string(16384, 'a')},
      {"secret", "tab\tinside"},
      {"secret", "ünïcode"},
      {"hosts", {"a.b"}},
      {"hosts", {"*.example.org", "example.org"}},
      {"hosts", {"xn--bcher-kva.example"}},
      {"header", "x-custom_header.1"},
      {"header", "Proxy-Authorization"},
      {"format", "{secret}"},
      {"format", "Basic {secret}"},
      {"env", ""},
      {"env", "_X"},
      {"env", "OPENAI_API_KEY"},
      {"env", nullptr},
      {"scope", "team"},
      {"scope", "metadata:project=alpha"},
      {"scope", "metadata:k=a=b"},
      {"scope", "metadata:k="},
      {"expires_at", "2026-01-01T00:00:00.001Z"},
      {"expires_at", "2028-02-29T23:59:59.123456789Z"},
      {"expires_at", nullptr},
      {"rate_limit_per_min", 0},
      {"rate_limit_per_min", 100000},
  };
  for (const auto& c : cases) {
    std::string secret;
    auto spec = ParseCredentialRequest("n", With(c.key, c.value), &secret, kNow);
    EXPECT_TRUE(spec.ok()) << c.key << "=" << c.value.dump() << ": " << spec.status().ToString();
  }
}

TEST(ParseCredentialRequest, RefusesEachBadField) {
  json hosts65 = json::array();
  for (int i = 0; i < 65; ++i) hosts65.push_back("h" + std::to_string(i) + ".example.org");
  struct Case {
    const char* field;  // must appear in the error
    json body;
    std::string name = "good";
  } cases[] = {
      {"name", Good(), ""},
      {"name", Good(), "Upper"},
      {"name", Good(), "-lead"},
      {"name", Good(), std::string(64, 'a')},
      {"name", Good(), "a/b"},
      {"secret", Without("secret")},
      {"secret", With("secret", "")},
      {"secret", With("secret", 42)},
      {"secret", With("secret", std::string(16385, 'a'))},
      {"secret", With("secret", std::string("a\0b", 3))},
      {"secret", With("secret", "a\r\nX-Evil: 1")},
      {"secret", With("secret", nullptr)},
      {"hosts", Without("hosts")},
      {"hosts", With("hosts", json::array())},
      {"hosts", With("hosts", "a.com")},
      {"hosts", With("hosts", hosts65)},
      {"hosts", With("hosts", {"API.openai.com"})},
      {"hosts", With("hosts", {"*.com"})},
      {"hosts", With("hosts", {"a.*.com"})},
      {"hosts", With("hosts", {"*"})},
      {"hosts", With("hosts", {"1.2.3.4"})},
      {"hosts", With("hosts", {"a..com"})},
      {"hosts", With("hosts", {"a.com."})},
      {"hosts", With("hosts", {"-a.com"})},
      {"hosts", With("hosts", {"a_b.com"})},
      {"hosts", With("hosts", {"a.com", "a.com"})},
      {"hosts", With("hosts", {std::string(254, 'a')})},
      {"hosts", With("hosts", {std::string(64, 'a') + ".com"})},
      {"hosts", With("hosts", {"localhost"})},
      {"hosts", With("hosts", {"x.localhost"})},
      {"hosts", With("hosts", {1})},
      {"header", With("header", "")},
      {"header", With("header", "Bad Header")},
      {"header", With("header", "a:b")},
      {"header", With("header", std::string(65, 'x'))},
      {"header", With("header", "Host")},
      {"header", With("header", "content-length")},
      {"header", With("header", 5)},
      {"format", With("format", "Bearer")},
      {"format", With("format", "{secret}{secret}")},
      {"format", With("format", "{secret}\r\n")},
      {"format", With("format", "{SECRET}")},
      {"env", With("env", "1ABC")},
      {"env", With("env", "A-B")},
      {"env", With("env", "A B")},
      {"env", With("env", true)},
      {"scope", With("scope", "")},
      {"scope", With("scope", "org")},
      {"scope", With("scope", "sandbox:")},
      {"scope", With("scope", "sandbox:a/b")},
      {"scope", With("scope", "metadata:novalue")},
      {"scope", With("scope", "metadata:=v")},
      {"scope", With("scope", "Team")},
      {"expires_at", With("expires_at", "2025-12-31T23:59:59Z")},
      {"expires_at", With("expires_at", "2026-01-01T00:00:00Z")},
      {"expires_at", With("expires_at", "2026-12-01")},
      {"expires_at", With("expires_at", "2026-12-01T00:00:00+01:00")},
      {"expires_at", With("expires_at", "2026-12-01 00:00:00Z")},
      {"expires_at", With("expires_at", "2026-13-01T00:00:00Z")},
      {"expires_at", With("expires_at", "2027-02-29T00:00:00Z")},
      {"expires_at", With("expires_at", "2026-12-01T24:00:00Z")},
      {"expires_at", With("expires_at", "2026-12-01T00:00:60Z")},
      {"expires_at", With("expires_at", "2026-12-01T00:00:00.Z")},
      {"expires_at", With("expires_at", "2026-12-01T00:00:00.1234567890Z")},
      {"expires_at", With("expires_at", 1796083200000)},
      {"rate_limit_per_min", With("rate_limit_per_min", -1)},
      {"rate_limit_per_min", With("rate_limit_per_min", 100001)},
      {"rate_limit_per_min", With("rate_limit_per_min", 1.5)},
      {"rate_limit_per_min", With("rate_limit_per_min", "10")},
      {"rate_limit_per_min", With("rate_limit_per_min", true)},
      {"rate_limit_per_min", With("rate_limit_per_min", json(uint64_t{1} << 63))},
      {"unknown field \"name\"", With("name", "good")},
      {"unknown field \"Secret\"", With("Secret", "x")},
      {"JSON object", json::array({1})},
  };
  for (const auto& c : cases) {
    std::string secret = "stale";
    auto spec = ParseCredentialRequest(c.name, c.body, &secret, kNow);
    ASSERT_FALSE(spec.ok()) << c.field << " in " << c.body.dump().substr(0, 120);
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find(c.field), std::string::npos) << spec.status().message();
    EXPECT_EQ(secret, "") << "no secret is handed out on failure";
    EXPECT_EQ(spec.status().message().find("sk-test-123"), std::string::npos) << "errors never quote the secret";
  }
}

TEST(ParseRfc3339Utc, ConvertsToEpochMs) {
  struct Case {
    const char* text;
    int64_t ms;
  } cases[] = {{"1970-01-01T00:00:00Z", 0},
               {"2026-01-01T00:00:00Z", kNow},
               {"2026-01-01T00:00:00.5Z", kNow + 500},
               {"2026-01-01T00:00:01.0429Z", kNow + 1042},
               {"2024-02-29T12:00:00Z", 1709208000000},
               {"2000-03-01T00:00:00Z", 951868800000}};
  for (const auto& c : cases) {
    auto ms = ParseRfc3339Utc(c.text);
    ASSERT_TRUE(ms.ok()) << c.text;
    EXPECT_EQ(*ms, c.ms) << c.text;
  }
}

TEST(CredentialJson, RendersPublicViewWithoutSecret) {
  std::string secret;
  json body = Good();
  body["secret"] = "sk-very-secret-value";
  body["env"] = "OPENAI_API_KEY";
  body["expires_at"] = "2026-12-01T00:00:00Z";
  auto spec = ParseCredentialRequest("openai", body, &secret, kNow);
  ASSERT_TRUE(spec.ok());
  json j = CredentialJson(*spec, kNow);
  EXPECT_EQ(j.dump().find("sk-very-secret-value"), std::string::npos);
  EXPECT_FALSE(j.contains("secret"));
  EXPECT_EQ(j["name"], "openai");
  EXPECT_EQ(j["hosts"], json({"api.openai.com"}));
  EXPECT_EQ(j["env"], "OPENAI_API_KEY");
  EXPECT_EQ(j["expires_at"], "2026-12-01T00:00:00.000Z");
  EXPECT_EQ(j["created_at"], "2026-01-01T00:00:00.000Z");
  spec->expires_at_ms = 0;
  spec->env.clear();
  j = CredentialJson(*spec, kNow);
  EXPECT_TRUE(j["expires_at"].is_null());
  EXPECT_TRUE(j["env"].is_null());
}

TEST(ScopeMatches, Table) {
  std::map<std::string, std::string> md = {{"project", "alpha"}, {"empty", ""}};
  struct Case {
    std::string scope, sandbox;
    bool want;
  } cases[] = {
      {"team", "sbx_1", true},
      {"team", "", true},
      {"sandbox:sbx_1", "sbx_1", true},
      {"sandbox:sbx_1", "sbx_2", false},
      {"sandbox:sbx_1", "sbx_10", false},
      {"sandbox:sbx_1", "", false},
      {"metadata:project=alpha", "x", true},
      {"metadata:project=beta", "x", false},
      {"metadata:project=alph", "x", false},
      {"metadata:other=alpha", "x", false},
      {"metadata:empty=", "x", true},
      {"bogus", "x", false},
      {"metadata:project", "x", false},
      {"", "x", false},
  };
  for (const auto& c : cases) {
    CredentialSpec spec;
    spec.scope = c.scope;
    EXPECT_EQ(ScopeMatches(spec, c.sandbox, md), c.want) << c.scope << " vs " << c.sandbox;
  }
}

TEST(HostMatches, Table) {
  struct Case {
    const char* pattern;
    const char* host;
    bool want;
  } cases[] = {
      {"api.openai.com", "api.openai.com", true},
      {"api.openai.com", "API.OpenAI.com", true},
      {"api.openai.com", "api.openai.com.", true},
      {"api.openai.com.", "api.openai.com", true},
      {"api.openai.com", "openai.com", false},
      {"api.openai.com", "x.api.openai.com", false},
      {"api.openai.com", "api.openai.com.evil", false},
      {"*.example.org", "a.example.org", true},
      {"*.example.org", "a.b.example.org", true},
      {"*.example.org", "example.org", false},
      {"*.example.org", "evil-example.org", false},
      {"*.example.org", "example.org.evil.com", false},
      {"*.example.org", "A.EXAMPLE.ORG.", true},
      {"*.example.org", ".example.org", false},
      {"*.example.org", "a..example.org", false},
      {"*.example.org", "*.example.org", false},
      {"*.example.org", "a b.example.org", false},
      {"*.example.org", "", false},
      {"", "", false},
      {"example.org", "example.org:443", false},
  };
  for (const auto& c : cases) EXPECT_EQ(HostMatches(c.pattern, c.host), c.want) << c.pattern << " vs " << c.host;
}

TEST(NewPlaceholder, FormatAndUniqueness) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string p = NewPlaceholder();
    ASSERT_EQ(p.size(), 11u + 32u) << p;
    EXPECT_EQ(p.rfind("space-cred-", 0), 0u);
    EXPECT_EQ(p.find_first_not_of("0123456789abcdef", 11), std::string::npos) << p;
    EXPECT_TRUE(seen.insert(p).second) << "duplicate " << p;
  }
}

TEST(RateLimiter, ThreePerMinuteRefillsAfterSixtySeconds) {
  RateLimiter rl;
  const int64_t t0 = 1000000;
  EXPECT_TRUE(rl.Allow("cred", t0, 3));
  EXPECT_TRUE(rl.Allow("cred", t0 + 1, 3));
  EXPECT_TRUE(rl.Allow("cred", t0 + 2, 3));
  EXPECT_FALSE(rl.Allow("cred", t0 + 3, 3));
  EXPECT_TRUE(rl.Allow("other", t0 + 3, 3)) << "keys are independent";
  EXPECT_FALSE(rl.Allow("cred", t0 - 5000, 3)) << "a clock stepping back earns nothing";
  EXPECT_TRUE(rl.Allow("cred", t0 + 60000, 3));
  EXPECT_TRUE(rl.Allow("cred", t0 + 60001, 3));
  EXPECT_TRUE(rl.Allow("cred", t0 + 60002, 3));
  EXPECT_FALSE(rl.Allow("cred", t0 + 60003, 3));
}

TEST(RateLimiter, ZeroIsUnlimitedAndLongRunRateHolds) {
  RateLimiter rl;
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(rl.Allow("free", 0, 0));
  int allowed = 0;
  for (int64_t t = 0; t < 10 * 60000; t += 100) allowed += rl.Allow("k", t, 60);
  EXPECT_LE(allowed, 60 + 600);  // one burst plus one per second for ten minutes
  EXPECT_GE(allowed, 600);
}

TEST(RateLimiter, ForgetsIdleKeysWithoutChangingAnswers) {
  RateLimiter rl;
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(rl.Allow("k" + std::to_string(i), 0, 1));
  EXPECT_FALSE(rl.Allow("k1", 1, 1));
  EXPECT_TRUE(rl.Allow("k2", 120000, 1));  // triggers pruning; an idle bucket is full anyway
  EXPECT_FALSE(rl.Allow("k2", 120001, 1));
}

}  // namespace
}  // namespace space::credentials
