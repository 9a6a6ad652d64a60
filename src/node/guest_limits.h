// Asks a vm sandbox's guest (spaced) what limits its kernel has seen (protocol.h kLimitsQuery):
// the guest's own OOM kills and how full its root filesystem is. From outside, the node sees
// only the VMM's cgroup and the disk image, neither of which tells.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "node/live.h"

namespace space::node {

struct GuestLimitsSeen {
  uint64_t oom_kills = 0;
  uint64_t disk_total = 0;
  uint64_t disk_avail = 0;
};

// The guest's answer within `timeout_ms`; the guest is untrusted, so a malformed answer is an
// error, never a number made up.
Result<GuestLimitsSeen> GuestQueryLimits(LiveSandbox* live, int64_t timeout_ms);

}  // namespace space::node
