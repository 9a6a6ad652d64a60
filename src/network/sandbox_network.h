// SandboxNetwork: joins each sandbox's network namespace to the node through one veth pair,
// and removes it again.
//
// Addressing: every sandbox sees the same gateway, 100.64.0.1 (the host end of its own veth,
// point-to-point), and gets 100.96.0.0 + 2 + its host uid slot, which is unique on the host
// across all nodes. The gateway tells sandboxes apart by that source address; the firewall
// (firewall.h) drops any packet whose source does not route back through the veth it came
// from. Host-side links are named sp<net slot>-<uid slot>, so one node's firewall rules and
// reconciliation never touch another node's links. Thread-safe.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <set>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::network {

class Netlink;

struct SandboxAddress {
  std::string host_link;  // host end of the veth
  in_addr address{};      // the sandbox's own address
};

class SandboxNetwork {
 public:
  // `net_slot` (0..99) is this node's, held exclusively by the caller.
  explicit SandboxNetwork(int net_slot) : net_slot_(net_slot) {}

  int net_slot() const { return net_slot_; }
  std::string LinkPrefix() const;
  SandboxAddress AddressFor(int64_t uid_slot) const;

  // Creates the veth pair into the network namespace `netns_fd` (the caller has checked that
  // it is the sandbox's) and configures both ends: eth0 inside with the sandbox's address, a
  // route to the gateway and the default route through it. A link left over under the same
  // name is replaced.
  Result<SandboxAddress> Attach(int64_t uid_slot, int netns_fd);
  // For a vm sandbox: a tap link under the same host name, configured as a veth's host end
  // (the gateway's address, the route to the sandbox's), and the descriptor of its frames for
  // the VMM. The guest configures its side itself. The link lives as long as the descriptor.
  Result<SandboxAddress> AttachTap(int64_t uid_slot, UniqueFd* tap);
  // Removes the host end (the kernel removes the peer). Succeeds when already gone.
  Status Detach(int64_t uid_slot);
  // Removes every link of this node whose name is not in `keep`.
  Status Reconcile(const std::set<std::string>& keep);

 private:
  // The host end's address, route and state, as for a veth's and a tap's alike.
  Status ConfigureHostEnd(Netlink& host, const SandboxAddress& sa);

  const int net_slot_;
};

// The sandbox address of a uid slot, as the gateway sees it on accepted connections.
in_addr SandboxAddressForSlot(int64_t uid_slot);

}  // namespace space::network
