// The gateway worker's own seccomp filter, loaded after it drops root and before it starts
// serving sandbox traffic. The worker already holds no capability; the filter narrows what a
// compromise of its parsers could still reach: no other program (exec), no namespaces or
// mounts, no tracing or signalling of other processes (it shares nothing with them, but a
// uid may be reused on a host), no netlink, packet or crypto-API sockets, and none of the
// large kernel surfaces the sandbox filter refuses too (bpf, io_uring, keyrings, ...).
#pragma once

#include "common/result.h"

namespace space::gateway {

// Loads the filter for every thread of the calling process (TSYNC). Requires no_new_privs
// or CAP_SYS_ADMIN. Default allow: the worker's OpenSSL, resolver and threads keep working
// as libraries change; what it refuses is listed in worker_seccomp.cc with the reasons.
Status LoadWorkerSeccomp();

}  // namespace space::gateway
