#include "guest/vm_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace space::guest {
namespace {

constexpr char kGood[] = R"({"address": "100.96.0.9", "gateway": "100.64.0.1", "mac": "52:54:00:0a:0b:0c"})";

TEST(ParseNetConfig, ReadsAddressesAndMac) {
  auto c = ParseNetConfig(kGood);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  char buf[INET_ADDRSTRLEN];
  EXPECT_STREQ(::inet_ntop(AF_INET, &c->address, buf, sizeof buf), "100.96.0.9");
  EXPECT_STREQ(::inet_ntop(AF_INET, &c->gateway, buf, sizeof buf), "100.64.0.1");
  EXPECT_EQ(c->mac[0], 0x52);
  EXPECT_EQ(c->mac[5], 0x0c);
}

TEST(ParseNetConfig, RefusesWhatIsNotAnAddress) {
  for (const char* bad : {
           R"({"address": "100.96.0.9", "gateway": "100.64.0.1"})",
           R"({"address": "100.96.0.999", "gateway": "100.64.0.1", "mac": "52:54:00:0a:0b:0c"})",
           R"({"address": "100.96.0.9 ", "gateway": "100.64.0.1", "mac": "52:54:00:0a:0b:0c"})",
           R"({"address": 5, "gateway": "100.64.0.1", "mac": "52:54:00:0a:0b:0c"})",
           R"({"address": "100.96.0.9", "gateway": "100.64.0.1", "mac": "01:00:5e:00:00:01"})",
           R"({"address": "100.96.0.9", "gateway": "100.64.0.1", "mac": "52:54:00:0a:0b:0cc"})",
           R"({"address": "100.96.0.9", "gateway": "100.64.0.1", "mac": "52-54-00-0a-0b-0c"})",
           R"(["100.96.0.9"])",
           "not json",
       }) {
    EXPECT_FALSE(ParseNetConfig(bad).ok()) << bad;
  }
}

std::string ReadAll(const char* path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Applied twice in a network namespace of its own, to a tap standing in for eth0: the
// address, the MAC and both routes are there, and the second application (a restored guest
// given a new identity) replaces the first.
TEST(ApplyNetConfig, ConfiguresALinkInAFreshNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace and a tap)";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto fail = [](int code) { ::_exit(code); };
    if (::unshare(CLONE_NEWNET) != 0) fail(2);
    int tun = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (tun < 0) fail(3);
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "tst0");
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    if (::ioctl(tun, TUNSETIFF, &ifr) != 0) fail(4);
    if (!BringUpLoopback().ok()) fail(5);
    auto first = ParseNetConfig(kGood);
    if (!first.ok() || !ApplyNetConfig(*first, "tst0").ok()) fail(6);
    auto second = ParseNetConfig(R"({"address": "100.96.0.10", "gateway": "100.64.0.1", "mac": "52:54:00:0a:0b:0d"})");
    Status st = second.ok() ? ApplyNetConfig(*second, "tst0") : second.status();
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      fail(7);
    }
    int s = ::socket(AF_INET, SOCK_DGRAM, 0);
    ifreq q{};
    std::strcpy(q.ifr_name, "tst0");
    if (::ioctl(s, SIOCGIFADDR, &q) != 0) fail(8);
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(&q.ifr_addr);
    if (std::strcmp(::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf), "100.96.0.10") != 0) fail(9);
    if (::ioctl(s, SIOCGIFHWADDR, &q) != 0 || static_cast<unsigned char>(q.ifr_hwaddr.sa_data[5]) != 0x0d) fail(10);
    // /proc/net/route: destination and gateway in host-order hex of the network-order bytes.
    const std::string routes = ReadAll("/proc/net/route");
    if (routes.find("tst0\t00000000\t01004064") == std::string::npos) fail(11);  // default via 100.64.0.1
    if (routes.find("tst0\t01004064\t00000000") == std::string::npos) fail(12);  // host route to it
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "step that failed (see the test's source)";
}

}  // namespace
}  // namespace space::guest
