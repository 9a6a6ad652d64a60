// A tap device: a network link whose other end is a file descriptor, for a VMM to carry a
// guest's frames (the vm runtime's virtio-net backend).
#pragma once

#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::network {

// Creates the tap link `name` in the caller's network namespace (CAP_NET_ADMIN) and returns
// the descriptor that carries its frames: Ethernet frames with no packet-info header, one
// per read or write. Not persistent: the link goes when the last copy of the descriptor
// closes, so a VMM that dies (or a launch that fails) leaves no link behind.
Result<UniqueFd> CreateTap(const std::string& name);

}  // namespace space::network
