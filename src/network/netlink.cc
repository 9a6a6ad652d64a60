#include "network/netlink.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace space::network {
namespace {

// Big enough for any request here and for a dump chunk (MNL_SOCKET_BUFFER_SIZE is 8 KiB).
constexpr size_t kBufSize = 32768;

}  // namespace

Netlink::Netlink(mnl_socket* s) : sock_(s), portid_(mnl_socket_get_portid(s)), buf_(new char[kBufSize]) {
  seq_ = static_cast<unsigned>(::time(nullptr));
}
Netlink::Netlink(Netlink&& o) noexcept
    : sock_(std::exchange(o.sock_, nullptr)), portid_(o.portid_), seq_(o.seq_), buf_(std::move(o.buf_)) {}
Netlink& Netlink::operator=(Netlink&& o) noexcept {
  if (this != &o) {
    if (sock_) mnl_socket_close(sock_);
    sock_ = std::exchange(o.sock_, nullptr);
    portid_ = o.portid_;
    seq_ = o.seq_;
    buf_ = std::move(o.buf_);
  }
  return *this;
}
Netlink::~Netlink() {
  if (sock_) mnl_socket_close(sock_);
}

Result<Netlink> Netlink::Open() {
  mnl_socket* s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
  if (s == nullptr) return ErrnoStatus("socket", "NETLINK_ROUTE", errno);
  if (mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
    int err = errno;
    mnl_socket_close(s);
    return ErrnoStatus("bind", "NETLINK_ROUTE", err);
  }
  return Netlink(s);
}

Result<Netlink> Netlink::OpenInNetns(int netns_fd) {
  // A socket belongs to the namespace of the thread that created it; a throwaway thread
  // enters the target namespace, so the caller's thread (and its namespace) is untouched.
  Result<Netlink> out = Internal("netns thread did not run");
  std::thread t([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      out = ErrnoStatus("setns", "sandbox netns", errno);
      return;
    }
    out = Open();
  });
  t.join();
  return out;
}

Status Netlink::Transact(const std::string& what) {
  auto* nlh = reinterpret_cast<nlmsghdr*>(buf_.get());
  nlh->nlmsg_flags |= NLM_F_ACK;
  nlh->nlmsg_seq = ++seq_;
  if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) return ErrnoStatus("netlink send", what, errno);
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(sock_, buf_.get(), kBufSize);
    if (n < 0) return ErrnoStatus("netlink recv", what, errno);
    int r = mnl_cb_run(buf_.get(), static_cast<size_t>(n), seq_, portid_, nullptr, nullptr);
    if (r == MNL_CB_ERROR) return ErrnoStatus("netlink", what, errno);
    if (r == MNL_CB_STOP) return Status::Ok();
  }
}

Status Netlink::CreateVeth(const std::string& name, const std::string& peer_name, int peer_netns_fd) {
  if (name.size() >= IFNAMSIZ || peer_name.size() >= IFNAMSIZ) return InvalidArgument("interface name too long");
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_NEWLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name.c_str());
  nlattr* linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
  mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
  nlattr* data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
  nlattr* peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
  // The peer's attributes follow its own ifinfomsg inside the nest.
  auto* pifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  pifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_name.c_str());
  mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, static_cast<uint32_t>(peer_netns_fd));
  mnl_attr_nest_end(nlh, peer);
  mnl_attr_nest_end(nlh, data);
  mnl_attr_nest_end(nlh, linkinfo);
  return Transact("create veth " + name);
}

Status Netlink::DeleteLink(const std::string& name) {
  if (name.size() >= IFNAMSIZ) return InvalidArgument("interface name too long");
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_DELLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name.c_str());
  Status st = Transact("delete link " + name);
  if (!st.ok() && errno == ENODEV) return NotFound("link " + name + " does not exist");
  return st;
}

namespace {

struct LinkScan {
  std::string prefix;
  std::string exact;
  int index = -1;
  std::vector<std::string> names;
};

int OnLinkAttr(const nlattr* attr, void* arg) {
  if (mnl_attr_get_type(attr) == IFLA_IFNAME && mnl_attr_validate(attr, MNL_TYPE_STRING) >= 0) {
    *static_cast<std::string*>(arg) = mnl_attr_get_str(attr);
  }
  return MNL_CB_OK;
}

int OnLink(const nlmsghdr* nlh, void* arg) {
  auto* scan = static_cast<LinkScan*>(arg);
  auto* ifm = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
  std::string name;
  if (mnl_attr_parse(nlh, sizeof(*ifm), OnLinkAttr, &name) < 0 || name.empty()) return MNL_CB_OK;
  if (!scan->exact.empty()) {
    if (name == scan->exact) scan->index = ifm->ifi_index;
  } else if (name.compare(0, scan->prefix.size(), scan->prefix) == 0) {
    scan->names.push_back(name);
  }
  return MNL_CB_OK;
}

}  // namespace

Result<std::vector<std::string>> Netlink::ListLinks(const std::string& prefix) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = ++seq_;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) return ErrnoStatus("netlink send", "list links", errno);
  LinkScan scan;
  scan.prefix = prefix;
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(sock_, buf_.get(), kBufSize);
    if (n < 0) return ErrnoStatus("netlink recv", "list links", errno);
    int r = mnl_cb_run(buf_.get(), static_cast<size_t>(n), seq_, portid_, OnLink, &scan);
    if (r == MNL_CB_ERROR) return ErrnoStatus("netlink", "list links", errno);
    if (r == MNL_CB_STOP) break;
  }
  return scan.names;
}

Result<int> Netlink::LinkIndex(const std::string& name) {
  if (name.size() >= IFNAMSIZ) return InvalidArgument("interface name too long");
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  nlh->nlmsg_seq = ++seq_;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name.c_str());
  if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) return ErrnoStatus("netlink send", "get link " + name, errno);
  ssize_t n = mnl_socket_recvfrom(sock_, buf_.get(), kBufSize);
  if (n < 0) return ErrnoStatus("netlink recv", "get link " + name, errno);
  LinkScan scan;
  scan.exact = name;
  if (mnl_cb_run(buf_.get(), static_cast<size_t>(n), seq_, portid_, OnLink, &scan) == MNL_CB_ERROR) {
    if (errno == ENODEV) return NotFound("link " + name + " does not exist");
    return ErrnoStatus("netlink", "get link " + name, errno);
  }
  if (scan.index < 0) return NotFound("link " + name + " does not exist");
  return scan.index;
}

Status Netlink::SetLinkUp(int ifindex) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_NEWLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  ifm->ifi_index = ifindex;
  ifm->ifi_flags = IFF_UP;
  ifm->ifi_change = IFF_UP;
  return Transact("link up");
}

Status Netlink::AddPeerAddress(int ifindex, in_addr local, in_addr peer) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_NEWADDR;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifaddrmsg)));
  ifa->ifa_family = AF_INET;
  ifa->ifa_prefixlen = 32;
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  ifa->ifa_index = static_cast<unsigned>(ifindex);
  mnl_attr_put(nlh, IFA_LOCAL, sizeof local, &local);
  mnl_attr_put(nlh, IFA_ADDRESS, sizeof peer, &peer);
  return Transact("add address " + FormatIpv4(local) + " peer " + FormatIpv4(peer));
}

Status Netlink::AddDefaultRoute(int ifindex, in_addr gateway) {
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.get());
  nlh->nlmsg_type = RTM_NEWROUTE;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = 0;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_protocol = RTPROT_BOOT;
  rtm->rtm_scope = RT_SCOPE_UNIVERSE;
  rtm->rtm_type = RTN_UNICAST;
  mnl_attr_put(nlh, RTA_GATEWAY, sizeof gateway, &gateway);
  mnl_attr_put_u32(nlh, RTA_OIF, static_cast<uint32_t>(ifindex));
  return Transact("add default route");
}

Result<in_addr> ParseIpv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return InvalidArgument("not an IPv4 address: " + text);
  return a;
}

std::string FormatIpv4(in_addr a) {
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

}  // namespace space::network
