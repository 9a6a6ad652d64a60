#include "network/sandbox_network.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include <cstdio>

#include "common/log.h"
#include "common/syscall.h"
#include "network/firewall.h"
#include "network/netlink.h"
#include "network/tap.h"

namespace space::network {

in_addr SandboxAddressForSlot(int64_t uid_slot) {
  in_addr a{};
  a.s_addr = htonl((100u << 24 | 96u << 16) + 2u + static_cast<uint32_t>(uid_slot));
  return a;
}

std::string SandboxNetwork::LinkPrefix() const {
  char buf[16];
  std::snprintf(buf, sizeof buf, "sp%02d-", net_slot_);
  return buf;
}

SandboxAddress SandboxNetwork::AddressFor(int64_t uid_slot) const {
  return {LinkPrefix() + std::to_string(uid_slot), SandboxAddressForSlot(uid_slot)};
}

Result<SandboxAddress> SandboxNetwork::Attach(int64_t uid_slot, int netns_fd) {
  SandboxAddress sa = AddressFor(uid_slot);
  ASSIGN_OR_RETURN(in_addr gw, ParseIpv4(kGatewayAddress));
  ASSIGN_OR_RETURN(Netlink host, Netlink::Open());
  if (Status st = host.DeleteLink(sa.host_link); !st.ok() && st.code() != StatusCode::kNotFound) return st;
  RETURN_IF_ERROR(host.CreateVeth(sa.host_link, "eth0", netns_fd));
  auto configure = [&]() -> Status {
    RETURN_IF_ERROR(ConfigureHostEnd(host, sa));
    ASSIGN_OR_RETURN(Netlink inside, Netlink::OpenInNetns(netns_fd));
    ASSIGN_OR_RETURN(int sidx, inside.LinkIndex("eth0"));
    RETURN_IF_ERROR(inside.AddPeerAddress(sidx, sa.address, gw));
    RETURN_IF_ERROR(inside.SetLinkUp(sidx));
    return inside.AddDefaultRoute(sidx, gw);
  };
  if (Status st = configure(); !st.ok()) {
    (void)host.DeleteLink(sa.host_link);
    return st.Annotate("sandbox network " + sa.host_link);
  }
  return sa;
}

Status SandboxNetwork::ConfigureHostEnd(Netlink& host, const SandboxAddress& sa) {
  ASSIGN_OR_RETURN(in_addr gw, ParseIpv4(kGatewayAddress));
  ASSIGN_OR_RETURN(int hidx, host.LinkIndex(sa.host_link));
  // No IPv6 on the host end at all (no link-local address to talk to); the firewall drops
  // IPv6 from sandboxes besides.
  RETURN_IF_ERROR(WriteSmallFile("/proc/sys/net/ipv6/conf/" + sa.host_link + "/disable_ipv6", "1"));
  RETURN_IF_ERROR(host.AddPeerAddress(hidx, gw, sa.address));
  return host.SetLinkUp(hidx);
}

Result<SandboxAddress> SandboxNetwork::AttachTap(int64_t uid_slot, UniqueFd* tap) {
  SandboxAddress sa = AddressFor(uid_slot);
  ASSIGN_OR_RETURN(Netlink host, Netlink::Open());
  if (Status st = host.DeleteLink(sa.host_link); !st.ok() && st.code() != StatusCode::kNotFound) return st;
  ASSIGN_OR_RETURN(UniqueFd fd, CreateTap(sa.host_link));
  // Closing the descriptor on failure removes the link with it.
  RETURN_IF_ERROR(ConfigureHostEnd(host, sa).Annotate("sandbox network " + sa.host_link));
  *tap = std::move(fd);
  return sa;
}

Status SandboxNetwork::Detach(int64_t uid_slot) {
  ASSIGN_OR_RETURN(Netlink host, Netlink::Open());
  Status st = host.DeleteLink(AddressFor(uid_slot).host_link);
  return st.code() == StatusCode::kNotFound ? Status::Ok() : st;
}

Status SandboxNetwork::Reconcile(const std::set<std::string>& keep) {
  ASSIGN_OR_RETURN(Netlink host, Netlink::Open());
  ASSIGN_OR_RETURN(std::vector<std::string> links, host.ListLinks(LinkPrefix()));
  for (const auto& l : links) {
    if (keep.count(l)) continue;
    if (Status st = host.DeleteLink(l); !st.ok() && st.code() != StatusCode::kNotFound) {
      LogWarn("network", st.ToString());
    }
  }
  return Status::Ok();
}

}  // namespace space::network
