// The guest's side of a vm sandbox's network: spaced, PID 1 of the microVM, configures its
// NIC (eth0, virtio-net) as the node tells it over the channel (kNetConfig), never from
// anything on the network (no DHCP). Addressing mirrors an ns sandbox's veth: the sandbox's
// own /32 address, a host route to the gateway and the default route through it.
#pragma once

#include <netinet/in.h>

#include <string>
#include <string_view>

#include "common/result.h"

namespace space::guest {

struct NetConfig {
  in_addr address{};  // the sandbox's address
  in_addr gateway{};  // the host end of its link (the node's gateway)
  unsigned char mac[6] = {};
};

// Parses a kNetConfig payload: {"address": "a.b.c.d", "gateway": "a.b.c.d",
// "mac": "xx:xx:xx:xx:xx:xx"} (unicast, locally administered or QEMU's 52:54:00).
Result<NetConfig> ParseNetConfig(std::string_view payload);

// Brings `lo` up (a fresh VM's is down).
Status BringUpLoopback();

// Applies `config` to eth0: down (which drops its old addresses, routes and neighbours,
// from the checkpoint this guest may have been restored from), the MAC, the address, up, the
// route to the gateway and the default route. Idempotent. Needs CAP_NET_ADMIN.
Status ApplyNetConfig(const NetConfig& config, const std::string& device = "eth0");

}  // namespace space::guest
