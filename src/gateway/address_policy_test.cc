#include "gateway/address_policy.h"

#include <arpa/inet.h>

#include <gtest/gtest.h>

namespace space::gateway {
namespace {

in_addr A(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a;
}

TEST(AddressPolicyTest, NeverReachable) {
  for (const char* s : {"127.0.0.1", "0.0.0.0", "169.254.169.254", "100.64.0.1", "100.96.0.5", "224.0.0.1",
                        "255.255.255.255"}) {
    EXPECT_TRUE(IsForbiddenAddress(A(s))) << s;
  }
  EXPECT_FALSE(IsForbiddenAddress(A("203.0.113.10")));
  EXPECT_FALSE(IsForbiddenAddress(A("10.1.2.3")));  // a CIDR rule may open a private range
}

TEST(AddressPolicyTest, ResolvedNamesMayNotPointInside) {
  for (const char* s : {"10.1.2.3", "172.16.0.1", "192.168.1.1", "127.0.0.1", "169.254.169.254"}) {
    EXPECT_TRUE(IsForbiddenResolvedAddress(A(s))) << s;
  }
  EXPECT_FALSE(IsForbiddenResolvedAddress(A("203.0.113.10")));
}

}  // namespace
}  // namespace space::gateway
