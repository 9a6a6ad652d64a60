// What a vm guest's kernel knows of the limits its sandbox hit, for the node's limits_hit:
// the node sees only the VMM from outside (its cgroup, the disk image), not the guest's own
// out-of-memory kills or its filesystem filling up. Read on request (protocol.h kLimitsQuery).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace space::guest {

struct GuestLimits {
  uint64_t oom_kills = 0;   // the guest kernel's /proc/vmstat oom_kill
  uint64_t disk_total = 0;  // the root filesystem: size, and what an unprivileged write may still use
  uint64_t disk_avail = 0;
};

// The oom_kill counter of a /proc/vmstat text (0 when absent: a kernel without the line).
uint64_t ParseOomKills(std::string_view vmstat);

// Reads /proc/vmstat and statfs of `root`.
Result<GuestLimits> ReadGuestLimits(const std::string& root);

// The kLimits JSON: {"oom_kills", "disk_total", "disk_avail"}.
std::string EncodeGuestLimits(const GuestLimits& limits);

}  // namespace space::guest
