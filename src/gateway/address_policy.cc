#include "gateway/address_policy.h"

#include <arpa/inet.h>
#include <ifaddrs.h>

#include <chrono>
#include <mutex>
#include <set>

namespace space::gateway {
namespace {

bool InNet(uint32_t a, uint32_t net, int prefix) {
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return (a & mask) == (net & mask);
}

constexpr uint32_t Ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return a << 24 | b << 16 | c << 8 | d; }

// The host's own IPv4 addresses, re-read at most once a second (interfaces come and go).
bool IsHostAddress(uint32_t a) {
  static std::mutex mu;
  static std::set<uint32_t> addrs;
  static std::chrono::steady_clock::time_point read_at;
  std::lock_guard<std::mutex> lock(mu);
  auto now = std::chrono::steady_clock::now();
  if (addrs.empty() || now - read_at > std::chrono::seconds(1)) {
    addrs.clear();
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) == 0) {
      for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET) {
          addrs.insert(ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr));
        }
      }
      ::freeifaddrs(list);
    }
    read_at = now;
  }
  return addrs.count(a) > 0;
}

}  // namespace

bool IsForbiddenAddress(in_addr in) {
  uint32_t a = ntohl(in.s_addr);
  return InNet(a, Ip(0, 0, 0, 0), 8) || InNet(a, Ip(127, 0, 0, 0), 8) || InNet(a, Ip(169, 254, 0, 0), 16) ||
         InNet(a, Ip(100, 64, 0, 0), 10) || InNet(a, Ip(224, 0, 0, 0), 4) || InNet(a, Ip(240, 0, 0, 0), 4) ||
         IsHostAddress(a);
}

bool IsForbiddenResolvedAddress(in_addr in) {
  uint32_t a = ntohl(in.s_addr);
  return IsForbiddenAddress(in) || InNet(a, Ip(10, 0, 0, 0), 8) || InNet(a, Ip(172, 16, 0, 0), 12) ||
         InNet(a, Ip(192, 168, 0, 0), 16) || InNet(a, Ip(198, 18, 0, 0), 15) || InNet(a, Ip(192, 0, 0, 0), 24);
}

}  // namespace space::gateway
