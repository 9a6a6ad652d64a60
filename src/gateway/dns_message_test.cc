#include "gateway/dns_message.h"

#include <arpa/inet.h>

#include <gtest/gtest.h>

namespace space::gateway {
namespace {

TEST(DnsMessageTest, QueryRoundTripsAndNxdomainKeepsQuestion) {
  std::string q = BuildDnsQuery(0x1234, "API.Example.org");
  auto parsed = ParseDnsQuery(q);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->id, 0x1234);
  EXPECT_EQ(parsed->name, "api.example.org");
  EXPECT_EQ(parsed->qtype, 1);
  std::string nx = DnsErrorResponse(q, *parsed, 3);
  EXPECT_EQ(ParseDnsAnswerA(nx, 0x1234).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ParseDnsQuery(nx).ok());  // a response is not a query
}

TEST(DnsMessageTest, AnswerWithCompressedNamesYieldsAddresses) {
  std::string m = BuildDnsQuery(7, "a.test");
  m[2] = static_cast<char>(0x81);  // QR, RD
  m[3] = static_cast<char>(0x80);
  m[7] = 2;                        // two answers
  // a CNAME (pointer to the question name) then an A record
  m += std::string("\xc0\x0c\x00\x05\x00\x01\x00\x00\x00\x3c\x00\x02\xc0\x0c", 14);
  m += std::string("\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\xcb\x00\x71\x0a", 16);
  auto a = ParseDnsAnswerA(m, 7);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->size(), 1u);
  char buf[16];
  inet_ntop(AF_INET, &(*a)[0], buf, sizeof buf);
  EXPECT_STREQ(buf, "203.0.113.10");
  EXPECT_FALSE(ParseDnsAnswerA(m, 8).ok());  // wrong id
}

TEST(DnsMessageTest, HostileMessagesAreRefusedNotFollowed) {
  EXPECT_FALSE(ParseDnsQuery("").ok());
  EXPECT_FALSE(ParseDnsQuery(std::string(11, '\0')).ok());
  std::string loop = BuildDnsQuery(1, "x");
  loop.replace(12, 3, std::string("\xc0\x0c", 2));  // pointer to itself
  EXPECT_FALSE(ParseDnsQuery(loop).ok());
  std::string fwd = BuildDnsQuery(1, "x");
  fwd.replace(12, 3, std::string("\xc0\x20", 2));  // forward pointer
  EXPECT_FALSE(ParseDnsQuery(fwd).ok());
  std::string longlabel = BuildDnsQuery(1, "x");
  longlabel[12] = 60;  // label longer than the message
  EXPECT_FALSE(ParseDnsQuery(longlabel).ok());
}

}  // namespace
}  // namespace space::gateway
