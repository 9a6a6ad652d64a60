// Firewall: the node's nftables table (through libnftables), which lets a sandbox reach its
// gateway and nothing else.
//
// One table per node, `inet space_<slot>`, matching the node's host-side veths by name prefix
// (`sp<slot>-*`), so rules do not change per sandbox: creating a sandbox costs no nftables
// transaction. The rules:
//  - DNS (53/udp, 53/tcp) to any address goes to the gateway's resolver; TCP to 80 and 443 to
//    its transparent HTTP and TLS listeners; TCP to the gateway address port 3128 to its
//    explicit proxy; any other TCP port to its generic TCP listener (CIDR rules only);
//  - a packet whose source address does not route back through the veth it came in on is
//    dropped (a sandbox's root may change its own address: it cannot spoof another's);
//  - the host accepts from a sandbox only those redirected gateway ports; everything else
//    (other host addresses and services, ICMP, other UDP, IPv6) is dropped;
//  - nothing is forwarded to or from a sandbox veth: no other sandbox, no host network, no
//    link-local or metadata address, no multicast.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace space::network {

// The real ports the node's gateway listens on (ephemeral, on the gateway address).
struct GatewayPorts {
  uint16_t dns = 0;    // UDP
  uint16_t http = 0;   // transparent port 80
  uint16_t tls = 0;    // transparent port 443
  uint16_t proxy = 0;  // explicit proxy, published to sandboxes as gateway:3128
  uint16_t tcp = 0;    // any other TCP port
};

// The address every sandbox sees as its gateway (the host end of its veth).
inline constexpr char kGatewayAddress[] = "100.64.0.1";
inline constexpr uint16_t kPublishedProxyPort = 3128;

// The table's text; exposed for tests.
std::string FirewallRules(int net_slot, const GatewayPorts& ports);
std::string FirewallTableName(int net_slot);

// Replaces the node's table with the rules for `ports` in one nftables transaction.
Status InstallFirewall(int net_slot, const GatewayPorts& ports);
// Deletes the node's table; succeeds when it is already gone.
Status RemoveFirewall(int net_slot);

}  // namespace space::network
