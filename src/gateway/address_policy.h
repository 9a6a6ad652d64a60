// Which upstream addresses the gateway never connects to, whatever a profile says: its own
// and the host's addresses, loopback, link-local (cloud metadata included), the sandbox
// range, multicast and broadcast. For names, private ranges too: a public name that resolves
// to 10.0.0.1 is DNS rebinding, while a CIDR rule may still open a private range explicitly.
#pragma once

#include <netinet/in.h>

#include <string>

namespace space::gateway {

// Never reachable: "this network", loopback, link-local, 100.64.0.0/10 (sandboxes and the
// gateway), multicast, reserved and broadcast, and any address of this host.
bool IsForbiddenAddress(in_addr a);
// Also refused for addresses a name resolved to: RFC 1918 private ranges, 198.18.0.0/15.
bool IsForbiddenResolvedAddress(in_addr a);

}  // namespace space::gateway
