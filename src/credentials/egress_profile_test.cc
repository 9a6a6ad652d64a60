#include "credentials/egress_profile.h"

#include <gtest/gtest.h>

namespace space::credentials {
namespace {

using nlohmann::json;

json Allow(json rules) { return json{{"allow", std::move(rules)}}; }

TEST(ParseEgressProfile, ParsesApiExampleAndRoundTrips) {
  json body = json::parse(R"({"allow": [{"host": "api.github.com", "ports": [443]}, {"host": "*.example.org"},
      {"cidr": "203.0.113.0/24", "ports": [5432]}]})");
  auto p = ParseEgressProfile("dev", body);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rules.size(), 3u);
  EXPECT_EQ(p->rules[0].host, "api.github.com");
  EXPECT_EQ(p->rules[0].ports, std::vector<uint16_t>{443});
  EXPECT_TRUE(p->rules[1].ports.empty());
  EXPECT_EQ(p->rules[2].cidr, "203.0.113.0/24");
  json out = EgressProfileJson(*p);
  EXPECT_EQ(out["name"], "dev");
  EXPECT_EQ(out["allow"], body["allow"]);
  auto again = ParseEgressProfile("dev", json{{"allow", out["allow"]}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(EgressProfileJson(*again), out);
}

TEST(ParseEgressProfile, AcceptsGoodRules) {
  json max_ports = json::array();
  for (int i = 1; i <= 64; ++i) max_ports.push_back(i);
  json max_rules = json::array();
  for (int i = 0; i < 256; ++i) max_rules.push_back({{"host", "h" + std::to_string(i) + ".example.org"}});
  struct Case {
    json rules;
    std::string canonical_cidr = "";
  } cases[] = {
      {json::array()},
      {max_rules},
      {{{{"host", "a.b"}, {"ports", max_ports}}}},
      {{{{"host", "x"}, {"ports", {1, 65535}}}}},
      {{{{"cidr", "10.0.0.0/8"}}}, "10.0.0.0/8"},
      {{{{"cidr", "192.168.1.7/32"}}}, "192.168.1.7/32"},
      {{{{"cidr", "2001:DB8::/32"}}}, "2001:db8::/32"},
      {{{{"cidr", "2001:db8:0:0::1/128"}}}, "2001:db8::1/128"},
      {{{{"cidr", "169.255.0.0/16"}}}, "169.255.0.0/16"},
      {{{{"cidr", "fd12::/16"}}}, "fd12::/16"},
  };
  for (const auto& c : cases) {
    auto p = ParseEgressProfile("p", Allow(c.rules));
    ASSERT_TRUE(p.ok()) << c.rules.dump().substr(0, 100) << ": " << p.status().ToString();
    if (!c.canonical_cidr.empty()) {
      EXPECT_EQ(p->rules[0].cidr, c.canonical_cidr);
    }
  }
}

TEST(ParseEgressProfile, RefusesEachBadCase) {
  json too_many_ports = json::array();
  for (int i = 1; i <= 65; ++i) too_many_ports.push_back(i);
  json too_many_rules = json::array();
  for (int i = 0; i < 257; ++i) too_many_rules.push_back({{"host", "a.example.org"}});
  struct Case {
    const char* expect;  // substring of the error
    json body;
    std::string name = "p";
  } cases[] = {
      {"name", Allow(json::array()), "Bad Name"},
      {"JSON object", json::array()},
      {"allow: is required", json::object()},
      {"unknown field \"deny\"", json{{"allow", json::array()}, {"deny", json::array()}}},
      {"allow: must be an array", Allow("x")},
      {"at most 256", Allow(too_many_rules)},
      {"allow[0]: must be an object", Allow({"a.com"})},
      {"exactly one", Allow({{{"host", "a.com"}, {"cidr", "10.0.0.0/8"}}})},
      {"exactly one", Allow({{{"ports", {443}}}})},
      {"unknown field \"port\"", Allow({{{"host", "a.com"}, {"port", 443}}})},
      {"allow[1].host", Allow({{{"host", "a.com"}}, {{"host", "A.com"}}})},
      {"allow[0].host", Allow({{{"host", "*.com"}}})},
      {"allow[0].host", Allow({{{"host", "10.0.0.1"}}})},
      {"allow[0].host", Allow({{{"host", "localhost"}}})},
      {"allow[0].host", Allow({{{"host", "metadata.google.internal"}}})},
      {"allow[0].host", Allow({{{"host", 5}}})},
      {"ports", Allow({{{"host", "a.com"}, {"ports", json::array()}}})},
      {"ports", Allow({{{"host", "a.com"}, {"ports", too_many_ports}}})},
      {"1..65535", Allow({{{"host", "a.com"}, {"ports", {0}}}})},
      {"1..65535", Allow({{{"host", "a.com"}, {"ports", {65536}}}})},
      {"1..65535", Allow({{{"host", "a.com"}, {"ports", {-1}}}})},
      {"1..65535", Allow({{{"host", "a.com"}, {"ports", {"443"}}}})},
      {"1..65535", Allow({{{"host", "a.com"}, {"ports", {443.0}}}})},
      {"duplicate port", Allow({{{"host", "a.com"}, {"ports", {443, 443}}}})},
      {"address/prefix", Allow({{{"cidr", "10.0.0.1"}}})},
      {"prefix length", Allow({{{"cidr", "10.0.0.0/"}}})},
      {"prefix length", Allow({{{"cidr", "10.0.0.0/08"}}})},
      {"prefix length", Allow({{{"cidr", "10.0.0.0/-8"}}})},
      {"0..32", Allow({{{"cidr", "10.0.0.0/33"}}})},
      {"0..128", Allow({{{"cidr", "2001:db8::/129"}}})},
      {"not an IPv4 or IPv6", Allow({{{"cidr", "10.0.0/8"}}})},
      {"not an IPv4 or IPv6", Allow({{{"cidr", "example.org/8"}}})},
      {"not an IPv4 or IPv6", Allow({{{"cidr", "010.0.0.0/8"}}})},
      {"bits beyond", Allow({{{"cidr", "10.0.0.1/8"}}})},
      {"bits beyond", Allow({{{"cidr", "2001:db8::1/64"}}})},
      {"every address", Allow({{{"cidr", "0.0.0.0/0"}}})},
      {"every address", Allow({{{"cidr", "::/0"}}})},
      {"this network", Allow({{{"cidr", "0.0.0.0/1"}}})},
      {"loopback", Allow({{{"cidr", "127.0.0.1/32"}}})},
      {"loopback", Allow({{{"cidr", "::1/128"}}})},
      {"loopback", Allow({{{"cidr", "64.0.0.0/2"}}})},
      {"metadata address 169.254.169.254", Allow({{{"cidr", "169.254.169.254/32"}}})},
      {"metadata address 169.254.169.254", Allow({{{"cidr", "169.254.0.0/16"}}})},
      {"link-local", Allow({{{"cidr", "169.254.1.0/24"}}})},
      {"link-local", Allow({{{"cidr", "fe80::/64"}}})},
      {"metadata address fd00:ec2::254", Allow({{{"cidr", "fd00::/8"}}})},
      {"multicast", Allow({{{"cidr", "239.0.0.0/8"}}})},
      {"multicast", Allow({{{"cidr", "ff02::/16"}}})},
      {"broadcast", Allow({{{"cidr", "255.255.255.255/32"}}})},
      {"IPv4-mapped", Allow({{{"cidr", "::ffff:203.0.113.0/120"}}})},
      {"cidr: must be a string", Allow({{{"cidr", 10}}})},
  };
  for (const auto& c : cases) {
    auto p = ParseEgressProfile(c.name, c.body);
    ASSERT_FALSE(p.ok()) << c.expect;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.expect), std::string::npos) << c.expect << " vs " << p.status().message();
  }
}

TEST(Allows, Table) {
  auto dev = ParseEgressProfile("dev", json::parse(R"({"allow": [{"host": "api.github.com", "ports": [443]},
      {"host": "*.example.org"}, {"cidr": "203.0.113.0/24", "ports": [5432]}]})"));
  auto v6 = ParseEgressProfile("v6", json::parse(R"({"allow": [{"cidr": "2001:db8::/32"}]})"));
  ASSERT_TRUE(dev.ok() && v6.ok());
  std::vector<EgressProfile> both = {*dev, *v6};
  struct Case {
    std::string host;
    uint16_t port;
    bool want;
  } cases[] = {
      {"api.github.com", 443, true},      {"api.github.com", 80, false},
      {"API.GITHUB.COM.", 443, true},     {"github.com", 443, false},
      {"a.example.org", 80, true},        {"a.b.example.org", 443, true},
      {"a.example.org", 8080, false},     {"example.org", 443, false},
      {"evil-example.org", 443, false},   {"203.0.113.9", 5432, true},
      {"203.0.113.9", 443, false},        {"203.0.114.9", 5432, false},
      {"::ffff:203.0.113.9", 5432, true}, {"2001:db8::5", 443, true},
      {"[2001:db8::5]", 80, true},        {"2001:db9::5", 443, false},
      {"2001:db8::5", 22, false},         {"127.0.0.1", 443, false},
      {"169.254.169.254", 80, false},     {"", 443, false},
      {"api.github.com", 0, false},
  };
  for (const auto& c : cases) EXPECT_EQ(Allows(both, c.host, c.port), c.want) << c.host << ":" << c.port;
  EXPECT_FALSE(Allows({}, "api.github.com", 443)) << "no profile means no egress";
}

TEST(Allows, IpLiteralsNeverMatchHostRulesAndHandBuiltRulesFailClosed) {
  EgressProfile p{"p",
                  {EgressRule{"a.example.org", {}, ""}, EgressRule{"", {}, "10.0.0.0"},
                   EgressRule{"", {}, "10.0.0.0/x"}, EgressRule{"", {}, "10.0.0.0/0"}}};
  EXPECT_FALSE(Allows({p}, "10.1.2.3", 443));
  EXPECT_TRUE(Allows({p}, "a.example.org", 443));
}

}  // namespace
}  // namespace space::credentials
