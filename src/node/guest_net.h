// Asks a vm sandbox's guest (spaced, PID 1 of the microVM) to configure its NIC: the
// sandbox's address, the gateway, the MAC (protocol.h kNetConfig). The node's only way to
// address a guest's network: nothing reaches the guest from the network to configure it.
#pragma once

#include <netinet/in.h>

#include <string>

#include "common/status.h"
#include "node/live.h"

namespace space::node {

Status GuestConfigureNetwork(LiveSandbox* live, in_addr address, in_addr gateway, const std::string& mac);

}  // namespace space::node
