// Network namespace: a sandbox's netns holds only loopback until the network gateway
// (another component) adds its single interface. The runtime just brings lo up.
#pragma once

#include "runtime/ns/steps.h"

namespace space::runtime::ns {

// Child side, async-signal-safe: sets IFF_UP on "lo" in the calling process's network
// namespace. Returns 0 or an errno, with the failing call in *call.
int ChildLoopbackUp(Call* call);

}  // namespace space::runtime::ns
