#include "guest/vm_net.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/syscall.h"
#include "protocol/json_util.h"

namespace space::guest {
namespace {

Result<in_addr> Ipv4Member(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() > 15) {
    return InvalidArgument(std::string("net config: ") + key + " must be a dotted-quad IPv4 address");
  }
  in_addr a{};
  if (::inet_pton(AF_INET, it->get_ref<const std::string&>().c_str(), &a) != 1) {
    return InvalidArgument(std::string("net config: ") + key + " must be a dotted-quad IPv4 address");
  }
  return a;
}

Status Ioctl(int fd, unsigned long request, void* arg, const char* what, const std::string& device) {
  if (::ioctl(fd, request, arg) != 0) return ErrnoStatus(what, device, errno);
  return Status::Ok();
}

ifreq Request(const std::string& device) {
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, device.data(), std::min(device.size(), sizeof ifr.ifr_name - 1));
  return ifr;
}

sockaddr_in Inet(in_addr a) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr = a;
  return sin;
}

Status SetUp(int fd, const std::string& device, bool up) {
  ifreq ifr = Request(device);
  RETURN_IF_ERROR(Ioctl(fd, SIOCGIFFLAGS, &ifr, "ioctl SIOCGIFFLAGS", device));
  if (up) {
    ifr.ifr_flags |= IFF_UP;
  } else {
    ifr.ifr_flags &= ~IFF_UP;
  }
  return Ioctl(fd, SIOCSIFFLAGS, &ifr, "ioctl SIOCSIFFLAGS", device);
}

// A route through `device`; one that exists already is fine.
Status AddRoute(int fd, const std::string& device, in_addr dst, in_addr gateway, bool host) {
  rtentry rt{};
  sockaddr_in d = Inet(dst), g = Inet(gateway), m = Inet(in_addr{host ? htonl(0xffffffffu) : 0});
  std::memcpy(&rt.rt_dst, &d, sizeof d);
  std::memcpy(&rt.rt_genmask, &m, sizeof m);
  rt.rt_flags = RTF_UP | (host ? RTF_HOST : RTF_GATEWAY);
  if (!host) std::memcpy(&rt.rt_gateway, &g, sizeof g);
  char dev[IFNAMSIZ] = {};
  device.copy(dev, sizeof dev - 1);  // zero-filled above: always terminated
  rt.rt_dev = dev;
  if (::ioctl(fd, SIOCADDRT, &rt) != 0 && errno != EEXIST) {
    return ErrnoStatus("ioctl SIOCADDRT", host ? "route to the gateway" : "default route", errno);
  }
  return Status::Ok();
}

}  // namespace

Result<NetConfig> ParseNetConfig(std::string_view payload) {
  ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonObject(payload, "net config"));
  NetConfig c;
  ASSIGN_OR_RETURN(c.address, Ipv4Member(j, "address"));
  ASSIGN_OR_RETURN(c.gateway, Ipv4Member(j, "gateway"));
  auto mac = j.find("mac");
  unsigned v[6];
  char tail;
  if (mac == j.end() || !mac->is_string() || mac->get_ref<const std::string&>().size() != 17 ||
      std::sscanf(mac->get_ref<const std::string&>().c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3],
                  &v[4], &v[5], &tail) != 6) {
    return InvalidArgument("net config: mac must be xx:xx:xx:xx:xx:xx");
  }
  // Never a multicast or broadcast address as the NIC's own.
  if (v[0] & 1) return InvalidArgument("net config: mac must be a unicast address");
  for (int i = 0; i < 6; ++i) c.mac[i] = static_cast<unsigned char>(v[i]);
  return c;
}

Status BringUpLoopback() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus("socket", "AF_INET", errno);
  return SetUp(fd.get(), "lo", true);
}

Status ApplyNetConfig(const NetConfig& c, const std::string& device) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus("socket", "AF_INET", errno);
  RETURN_IF_ERROR(SetUp(fd.get(), device, false));
  ifreq ifr = Request(device);
  ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
  std::memcpy(ifr.ifr_hwaddr.sa_data, c.mac, sizeof c.mac);
  RETURN_IF_ERROR(Ioctl(fd.get(), SIOCSIFHWADDR, &ifr, "ioctl SIOCSIFHWADDR", device));
  ifr = Request(device);
  sockaddr_in a = Inet(c.address);
  std::memcpy(&ifr.ifr_addr, &a, sizeof a);
  RETURN_IF_ERROR(Ioctl(fd.get(), SIOCSIFADDR, &ifr, "ioctl SIOCSIFADDR", device));
  ifr = Request(device);
  sockaddr_in m = Inet(in_addr{htonl(0xffffffffu)});
  std::memcpy(&ifr.ifr_netmask, &m, sizeof m);
  RETURN_IF_ERROR(Ioctl(fd.get(), SIOCSIFNETMASK, &ifr, "ioctl SIOCSIFNETMASK", device));
  RETURN_IF_ERROR(SetUp(fd.get(), device, true));
  RETURN_IF_ERROR(AddRoute(fd.get(), device, c.gateway, in_addr{}, true));
  return AddRoute(fd.get(), device, in_addr{0}, c.gateway, false);
}

}  // namespace space::guest
