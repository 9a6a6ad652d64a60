#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "common/syscall.h"
#include "network/firewall.h"
#include "network/netlink.h"
#include "network/sandbox_network.h"

namespace space::network {
namespace {

// Net slot 99 is never handed to a node by the tests' servers unless 99 others run.
constexpr int kTestSlot = 99;

TEST(FirewallRulesTest, EveryVerdictIsPerNodePrefix) {
  GatewayPorts p{1001, 1002, 1003, 1004, 1005};
  std::string t = FirewallRules(7, p);
  EXPECT_NE(t.find("table inet space_07"), std::string::npos);
  EXPECT_NE(t.find("iifname \"sp07-*\" drop"), std::string::npos);
  EXPECT_NE(t.find("tcp dport 443 redirect to :1003"), std::string::npos);
  EXPECT_NE(t.find("fib saddr . iif oif missing drop"), std::string::npos);
  EXPECT_EQ(t.find("sp7-"), std::string::npos);
}

TEST(AddressTest, SlotsMapToDistinctAddresses) {
  EXPECT_EQ(FormatIpv4(SandboxAddressForSlot(0)), "100.96.0.2");
  EXPECT_EQ(FormatIpv4(SandboxAddressForSlot(300)), "100.96.1.46");
  SandboxNetwork n(3);
  EXPECT_EQ(n.AddressFor(12).host_link, "sp03-12");
}

class RootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  }
};

TEST_F(RootTest, FirewallInstallsAndRemoves) {
  ASSERT_TRUE(InstallFirewall(kTestSlot, {2001, 2002, 2003, 2004, 2005}).ok());
  ASSERT_TRUE(InstallFirewall(kTestSlot, {3001, 3002, 3003, 3004, 3005}).ok());  // replaces
  EXPECT_EQ(std::system("nft list table inet space_99 | grep -q 'redirect to :3003'"), 0);
  EXPECT_NE(std::system("nft list table inet space_99 | grep -q 'redirect to :2003'"), 0);
  ASSERT_TRUE(RemoveFirewall(kTestSlot).ok());
  ASSERT_TRUE(RemoveFirewall(kTestSlot).ok());  // idempotent
  EXPECT_NE(std::system("nft list table inet space_99 >/dev/null 2>&1"), 0);
}

TEST_F(RootTest, AttachConfiguresBothEndsAndDetachRemoves) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(1);
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  SandboxNetwork net(kTestSlot);
  int netns = ::open(("/proc/" + std::to_string(child) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(netns, 0);
  auto sa = net.Attach(4242, netns);
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  EXPECT_EQ(sa->host_link, "sp99-4242");
  std::string pid = std::to_string(child);
  EXPECT_EQ(std::system(("nsenter -t " + pid + " -n ip -4 addr show eth0 | grep -q 'inet 100.96.16.148 peer 100.64.0.1/32'").c_str()), 0);
  EXPECT_EQ(std::system(("nsenter -t " + pid + " -n ip route | grep -q 'default via 100.64.0.1 dev eth0'").c_str()), 0);
  EXPECT_EQ(std::system("ip -4 addr show sp99-4242 | grep -q 'inet 100.64.0.1 peer 100.96.16.148/32'"), 0);
  // Attaching again replaces the link rather than failing.
  ASSERT_TRUE(net.Attach(4242, netns).ok());
  ASSERT_TRUE(net.Reconcile({"sp99-4242"}).ok());
  EXPECT_EQ(std::system("ip link show sp99-4242 >/dev/null 2>&1"), 0);
  ASSERT_TRUE(net.Reconcile({}).ok());
  EXPECT_NE(std::system("ip link show sp99-4242 >/dev/null 2>&1"), 0);
  EXPECT_TRUE(net.Detach(4242).ok());  // already gone
  ::close(netns);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace space::network
