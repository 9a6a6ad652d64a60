#include "node/gateway_process.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace space::node {
namespace {

std::shared_ptr<const gateway::SandboxEgress> Sandbox(const std::string& id, const std::string& team,
                                                      std::vector<std::string> creds) {
  auto s = std::make_shared<gateway::SandboxEgress>();
  s->sandbox_id = id;
  s->team = team;
  for (auto& name : creds) {
    gateway::SandboxEgress::Credential c;
    c.spec.name = name;
    c.spec.hosts = {"api.example.com"};
    c.placeholder = "space-cred-00000000000000000000000000000000";
    s->credentials.push_back(std::move(c));
  }
  return s;
}

in_addr_t Addr(const char* text) {
  in_addr a{};
  ::inet_pton(AF_INET, text, &a);
  return a.s_addr;
}

TEST(GatewayProcessTest, SecretRequestsOnlyForCredentialsOfRegisteredSandboxesOfTheTeam) {
  RegisteredSandboxes registered = {
      {Addr("100.64.0.2"), Sandbox("sbx_a", "team_a", {"tok", "db"})},
      {Addr("100.64.0.6"), Sandbox("sbx_b", "team_b", {"other"})},
      {Addr("100.64.0.10"), Sandbox("sbx_c", "team_a", {})},
  };
  struct Case {
    const char* team;
    const char* name;
    bool allowed;
  };
  const Case cases[] = {
      {"team_a", "tok", true},
      {"team_a", "db", true},
      {"team_b", "other", true},
      {"team_b", "tok", false},    // bound, but to another team's sandbox
      {"team_a", "other", false},  // another team's credential name
      {"team_a", "unbound", false},
      {"team_c", "tok", false},
      {"", "", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(SecretRequestAllowed(registered, c.team, c.name), c.allowed) << c.team << "/" << c.name;
  }
  // Once the only sandbox that had it is unregistered, the secret is out of reach.
  registered.erase(Addr("100.64.0.2"));
  EXPECT_FALSE(SecretRequestAllowed(registered, "team_a", "tok"));
  EXPECT_FALSE(SecretRequestAllowed({}, "team_a", "tok"));
}

TEST(GatewayProcessTest, SecretRateIsTheStrictestAmongSandboxesBindingTheCredential) {
  auto limited = [](const std::string& id, const std::string& team, int rate) {
    auto s = std::const_pointer_cast<gateway::SandboxEgress>(Sandbox(id, team, {"tok"}));
    s->credentials[0].spec.rate_limit_per_min = rate;
    return std::shared_ptr<const gateway::SandboxEgress>(s);
  };
  RegisteredSandboxes registered = {
      {Addr("100.64.0.2"), limited("sbx_a", "team_a", 0)},
      {Addr("100.64.0.6"), limited("sbx_b", "team_a", 30)},
      {Addr("100.64.0.10"), limited("sbx_c", "team_a", 5)},
      {Addr("100.64.0.14"), limited("sbx_d", "team_b", 1)},
  };
  EXPECT_EQ(SecretRateLimitPerMin(registered, "team_a", "tok"), 5);
  EXPECT_EQ(SecretRateLimitPerMin(registered, "team_b", "tok"), 1);
  EXPECT_EQ(SecretRateLimitPerMin(registered, "team_a", "other"), 0);
  EXPECT_EQ(SecretRateLimitPerMin(registered, "team_c", "tok"), 0);
  registered.erase(Addr("100.64.0.10"));
  EXPECT_EQ(SecretRateLimitPerMin(registered, "team_a", "tok"), 30);
}

TEST(GatewayProcessTest, AuditRecordsOnlyForSandboxesTheNodeRegistered) {
  RegisteredSandboxes registered = {{Addr("100.64.0.2"), Sandbox("sbx_a", "team_a", {})}};
  std::deque<std::pair<std::string, std::string>> recent = {{"sbx_old", "team_b"}};
  EXPECT_TRUE(AuditOwnerKnown(registered, recent, "sbx_a", "team_a"));
  EXPECT_TRUE(AuditOwnerKnown(registered, recent, "sbx_old", "team_b"));  // a connection outlived it
  EXPECT_FALSE(AuditOwnerKnown(registered, recent, "sbx_a", "team_b"));   // forged team
  EXPECT_FALSE(AuditOwnerKnown(registered, recent, "sbx_old", "team_a"));
  EXPECT_FALSE(AuditOwnerKnown(registered, recent, "sbx_never", "team_a"));
}

}  // namespace
}  // namespace space::node
