// Capability sets of the calling process: what the kernel knows of, and dropping some or all.
// Raw capget/capset and prctl; no libcap.
#pragma once

#include <sys/types.h>

#include <vector>

#include "common/result.h"

namespace space {

// The highest capability number the running kernel knows (/proc/sys/kernel/cap_last_cap).
int LastCapability();

// Removes `caps` from the bounding set (needs CAP_SETPCAP; numbers the kernel does not know
// are skipped) and from the permitted, effective, inheritable and ambient sets of the calling
// thread. Call before other threads start: capability sets are per thread.
Status DropCapabilities(const std::vector<int>& caps);

// Switches the process to `uid` and `gid` (real, effective, saved; no supplementary groups)
// and keeps its permitted capabilities, all effective again; `inheritable` go in the
// inheritable set too, so that a program run with them raised as ambient (common/subprocess.h)
// keeps them across exec. Needs CAP_SETUID and CAP_SETGID, and exactly one thread: ids are per
// process (glibc sets them on every thread) but capabilities per thread.
Status BecomeUserKeepingCapabilities(uid_t uid, gid_t gid, const std::vector<int>& inheritable);

// Whether `cap` is in this thread's effective set, and in the bounding set.
bool HasEffectiveCapability(int cap);
bool InBoundingSet(int cap);

}  // namespace space
